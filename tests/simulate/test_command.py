"""``autoscaler simulate`` end to end: configs through the daemon's loader, files written."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from autoscaler.commands import main
from tests.sim.prometheus import PrometheusProcess
from tests.simulate.builders import PNG_SIGNATURE, pixels_of
from tests.simulate.promdata import END, POINTS, START

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "examples" / "simulate"
TARGET = """
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "{name}" }}
minReplicas = 1
maxReplicas = 20
metrics = [{{ type = "Pods", pods = {{ metric = {{ name = "rps" }}, target = {{ type = "AverageValue", averageValue = "{target}" }}, query = 'sum by (pod) (rate(requests_total{{${{pod_selector}}}}[1m]))' }} }}]
"""



def command(argv: list[str]) -> int:
    return main(["simulate", *argv])

def config(
    tmp_path: Path, name: str = "a", *, targets: tuple[tuple[str, int], ...] = (("web", 100),)
) -> Path:
    """A config with one Pods ``rps`` metric per (deployment, averageValue) pair."""
    path = tmp_path / f"{name}.toml"
    path.write_text("".join(TARGET.format(name=n, target=t) for n, t in targets))
    return path


def csv_trace(tmp_path: Path, text: str = "time,demand\n0,100\n60,400\n300,400\n") -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def summary(out: Path) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = json.loads((out / "summary.json").read_text())["runs"]
    return runs


def test_example_main_job(tmp_path: Path) -> None:
    """The README's command on the shipped example: a day at 15 s, every output written."""
    out = tmp_path / "out"
    code = command([
        "--config", str(EXAMPLE / "web.toml"), "--workload", str(EXAMPLE / "workload.toml"),
        "--trace", str(EXAMPLE / "day.csv"), "--out", str(out),
    ])
    assert code == 0
    run, = summary(out)
    assert run["steps"] == 24 * 240 + 1
    assert 2 <= run["min_replicas"] < run["max_replicas"] <= 40  # type: ignore[operator]
    assert (out / "simulation.png").read_bytes()[:8] == PNG_SIGNATURE
    rows = (out / "timeline.csv").read_text().splitlines()
    assert len(rows) == 24 * 240 + 2
    assert rows[0].startswith("time,demand,current,desired,pending,starting,ready,deleting")


def test_compare_runs_both_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--compare simulates a second config on the same trace; both show in files and plot."""
    first = config(tmp_path, "a", targets=(("web", 100),))
    second = config(tmp_path, "b", targets=(("web", 50),))
    out = tmp_path / "out"
    code = command(["--config", str(first), "--compare", str(second), "--metric-window", "15s",
                    "--trace", str(csv_trace(tmp_path)), "--out", str(out)])
    assert code == 0
    runs = summary(out)
    assert [r["label"] for r in runs] == ["a", "b"]
    assert [r["max_replicas"] for r in runs] == [4, 8]
    assert (out / "timeline-compare.csv").exists()
    image = np.asarray(mpimg.imread(out / "simulation.png"))
    assert pixels_of(image, "tab:blue") > 500
    assert pixels_of(image, "tab:orange") > 500
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["a", "b"]


def test_flags_override_the_workload_file(tmp_path: Path) -> None:
    """--replicas on the command line wins over replicas in the [simulate] table."""
    workload = tmp_path / "w.toml"
    workload.write_text("[simulate]\nreplicas = 2\n")
    out = tmp_path / "out"
    code = command(["--config", str(config(tmp_path)), "--workload", str(workload),
                    "--replicas", "5", "--trace", str(csv_trace(tmp_path)), "--out", str(out),
                    "--no-plot"])
    assert code == 0
    first = (out / "timeline.csv").read_text().splitlines()[1].split(",")
    assert first[2] == "5"
    assert not (out / "simulation.png").exists()


def test_target_selects_one_of_several(tmp_path: Path) -> None:
    """--target picks a target by key; the default is the first."""
    path = config(tmp_path, targets=(("web", 100), ("api", 50)))
    out = tmp_path / "out"
    code = command(["--config", str(path), "--target", "shop/Deployment/api", "--metric-window",
                    "15s", "--trace", str(csv_trace(tmp_path)), "--out", str(out), "--no-plot"])
    assert code == 0
    assert summary(out)[0]["max_replicas"] == 8


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target", "shop/Deployment/nope"], "no target 'shop/Deployment/nope'; targets:"),
        (["--capacity", "0"], "capacity: expected a positive number"),
        (["--request", "cpu"], "--request: expected NAME=VALUE"),
        (["--query", "up"], "--query goes with --prometheus"),
    ],
    ids=["unknown-target", "bad-capacity", "bad-request", "query-without-prometheus"],
)
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    """Bad flags are reported on stderr in one line, with exit status 2 and no traceback."""
    code = command(["--config", str(config(tmp_path)), "--trace", str(csv_trace(tmp_path)),
                    "--out", str(tmp_path / "out"), *extra])
    assert code == 2
    assert message in capsys.readouterr().err


def test_invalid_config_is_reported_by_the_loader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon's own validation runs: a misspelt key is an error with its place (exit 1,
    as an invalid config is for every command)."""
    path = tmp_path / "bad.toml"
    path.write_text(config(tmp_path).read_text().replace("maxReplicas", "maxReplica"))
    code = command(["--config", str(path), "--trace", str(csv_trace(tmp_path))])
    assert code == 1
    assert "maxReplica" in capsys.readouterr().err


