"""The alert rules: promtool checks them and runs their unit tests, every alert has a case
that fires, every series they read is one the daemon exports, and the PrometheusRule in
deploy/ carries exactly these rules."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from monitoring import generate
from tests.observability.exposition import exposition
from tests.observability.test_metrics import populated
from tests.sim.prometheus import PROMTOOL_BIN, require_binary

RULES = generate.RULES
TESTS = generate.ROOT / "monitoring" / "tests" / "autoscaler.rules.test.yaml"
SCRAPE_SERIES = {"up", "process_start_time_seconds"}
"""Series Prometheus itself, or the process collector, adds."""


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary(PROMTOOL_BIN), *map(str, args)],
                          capture_output=True, text=True, timeout=120, check=False)


def alerts() -> list[dict[str, object]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"]
            for rule in group["rules"]]


def test_promtool_check_rules() -> None:
    """The rules parse and their PromQL is valid."""
    checked = promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_unit_tests_pass() -> None:
    """Each alert fires where it should, and not on the false positives it avoids."""
    tested = promtool("test", "rules", TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_case_that_fires() -> None:
    """No alert goes untested: each is expected to fire somewhere in the unit tests."""
    cases = [case for test in yaml.safe_load(TESTS.read_text())["tests"]
             for case in test.get("alert_rule_test", [])]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    assert {str(rule["alert"]) for rule in alerts()} - fired == set()


def test_rules_read_only_series_the_daemon_exports() -> None:
    """A renamed series cannot leave a rule silently matching nothing."""
    exported = set(re.findall(r"^(\w+)(?:\{| )", exposition(populated()), re.MULTILINE))
    used = {name for rule in alerts()
            for name in re.findall(r"\b(autoscaler_\w+|up|process_\w+)\b", str(rule["expr"]))}
    histogram = {f"{name}_{part}" for name in exported for part in ("sum", "count", "bucket")}
    assert used - exported - histogram - SCRAPE_SERIES == set()


def test_prometheus_rule_is_generated_from_the_rules_file() -> None:
    """deploy/'s PrometheusRule holds exactly monitoring/autoscaler.rules.yaml's groups."""
    path = generate.PROMETHEUS_RULE
    assert path.read_text() == generate.rendered()[path], (
        "run: python monitoring/generate.py")
    assert yaml.safe_load(path.read_text())["spec"]["groups"] == yaml.safe_load(
        RULES.read_text())["groups"]
