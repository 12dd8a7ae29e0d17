"""autoscaler check: the examples pass, bad files fail, queries are parsed offline, and
--prometheus judges every query."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from autoscaler.commands import main
from autoscaler.commands.config_summary import summary
from autoscaler.config import parse_config
from tests.commands.fake_http import EMPTY_VECTOR, serving
from tests.sim.prometheus import PrometheusProcess, free_port

CONFIG_DIR = Path(__file__).parents[2] / "config"
NOT_CONFIGS = {
    "workload.toml",  # the workload model for `autoscaler simulate --workload`
}
EXAMPLES = sorted(p for p in CONFIG_DIR.rglob("*.toml") if p.name not in NOT_CONFIGS)
HOST_FILES = {  # the files multi-cluster.toml names, which exist only on its host
    "multi-cluster.toml": ("/var/lib/autoscaler/state.json",
                           "/var/run/secrets/kubernetes.io/serviceaccount/token",
                           "/etc/prometheus-ca/ca.crt", "/etc/mimir/password"),
}


def command(argv: list[str]) -> int:
    return main(["check", *argv])


def test_there_are_examples() -> None:
    """The example glob finds the shipped examples (so the next test checks something)."""
    assert {p.name for p in EXAMPLES} >= {"minimal.toml", "web-service.toml",
                                         "queue-worker.toml", "multi-cluster.toml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(CONFIG_DIR)) for p in EXAMPLES])
def test_example_passes_check(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every example in config/ is valid and its summary lists every target."""
    assert command([str(path), *(["--syntax-only"] if path.name in HOST_FILES else [])]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TARGET")
    assert "target" in out.splitlines()[-1]


def test_example_passes_check_on_its_host(tmp_path: Path) -> None:
    """With the files multi-cluster.toml names in place, the full check passes too."""
    text = (CONFIG_DIR / "examples" / "multi-cluster.toml").read_text()
    state, *credentials = HOST_FILES["multi-cluster.toml"]
    text = text.replace(state, str(tmp_path / "state" / "state.json"))
    for index, original in enumerate(credentials):
        (tmp_path / str(index)).write_text("secret\n")
        text = text.replace(original, str(tmp_path / str(index)))
    path = tmp_path / "multi-cluster.toml"
    path.write_text(text)
    assert command([str(path)]) == 0


def test_examples_cover_every_metric_type() -> None:
    """Between them, the examples use all five metric types and all three target types."""
    specs = [m for p in EXAMPLES for t in parse_config(p.read_bytes()).targets
             for m in t.spec.metrics]
    assert {m.type for m in specs} == {"Resource", "ContainerResource", "Pods", "Object",
                                       "External"}
    assert {m.target.type for m in specs} == {"Utilization", "Value", "AverageValue"}


def test_invalid_config_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every issue goes to stderr, then a count; exit code 1."""
    path = tmp_path / "bad.toml"
    path.write_text("[daemon]\nconcurrency = 0\nlogLevel = \"loud\"\n")
    assert command([str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{path}:2: daemon.concurrency: must be at least 1, got 0"
    assert err[1].startswith(f"{path}:3: daemon.logLevel: must be one of")
    assert err[2] == f"{path}: invalid (2 problems)"


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No config argument is a usage error."""
    assert command([]) == 2
    assert "usage: autoscaler check" in capsys.readouterr().err


def test_summary_rows() -> None:
    """One row per target: bounds, metrics, behavior, server and period."""
    config = parse_config("""\
[prometheus.servers.thanos]
url = "http://t:9090"
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 10
minReplicas = 2
prometheus = "thanos"
syncPeriod = 90
behavior.scaleDown = { stabilizationWindowSeconds = 60, policies = [{ type = "Percent", value = 10, periodSeconds = 60 }] }
metrics = [
  { type = "Resource", resource = { name = "memory", target = { type = "AverageValue", averageValue = "1.5Gi" } } },
  { type = "Object", object = { describedObject = { kind = "Ingress", name = "m" }, metric = { name = "rps" }, target = { type = "Value", value = "10k" }, query = "sum(x)" } },
]
""")
    header, row, footer = summary(config).splitlines()
    assert header.split() == ["TARGET", "MIN", "MAX", "METRICS", "BEHAVIOR", "PROMETHEUS", "SYNC"]
    assert row.split("  ")[0] == "shop/Deployment/web"
    for part in ("memory avg 1.5Gi, object:Ingress/rps 10k", "up: default; down: window 1m "
                 "10%/60s", "thanos", "1m30s"):
        assert part in row
    assert footer == "1 target, 2 Prometheus servers"


# --- --prometheus against a real Prometheus ---------------------------------------------------

PROBED = """\
[prometheus]
url = "{url}"
timeout = "5s"

[prometheus.servers.down]
url = "http://127.0.0.1:{closed}"

[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
maxReplicas = 10
metrics = [
  {{ type = "Resource", resource = {{ name = "cpu", target = {{ type = "Utilization", averageUtilization = 50 }} }} }},
  {{ type = "Resource", resource = {{ name = "memory", requestsFrom = "kube-state-metrics", target = {{ type = "Utilization", averageUtilization = 50 }} }} }},
  {{ type = "Pods", pods = {{ metric = {{ name = "good" }}, target = {{ type = "AverageValue", averageValue = 5 }}, query = 'sum by (pod) (http_requests_per_second{{${{pod_selector}}}})' }} }},
  {{ type = "Pods", pods = {{ metric = {{ name = "no-pod-label" }}, target = {{ type = "AverageValue", averageValue = 5 }}, query = 'sum(http_requests_per_second{{${{pod_selector}}}})' }} }},
  {{ type = "Pods", pods = {{ metric = {{ name = "no-data" }}, target = {{ type = "AverageValue", averageValue = 5 }}, query = 'sum by (pod) (not_exported{{${{pod_selector}}}})' }} }},
  {{ type = "Pods", pods = {{ metric = {{ name = "nan" }}, target = {{ type = "AverageValue", averageValue = 5 }}, query = 'lag_seconds{{${{pod_selector}}}}' }} }},
  {{ type = "Object", object = {{ describedObject = {{ kind = "Ingress", name = "main" }}, metric = {{ name = "one" }}, target = {{ type = "Value", value = 5 }}, query = 'ingress_requests_per_second{{namespace="${{namespace}}",ingress="main"}}' }} }},
  {{ type = "Object", object = {{ describedObject = {{ kind = "Ingress", name = "main" }}, metric = {{ name = "several" }}, target = {{ type = "Value", value = 5 }}, query = 'queue_depth' }} }},
  {{ type = "External", external = {{ metric = {{ name = "queues" }}, target = {{ type = "Value", value = 5 }}, query = 'queue_depth' }} }},
  {{ type = "ContainerResource", containerResource = {{ name = "cpu", container = "app", target = {{ type = "Utilization", averageUtilization = 50 }} }} }},
  {{ type = "ContainerResource", containerResource = {{ name = "memory", container = "sidecar", target = {{ type = "Utilization", averageUtilization = 50 }} }} }},
]

[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "api" }}
maxReplicas = 3
prometheus = "down"
"""

EXPECTED = {  # metric -> (verdict, a fragment of its problem)
    "shop/Deployment/web metrics[0] Resource cpu": ("ok", ""),
    "shop/Deployment/web metrics[1] Resource memory": ("ok", ""),
    "shop/Deployment/web metrics[2] Pods good": ("ok", ""),
    "shop/Deployment/web metrics[3] Pods no-pod-label": ("FAIL", "a series has no 'pod' label"),
    "shop/Deployment/web metrics[4] Pods no-data": ("warn", "no series"),
    "shop/Deployment/web metrics[5] Pods nan": ("FAIL", "pod web-0: value is NaN"),
    "shop/Deployment/web metrics[6] Object one": ("ok", ""),
    "shop/Deployment/web metrics[7] Object several": ("FAIL", "2 series where exactly one is expected"),
    "shop/Deployment/web metrics[8] External queues": ("ok", ""),
    "shop/Deployment/web metrics[9] ContainerResource cpu": ("ok", ""),
    "shop/Deployment/web metrics[10] ContainerResource memory": ("warn", "no series for container 'sidecar'"),
}


def _outcomes(out: str) -> dict[str, tuple[str, str]]:
    """Each probed query's verdict and problem, keyed by target and metric (the worst of a
    metric's queries)."""
    rank = {"ok": 0, "warn": 1, "FAIL": 2}
    found: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        status, _, rest = line.partition(" ")
        if status in rank:
            where, _, problem = rest.strip().partition(": ")
            key = where.rsplit(" [", 1)[0]
            if rank[status] >= rank[found.get(key, ("ok", ""))[0]]:
                found[key] = (status, problem if status != "ok" else "")
    return found


@pytest.mark.prometheus
def test_prometheus_probe_reports_each_bad_query(
    prometheus: PrometheusProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Errors and wrong shapes fail, empty answers warn, an unreachable server is said once."""
    path = tmp_path / "probe.toml"
    path.write_text(PROBED.format(url=prometheus.url, closed=free_port()))
    assert command([str(path), "--prometheus"]) == 1
    captured = capsys.readouterr()
    outcomes = _outcomes(captured.out)
    assert set(outcomes) == set(EXPECTED)
    for key, (verdict, fragment) in EXPECTED.items():
        assert outcomes[key][0] == verdict, f"{key}: {outcomes[key]}"
        assert fragment in outcomes[key][1], f"{key}: {outcomes[key]}"
    # 12 queries ran and the 'down' server's one did not: every query counted once.
    assert captured.out.splitlines()[-1] == (
        "13 queries: 7 ok, 3 failed, 2 with warnings, 1 not checked")
    unreachable = [line for line in captured.err.splitlines() if "cannot reach" in line]
    assert len(unreachable) == 1
    assert "Prometheus server 'down'" in unreachable[0]
    assert "check its url in the [prometheus] table (1 query not checked)" in unreachable[0]


@pytest.mark.prometheus
def test_prometheus_probe_passes_good_queries(
    prometheus: PrometheusProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config whose queries all answer well exits 0; the rendered query is what ran."""
    path = tmp_path / "good.toml"
    path.write_text(f"""\
[prometheus]
url = "{prometheus.url}"
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
maxReplicas = 10
metrics = [{{ type = "Pods", pods = {{ metric = {{ name = "rps" }}, target = {{ type = "AverageValue", averageValue = 5 }}, query = 'http_requests_per_second{{${{pod_selector}}}}' }} }}]
""")
    assert command([str(path), "--prometheus"]) == 0
    out = capsys.readouterr().out
    assert "ok    shop/Deployment/web metrics[0] Pods rps [default]: 2 series" in out
    assert out.splitlines()[-1] == "1 query: 1 ok, 0 failed, 0 with warnings"


def test_cli_dispatches_to_check(capsys: pytest.CaptureFixture[str]) -> None:
    """`autoscaler check FILE` through the console script's entry point."""
    from autoscaler.cli import main as console_script

    assert console_script(["check", str(CONFIG_DIR / "examples" / "minimal.toml")]) == 0
    assert "default/Deployment/web" in capsys.readouterr().out


def test_config_option_is_the_same_as_the_argument(capsys: pytest.CaptureFixture[str]) -> None:
    """`check --config FILE` is `check FILE`, as every command takes --config."""
    assert command(["--config", str(CONFIG_DIR / "examples" / "minimal.toml")]) == 0
    assert "default/Deployment/web" in capsys.readouterr().out


BROKEN_QUERIES = [
    # (id, query as written in the TOML, the parser's complaint)
    ("unclosed-parenthesis", "sum by (pod) (rate(x{${pod_selector}}[2m])", "unclosed left parenthesis"),
    ("unclosed-brace", "x{${pod_selector}", "unexpected end of input inside braces"),
    ("dangling-operator", "sum(x) +", "invalid promql query"),
]


@pytest.mark.parametrize(("query", "message"), [c[1:] for c in BROKEN_QUERIES],
                         ids=[c[0] for c in BROKEN_QUERIES])
def test_broken_promql_fails_without_prometheus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str, message: str,
) -> None:
    """A query that does not parse once rendered fails check offline, at its line and field."""
    path = tmp_path / "broken.toml"
    path.write_text(f"""\
[prometheus]
url = "http://127.0.0.1:1"
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
maxReplicas = 10
metrics = [
  {{ type = "Resource", resource = {{ name = "cpu", target = {{ type = "Utilization", averageUtilization = 50 }} }} }},
  {{ type = "Pods", pods = {{ metric = {{ name = "rps" }}, target = {{ type = "AverageValue", averageValue = 5 }}, query = '{query}' }} }},
]
""")
    assert command([str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{path}:9: autoscaler[0].metrics[1].pods.query: is not valid PromQL once "
                   f"its placeholders are filled in: {message}", f"{path}: invalid (1 problem)"]


def test_broken_promql_from_defaults_is_reported_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A broken query every target takes from [defaults] is one problem, at its defaults path."""
    path = tmp_path / "defaults.toml"
    path.write_text("""\
[defaults]
maxReplicas = 10
metrics = [{ type = "External", external = { metric = { name = "q" }, target = { type = "Value", value = 5 }, query = 'sum(queue' } }]
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "api" }
""")
    assert command([str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{path}:3: defaults.metrics[0].external.query: is not valid PromQL")
    assert err[1] == f"{path}: invalid (1 problem)"


def test_promql_errors_are_not_hidden_behind_other_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A config with another problem still has its queries parsed: every problem at once,
    in file order, so ``complete`` is true only when nothing is left unsaid."""
    path = tmp_path / "both.toml"
    path.write_text("""\
[daemon]
concurrency = 0
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 5
metrics = [{ type = "Pods", pods = { metric = { name = "m" }, target = { type = "AverageValue", averageValue = "1" }, query = 'sum(rate(x[1m])' } }]
""")
    assert command([str(path), "-o", "json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert [(p["line"], p["path"]) for p in body["problems"]] == [
        (2, "daemon.concurrency"), (7, "autoscaler[0].metrics[0].pods.query")]
    assert body["complete"] is True
    assert command([str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[1].startswith(f"{path}:7: autoscaler[0].metrics[0].pods.query: is not valid PromQL")
    assert err[-1] == f"{path}: invalid (2 problems)"


def _server_down(stack: contextlib.ExitStack) -> str:
    return f"http://127.0.0.1:{free_port()}"


def _server_404(stack: contextlib.ExitStack) -> str:
    return stack.enter_context(serving(status=404)) + "/prometheus"


def _server_empty(stack: contextlib.ExitStack) -> str:
    return stack.enter_context(serving(body=EMPTY_VECTOR))


@pytest.mark.parametrize(("server", "summary_line", "fates"), [
    (_server_down, "2 queries: 0 ok, 0 failed, 0 with warnings, 2 not checked",
     {"queries": 2, "ok": 0, "failed": 0, "warnings": 0, "notChecked": 2}),
    (_server_404, "2 queries: 0 ok, 2 failed, 0 with warnings",
     {"queries": 2, "ok": 0, "failed": 2, "warnings": 0, "notChecked": 0}),
    (_server_empty, "2 queries: 0 ok, 0 failed, 2 with warnings",
     {"queries": 2, "ok": 0, "failed": 0, "warnings": 2, "notChecked": 0}),
], ids=["unreachable", "404-to-everything", "no-series"])
def test_the_probe_summary_adds_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: Any, summary_line: str,
    fates: dict[str, int],
) -> None:
    """Each query has one fate (ok, warning, failed, not checked) and the fates add up to the
    queries, whether a server is unreachable ("0 queries: 1 failed" before) or answers 404
    to everything ("2 queries: 3 failed" before); so in -o json."""
    with contextlib.ExitStack() as stack:
        url = server(stack)
        path = tmp_path / "two.toml"
        path.write_text(f"""\
[prometheus]
url = "{url}"
timeout = "1s"
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
maxReplicas = 5
metrics = [
  {{ type = "External", external = {{ metric = {{ name = "a" }}, target = {{ type = "Value", value = 5 }}, query = 'sum(a)' }} }},
  {{ type = "External", external = {{ metric = {{ name = "b" }}, target = {{ type = "Value", value = 5 }}, query = 'sum(b)' }} }},
]
""")
        code = command([str(path), "--prometheus"])
        out = capsys.readouterr().out
        assert out.splitlines()[-1] == summary_line
        assert code == (0 if fates["failed"] + fates["notChecked"] == 0 else 1)
        assert command([str(path), "--prometheus", "-o", "json"]) == code
        body = json.loads(capsys.readouterr().out)
    assert body["summary"] == fates
    assert body["errors"] == fates["failed"] + fates["notChecked"]


def test_json_output_of_an_invalid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check -o json: the problems with file, line and field, on stdout; exit 1."""
    path = tmp_path / "bad.toml"
    path.write_text("[daemon]\nconcurrency = 0\n")
    assert command([str(path), "-o", "json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert body["valid"] is False
    assert body["problems"] == [{"file": str(path), "line": 2, "path": "daemon.concurrency",
                                 "message": "must be at least 1, got 0"}]


def test_json_output_of_a_valid_config(capsys: pytest.CaptureFixture[str]) -> None:
    """check -o json on a valid config: its targets as data, ok true."""
    assert command([str(CONFIG_DIR / "examples" / "minimal.toml"), "-o", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["valid"], body["ok"], body["errors"]) == (True, True, 0)
    assert body["targets"][0]["target"] == "default/Deployment/web"