def test_missing_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace that is not there is named in the error: a failure (exit 1), not a usage
    error, as an unreadable input is for every command."""
    code = command(["--config", str(config(tmp_path)), "--trace", str(tmp_path / "no.csv")])
    assert code == 1
    assert "cannot read trace" in capsys.readouterr().err


@pytest.mark.parametrize(("trace", "message"), [
    ("time,demand\n", "the trace has no points"),
    ("", "empty trace; expected a header such as 'time,demand'"),
], ids=["header-only", "empty-file"])
def test_a_trace_without_data_is_a_failure_in_one_line(
    tmp_path: Path, trace: str, message: str,
) -> None:
    """No data to simulate is a failure: one line naming the trace, exit 1, no usage text
    (it was a usage error, exit 2, with the usage)."""
    path = tmp_path / "trace.csv"
    path.write_text(trace)
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler", "simulate", "--config", str(config(tmp_path)),
         "--trace", str(path), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"autoscaler simulate: {path}: {message}"]
    assert not (tmp_path / "out").exists()


def test_no_data_from_prometheus_is_a_failure(
    tmp_path: Path, prometheus: PrometheusProcess, capsys: pytest.CaptureFixture[str],
) -> None:
    """A query that matches nothing over the range: one line, exit 1."""
    code = command(["--config", str(config(tmp_path)), "--prometheus", prometheus.url,
                    "--query", 'no_such_series{app="web"}', "--start", str(START), "--end",
                    str(END), "--out", str(tmp_path / "out"), "--no-plot"])
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        "autoscaler simulate: query 'no_such_series{app=\"web\"}' returned no data between "
        "the start and the end"]


def test_demand_from_prometheus(tmp_path: Path, prometheus: PrometheusProcess) -> None:
    """--prometheus takes the demand from a range query over --start..--end."""
    out = tmp_path / "out"
    code = command([
        "--config", str(config(tmp_path)), "--prometheus", prometheus.url,
        "--query", 'web_demand{app="web"}', "--start", str(START), "--end", str(END),
        "--out", str(out), "--no-plot",
    ])
    assert code == 0
    document = json.loads((out / "timeline.json").read_text())
    assert document["origin"] == START
    assert len(document["rows"]) == POINTS
    assert document["rows"][0]["demand"] == 100.0
    assert document["rows"][-1]["demand"] == 100.0 + POINTS - 1


def test_cli_entry_point_runs_simulate(tmp_path: Path) -> None:
    """``python -m autoscaler simulate`` reaches this command through the CLI table."""
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler", "simulate", "--config", str(config(tmp_path)),
         "--trace", str(csv_trace(tmp_path)), "--out", str(out), "--no-plot"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "replica-hours" in result.stdout
    assert (out / "summary.json").exists()


WITHOUT_MATPLOTLIB = ("import sys; sys.modules['matplotlib'] = None; "  # import fails, as if absent
                      "from autoscaler.cli import main; sys.exit(main())")


def test_without_matplotlib_says_how_to_get_the_plot(tmp_path: Path) -> None:
    """Without the plot extra, simulate writes the timeline and summary and says so in a line."""
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MATPLOTLIB, "simulate", "--config", str(config(tmp_path)),
         "--trace", str(csv_trace(tmp_path)), "--out", str(out)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "note: no plot: matplotlib is not installed (pip install 'autoscaler[plot]', or "
        "--no-plot to skip it); the timeline and summary are written"]
    assert sorted(p.name for p in out.iterdir()) == [
        "summary.json", "timeline.csv", "timeline.json"]


def test_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    """On a TTY a long run draws a bar on stderr; piped, stderr stays empty."""
    args = [sys.executable, "-m", "autoscaler", "simulate", "--config", str(config(tmp_path)),
            "--trace", str(EXAMPLE / "day.csv"), "--out", str(tmp_path / "out"), "--no-plot"]
    leader, follower = pty.openpty()
    seen = bytearray()

    def drain() -> None:
        while chunk := _read(leader):
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        result = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=follower, cwd=ROOT,
                                timeout=60, check=False)
    finally:
        os.close(follower)
        reader.join(timeout=5)
        os.close(leader)
    assert result.returncode == 0
    assert "[##############################] 5761/5761 steps" in seen.decode()
    piped = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=60,
                           check=False)
    assert piped.returncode == 0
    assert piped.stderr == ""


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # the follower end closed: EIO on Linux
        return b""


def test_compare_alone_backtests_prediction_against_reactive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--compare without a file runs the same config with prediction off beside it; the
    table adds the forecast rows and the timeline the forecast columns."""
    path = config(tmp_path)
    path.write_text(path.read_text().replace(
        "[1m]))' }} }}]".replace("{{", "{").replace("}}", "}"),
        "[1m]))' }, prediction = { model = \"seasonalNaive\", season = \"1h\", step = \"1m\", "
        "forecastOnly = false } }]"))
    lines = ["time,demand"] + [f"{m * 60},{100 + 300 * (m % 60 >= 30)}" for m in range(240)]
    out = tmp_path / "out"
    assert command(["--config", str(path), "--trace", str(csv_trace(tmp_path, "\n".join(lines))),
                    "--compare", "--out", str(out), "--no-plot"]) == 0
    predictive, reactive = summary(out)
    assert reactive["label"] == "a (reactive)"
    assert predictive["forecast_used_seconds"] > 0  # type: ignore[operator]
    assert predictive["beyond_tolerance_seconds"] < reactive["beyond_tolerance_seconds"]  # type: ignore[operator]
    assert "time the forecast changed the count" in capsys.readouterr().out
    assert "rps_forecast" in (out / "timeline.csv").read_text().splitlines()[0]


