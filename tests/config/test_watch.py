"""When a changed config file may be reloaded: polls over real files in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoscaler.config import parse_config
from autoscaler.config.watch import FileWatch, suspect_changes
from tests.config.helpers import TARGET

METRIC = """
[[autoscaler.metrics]]
type = "Pods"
pods = { metric = { name = "rps" }, target = { type = "AverageValue", averageValue = "10" }, query = 'rps{${pod_selector}}' }
"""
OTHER = TARGET.replace('name = "web"', 'name = "api"')


def rewrite(path: Path, data: bytes) -> None:
    """The same file (inode), new bytes and mtime."""
    descriptor = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)
    stamp = path.stat().st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def watched(tmp_path: Path) -> tuple[Path, FileWatch]:
    path = tmp_path / "autoscaler.toml"
    path.write_text(TARGET)
    return path, FileWatch(path)


def test_an_unchanged_file_gives_nothing(watched: tuple[Path, FileWatch]) -> None:
    """As long as the file is as loaded, no poll reports a change."""
    _, watch = watched
    assert [watch.poll(), watch.poll()] == [None, None]


def test_a_change_in_place_is_ready_once_it_stayed_the_same_across_a_poll(
    watched: tuple[Path, FileWatch],
) -> None:
    """Just changed: not ready; the same bytes, size and mtime at the next poll: ready, and
    beyond suspicion two polls later still."""
    path, watch = watched
    rewrite(path, (TARGET + "minReplicas = 2\n").encode())
    settled = [watch.poll() for _ in range(4)]
    assert [change.settled for change in settled if change] == [0, 1, 2, 3]
    assert [change.ready() for change in settled if change] == [False, True, True, True]
    assert [c.beyond_suspicion() for c in settled if c] == [False, False, False, True]


def test_a_change_still_being_written_starts_settling_again(
    watched: tuple[Path, FileWatch],
) -> None:
    """More bytes between two polls: the change counts from the last of them."""
    path, watch = watched
    rewrite(path, TARGET[:40].encode())
    assert watch.poll().settled == 0  # type: ignore[union-attr]
    rewrite(path, TARGET.encode() + b"minReplicas = 2\n")
    assert watch.poll().settled == 0  # type: ignore[union-attr]


def test_a_symlink_swap_is_ready_at_once(tmp_path: Path) -> None:
    """The kubelet's way: a new file behind the link is whole when it appears."""
    (tmp_path / "v1").write_text(TARGET)
    (tmp_path / "v2").write_text(TARGET + "minReplicas = 2\n")
    link = tmp_path / "autoscaler.toml"
    link.symlink_to("v1")
    watch = FileWatch(link)
    staged = tmp_path / "staged"
    staged.symlink_to("v2")
    staged.replace(link)
    change = watch.poll()
    assert change is not None
    assert change.swapped
    assert change.ready()
    assert change.beyond_suspicion()


def test_after_a_reload_only_the_next_change_counts(watched: tuple[Path, FileWatch]) -> None:
    """Once loaded (applied or rejected), the same file is not reported again."""
    path, watch = watched
    rewrite(path, b"garbage = [")
    change = watch.poll()
    assert change is not None
    watch.loaded(change)
    assert watch.poll() is None


@pytest.mark.parametrize(("fresh", "taken"), [
    (TARGET + METRIC + OTHER, []),
    (TARGET.replace("maxReplicas = 10", "maxReplicas = 12") + METRIC + OTHER, []),
    ("", ["shop/Deployment/web: dropped", "shop/Deployment/api: dropped"]),
    (TARGET.replace("maxReplicas = 10", "maxReplicas = 1") + METRIC + OTHER,
     ["shop/Deployment/web: maxReplicas 10 -> 1"]),
    (TARGET + OTHER, ["shop/Deployment/web: loses metric rps"]),
    (TARGET + METRIC.replace('"10"', '"1"') + OTHER, ["shop/Deployment/web: loses metric rps"]),
], ids=["same", "raised", "empty", "cut-number", "cut-before-metrics", "metric-changed"])
def test_what_a_cut_file_would_take_is_suspect(fresh: str, taken: list[str]) -> None:
    """Dropped targets, lower maxReplicas and metrics gone or changed are named; more is
    not suspect."""
    running = parse_config(TARGET + METRIC + OTHER)
    assert suspect_changes(running, parse_config(fresh)) == taken
