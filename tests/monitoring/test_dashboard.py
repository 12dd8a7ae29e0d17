"""The Grafana dashboard: committed as generated, with what Grafana needs to import it, and
reading only series the daemon exports. (tests/e2e/test_monitoring.py runs every query
against a real Prometheus scraping running daemons.)"""

from __future__ import annotations

import json
import re
from typing import Any

from monitoring import generate
from tests.monitoring.test_rules import SCRAPE_SERIES
from tests.observability.exposition import exposition
from tests.observability.test_metrics import populated


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(generate.DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def test_committed_dashboard_is_the_generated_one() -> None:
    """monitoring/autoscaler-dashboard.json is what monitoring/generate.py writes."""
    path = generate.DASHBOARD
    assert path.read_text() == generate.rendered()[path], "run: python monitoring/generate.py"


def test_dashboard_has_what_grafana_imports() -> None:
    """uid, title, schemaVersion, __requires for every panel type, and the variables."""
    board = dashboard()
    assert (board["uid"], board["title"]) == ("autoscaler", "Autoscaler")
    assert isinstance(board["schemaVersion"], int)
    assert board["schemaVersion"] >= 36
    required = {r["id"] for r in board["__requires"]}
    assert {"grafana", "prometheus"} | {p["type"] for p in panels()} <= required
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert list(variables) == ["datasource", "namespace", "target"]
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == (
        "datasource", "prometheus")


def test_every_panel_and_query_uses_the_datasource_variable() -> None:
    """Panels and their queries name the chosen data source, never a fixed one."""
    reference = {"type": "prometheus", "uid": "${datasource}"}
    for panel in panels():
        assert panel["datasource"] == reference, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == reference
            assert target["expr"]
            assert target["refId"]


def test_panels_fit_the_grid_without_overlap() -> None:
    """Unique ids; each panel inside the 24-column grid, none on top of another."""
    board = dashboard()["panels"]
    assert len({p["id"] for p in board}) == len(board)
    taken: set[tuple[int, int]] = set()
    for panel in board:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        cells = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                 for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not cells & taken, panel["title"]
        taken |= cells


def test_per_target_queries_follow_the_variables() -> None:
    """Every per-target series on the dashboard is filtered by namespace and target."""
    per_target = re.compile(r"(autoscaler_(?:current|desired|recommended|min|max)_replicas|"
                            r"autoscaler_metric_\w+|autoscaler_status_condition|"
                            r"autoscaler_\w*scale_events_total)\{([^}]*)\}")
    for panel in panels():
        for target in panel["targets"]:
            for name, selector in per_target.findall(target["expr"]):
                assert 'namespace=~"$namespace"' in selector, (panel["title"], name)
                assert 'name=~"$target"' in selector, (panel["title"], name)


def test_dashboard_reads_only_series_the_daemon_exports() -> None:
    """A renamed series cannot leave a panel silently empty."""
    exported = set(re.findall(r"^(\w+)(?:\{| )", exposition(populated()), re.MULTILINE))
    histogram = {f"{name}_{part}" for name in exported for part in ("sum", "count", "bucket")}
    used = {name for panel in panels() for target in panel["targets"]
            for name in re.findall(r"\b(autoscaler_\w+)\b", target["expr"])}
    assert used - exported - histogram - SCRAPE_SERIES == set()