def test_files_written_by_workers_equal_those_written_in_order(tmp_path: Path) -> None:
    """The outputs are written side by side in forked workers when only one thread runs
    (``autoscaler.simulate.jobs``: here a fresh process), else in order (here, with
    another thread alive): the same bytes either way."""
    args = ["--config", str(EXAMPLE / "web.toml"), "--workload", str(EXAMPLE / "workload.toml"),
            "--trace", str(EXAMPLE / "day.csv")]
    subprocess.run([sys.executable, "-m", "autoscaler", "simulate", *args,
                    "--out", str(tmp_path / "workers")],
                   check=True, capture_output=True, timeout=120, cwd=ROOT)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert command([*args, "--out", str(tmp_path / "in-order")]) == 0
    finally:
        stop.set()
        other.join()
    names = sorted(path.name for path in (tmp_path / "workers").iterdir())
    assert names == ["simulation.png", "summary.json", "timeline.csv", "timeline.json"]
    for name in names:
        assert (tmp_path / "workers" / name).read_bytes() == \
            (tmp_path / "in-order" / name).read_bytes(), name


@pytest.mark.parametrize("in_the_way", ["timeline.csv", "timeline.json", "summary.json",
                                        "simulation.png"])
def test_an_output_the_system_refuses_is_one_line_and_the_rest_is_written(
    tmp_path: Path, in_the_way: str,
) -> None:
    """A directory where an output file goes (as a full disk or a read-only file would) is
    a failure: one line naming the file and why, exit 1, and every other file
    written; not an "unexpected error" to report. A fresh process, so the files are written
    by the forked workers where the machine has two CPUs."""
    out = tmp_path / "out"
    (out / in_the_way).mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler", "simulate", "--config", str(config(tmp_path)),
         "--trace", str(csv_trace(tmp_path)), "--out", str(out)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"autoscaler simulate: cannot write {out / in_the_way}: Is a directory"]
    written = {"timeline.csv", "timeline.json", "summary.json", "simulation.png"} - {in_the_way}
    assert all((out / name).is_file() for name in written)


def test_an_output_the_system_refuses_in_order_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """In this process (a thread of the suite's is alive, so the files are written in order)
    the same line; so for an output directory that cannot be made."""
    out = tmp_path / "out"
    (out / "timeline.json").mkdir(parents=True)
    args = ["--config", str(config(tmp_path)), "--trace", str(csv_trace(tmp_path)), "--no-plot"]
    assert command([*args, "--out", str(out)]) == 1
    (tmp_path / "file").write_text("")
    assert command([*args, "--out", str(tmp_path / "file" / "out")]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"autoscaler simulate: cannot write {out / 'timeline.json'}: Is a directory",
        f"autoscaler simulate: cannot create {tmp_path / 'file' / 'out'}: Not a directory"]
