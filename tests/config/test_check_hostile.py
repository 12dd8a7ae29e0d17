"""`autoscaler check` as a user runs it, on hostile files: exit 1, one line each, fast, small.

Each case runs ``python -m autoscaler check`` in a child process and measures it: the
wall time and the child's own peak RSS (``bench/check_hostile.py`` prints the figures).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.config import hostile
from tests.config.helpers import TARGET

TIME_LIMIT = 5.0
"""Seconds: an interpreter start and the imports take about half a second here."""

MEMORY_MARGIN_KIB = 16 * 1024
"""Over a valid config's peak RSS: reading a 100 MB file whole would add 100 MB."""


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> hostile.CheckRun:
    """`check` on a small valid config: the time and memory any run costs."""
    run = hostile.run_check([str(hostile.valid(tmp_path_factory.mktemp("valid")))])
    assert run.code == 0, run.stderr
    return run


def _assert_rejected_in_one_line(run: hostile.CheckRun, path: Path, problems: int = 1) -> None:
    assert run.code == 1, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == problems + 1, lines
    assert all(line.startswith(f"{path}:") for line in lines), lines
    assert lines[-1] == f"{path}: invalid ({problems} problem{'s' if problems > 1 else ''})"


@pytest.mark.parametrize("make", list(hostile.HOSTILE.values()), ids=list(hostile.HOSTILE))
def test_hostile_file_is_refused_at_once(
    tmp_path: Path, make: Callable[[Path], Path]
) -> None:
    """/dev/zero, a FIFO, a deep nest, 100 MB, ...: exit 1, one line, no traceback, < 5 s."""
    path = make(tmp_path)
    run = hostile.run_check([str(path)], timeout=TIME_LIMIT * 4)
    _assert_rejected_in_one_line(run, path)
    assert run.seconds < TIME_LIMIT


def test_big_file_is_not_read_into_memory(tmp_path: Path, baseline: hostile.CheckRun) -> None:
    """Refusing a 100 MB file costs no more memory than checking a valid config."""
    run = hostile.run_check([str(hostile.big(tmp_path))])
    assert run.code == 1
    assert run.max_rss_kib < baseline.max_rss_kib + MEMORY_MARGIN_KIB, (
        run.max_rss_kib, baseline.max_rss_kib)


def test_named_fifo_does_not_block(tmp_path: Path) -> None:
    """A caFile that is a FIFO is refused without waiting for a writer."""
    path = tmp_path / "autoscaler.toml"
    path.write_text(f'[prometheus]\ncaFile = "{hostile.fifo(tmp_path)}"\n')
    run = hostile.run_check([str(path)], timeout=TIME_LIMIT * 4)
    _assert_rejected_in_one_line(run, path)
    assert run.seconds < TIME_LIMIT


def test_every_problem_is_one_line(tmp_path: Path) -> None:
    """Each problem is FILE:LINE: FIELD: message on a line of its own, then the count."""
    path = tmp_path / "autoscaler.toml"
    path.write_text('[daemon]\nsyncPeriod = "1ms"\nlistenAddress = ":0"\n[prometheus]\n'
                    'headers = { X = "a\\r\\nb" }\n' + TARGET + 'metrics = [{ type = "External", '
                    'external = { metric = { name = "q" }, query = "sum(q)", target = { '
                    'type = "Value", value = "1e400" } } }]\n'
                    'schedules = [{ cron = "0 0 30 2 *", duration = "1h", minReplicas = 1 }]\n')
    run = hostile.run_check([str(path)])
    _assert_rejected_in_one_line(run, path, problems=5)
    pattern = re.compile(rf"{re.escape(str(path))}:\d+: [\w.\[\]]+: \S.*")
    assert all(pattern.fullmatch(line) for line in run.stderr.splitlines()[:-1]), run.stderr


def test_file_broken_everywhere_stops_after_max_issues(tmp_path: Path) -> None:
    """4 MB of empty targets: the first 100 problems and a note, in bounded time."""
    path = hostile.broken_everywhere(tmp_path)
    run = hostile.run_check([str(path)])
    lines = run.stderr.splitlines()
    assert (run.code, len(lines)) == (1, 102), lines[-3:]
    assert lines[-2] == f"{path}: stopped after 100 problems; fix these and check again"
    assert lines[-1] == f"{path}: invalid (100 or more problems)"
    assert run.seconds < TIME_LIMIT * 2


@pytest.mark.parametrize("args", [
    [], ["a.toml", "b.toml"], ["--bogus", "a.toml"], ["--prometheus", "--syntax-only", "a.toml"],
    ["--timeout", "soon", "a.toml"],
], ids=["no-config", "two-configs", "unknown-option", "exclusive-options", "bad-timeout"])
def test_usage_error_exits_2(args: list[str]) -> None:
    """Wrong arguments are argparse's exit 2 with a usage line, never 1 or a traceback."""
    run = hostile.run_check(args)
    assert run.code == 2
    assert run.stderr.startswith("usage: autoscaler check")
    assert "Traceback" not in run.stderr


def test_syntax_only_skips_the_named_files(tmp_path: Path) -> None:
    """--syntax-only accepts a config whose files exist only on its host."""
    path = tmp_path / "autoscaler.toml"
    path.write_text('[prometheus]\ncaFile = "/nonexistent/ca.pem"\n' + TARGET)
    assert hostile.run_check([str(path)]).code == 1
    run = hostile.run_check([str(path), "--syntax-only"])
    assert (run.code, run.stderr) == (0, "")
