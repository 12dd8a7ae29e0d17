"""Writes the monitoring kit's generated files from their sources:

- ``monitoring/autoscaler-dashboard.json``: the Grafana dashboard, from ``PANELS`` below;
- ``deploy/prometheus-operator/prometheusrule.yaml``: the rules of
  ``monitoring/autoscaler.rules.yaml`` as a PrometheusRule.

Run ``python monitoring/generate.py`` after changing either source; tests/monitoring fails
while a generated file differs from what this writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "monitoring" / "autoscaler.rules.yaml"
DASHBOARD = ROOT / "monitoring" / "autoscaler-dashboard.json"
PROMETHEUS_RULE = ROOT / "deploy" / "prometheus-operator" / "prometheusrule.yaml"

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TARGETS = 'namespace=~"$namespace", name=~"$target"'
"""The selector of every per-target query: the dashboard's namespace and target variables."""
BY_TARGET = "namespace, kind, name"
RATE = "$__rate_interval"
GRID_WIDTH, PANEL_HEIGHT = 24, 9
"""Grafana's grid is 24 columns wide."""

# (title, type, unit, [(expr, legend)], width): grouped into rows, laid out left to right.
Panel = tuple[str, str, str, list[tuple[str, str]], int]
PANELS: list[tuple[str, list[Panel]]] = [
    ("Targets", [
        ("Replicas: current, desired, bounds", "timeseries", "short", [
            (f"max by ({BY_TARGET}) (autoscaler_current_replicas{{{TARGETS}}})",
             "{{namespace}}/{{name}} current"),
            (f"max by ({BY_TARGET}) (autoscaler_desired_replicas{{{TARGETS}}})",
             "{{namespace}}/{{name}} desired"),
            (f"max by ({BY_TARGET}) (autoscaler_recommended_replicas{{{TARGETS}}})",
             "{{namespace}}/{{name}} recommended (before rate limits and bounds)"),
            (f"max by ({BY_TARGET}) (autoscaler_min_replicas{{{TARGETS}}})",
             "{{namespace}}/{{name}} min"),
            (f"max by ({BY_TARGET}) (autoscaler_max_replicas{{{TARGETS}}})",
             "{{namespace}}/{{name}} max"),
        ], 12),
        ("Metrics against their targets (and the tolerance band)", "timeseries", "short", [
            (f"max by ({BY_TARGET}, metric) (autoscaler_metric_value{{{TARGETS}}})",
             "{{name}} {{metric}}"),
            (f"max by ({BY_TARGET}, metric) (autoscaler_metric_target{{{TARGETS}}})",
             "{{name}} {{metric}} target"),
            (f"max by ({BY_TARGET}, metric) (autoscaler_metric_target{{{TARGETS}}}"
             " * on (job, instance, namespace, kind, name) group_left ()"
             f' (1 + autoscaler_tolerance_ratio{{{TARGETS}, direction="up"}}))',
             "{{name}} {{metric}} scales up above"),
            (f"max by ({BY_TARGET}, metric) (autoscaler_metric_target{{{TARGETS}}}"
             " * on (job, instance, namespace, kind, name) group_left ()"
             f' (1 - autoscaler_tolerance_ratio{{{TARGETS}, direction="down"}}))',
             "{{name}} {{metric}} scales down below"),
        ], 12),
        ("Scale events", "timeseries", "short", [
            (f"sum by ({BY_TARGET}, direction) "
             f"(increase(autoscaler_scale_events_total{{{TARGETS}}}[{RATE}]))",
             "{{name}} {{direction}}"),
            (f"sum by ({BY_TARGET}, direction) "
             f"(increase(autoscaler_would_scale_events_total{{{TARGETS}}}[{RATE}]))",
             "{{name}} {{direction}} (dry-run, would be)"),
            (f"sum by ({BY_TARGET}) (increase(autoscaler_drift_total{{{TARGETS}}}[{RATE}]))",
             "{{name}} changed by someone else"),
        ], 8),
        ("Conditions (1: True)", "state-timeline", "short", [
            (f"max by ({BY_TARGET}, condition) "
             f'(autoscaler_status_condition{{{TARGETS}, status="true"}})',
             "{{name}} {{condition}}"),
        ], 8),
        ("Paused, fallback, schedules, metrics valid", "state-timeline", "short", [
            (f"max by ({BY_TARGET}) (autoscaler_paused{{{TARGETS}}})", "{{name}} paused"),
            (f"max by ({BY_TARGET}) (autoscaler_fallback_active{{{TARGETS}}})",
             "{{name}} fallback"),
            (f"max by ({BY_TARGET}, schedule) (autoscaler_schedule_active{{{TARGETS}}})",
             "{{name}} schedule {{schedule}}"),
            (f"min by ({BY_TARGET}, metric) (autoscaler_metric_valid{{{TARGETS}}})",
             "{{name}} {{metric}} valid"),
        ], 8),
    ]),
    ("Daemon", [
        ("Pass duration against its sync period", "timeseries", "s", [
            (f"max by (period) (rate(autoscaler_pass_duration_seconds_sum[{RATE}])"
             f" / rate(autoscaler_pass_duration_seconds_count[{RATE}]))",
             "{{period}} pass (mean)"),
            ("histogram_quantile(0.99, sum by (le, period) "
             f"(rate(autoscaler_pass_duration_seconds_bucket[{RATE}])))",
             "{{period}} pass (p99)"),
            ("max by (period) (autoscaler_sync_period_seconds)", "{{period}} period"),
        ], 8),
        ("Prometheus query latency", "timeseries", "s", [
            ("histogram_quantile(0.9, sum by (le, server) "
             f"(rate(autoscaler_prometheus_query_duration_seconds_bucket[{RATE}])))",
             "{{server}} p90"),
            (f"sum by (server) (rate(autoscaler_prometheus_query_duration_seconds_sum[{RATE}]))"
             f" / sum by (server) (rate(autoscaler_prometheus_query_duration_seconds_count"
             f"[{RATE}]))", "{{server}} mean"),
        ], 8),
        ("Prometheus query errors", "timeseries", "reqps", [
            ("sum by (server, reason) "
             f"(rate(autoscaler_prometheus_query_errors_total[{RATE}]))",
             "{{server}} {{reason}}"),
        ], 8),
        ("API requests by verb and code", "timeseries", "reqps", [
            (f"sum by (verb, code) (rate(autoscaler_kube_api_requests_total[{RATE}]))",
             "{{verb}} {{code}}"),
        ], 8),
        ("Errors by reason", "timeseries", "short", [
            (f"sum by (reason) (increase(autoscaler_errors_total[{RATE}]))", "{{reason}}"),
        ], 8),
        ("Leader", "state-timeline", "short", [
            ("max by (lease, instance) (autoscaler_leader)", "{{lease}} {{instance}}"),
        ], 8),
        ("Config reloads", "timeseries", "short", [
            ("min by (instance) (autoscaler_config_last_reload_successful)",
             "{{instance}} last reload applied"),
            (f"sum by (result) (increase(autoscaler_config_reloads_total[{RATE}]))",
             "{{result}}"),
        ], 8),
        ("Builds", "stat", "short", [
            ("count by (version) (autoscaler_build_info)", "{{version}}"),
        ], 8),
    ]),
]


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y = 0
    for row_title, row in PANELS:
        panels.append({"id": len(panels) + 1, "type": "row", "title": row_title,
                       "collapsed": False, "panels": [],
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        y, x = y + 1, 0
        for title, kind, unit, queries, width in row:
            if x + width > GRID_WIDTH:
                y, x = y + PANEL_HEIGHT, 0
            panels.append(_panel(len(panels) + 1, title, kind=kind, unit=unit, queries=queries,
                                 grid={"h": PANEL_HEIGHT, "w": width, "x": x, "y": y}))
            x += width
        y += PANEL_HEIGHT
    return {
        "__inputs": [],
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus",
             "version": "1.0.0"},
            *({"type": "panel", "id": kind, "name": kind, "version": ""}
              for kind in ("timeseries", "state-timeline", "stat")),
        ],
        "uid": "autoscaler",
        "title": "Autoscaler",
        "description": "Targets, decisions and the daemon's health (github: autoscaler, "
                       "monitoring/autoscaler-dashboard.json).",
        "tags": ["autoscaler", "kubernetes"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-3h", "to": "now"},
        "refresh": "30s",
        "timezone": "browser",
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": _variables()},
        "panels": panels,
    }


def _panel(number: int, title: str, *, kind: str, unit: str, queries: list[tuple[str, str]],
           grid: dict[str, int]) -> dict[str, Any]:
    return {
        "id": number, "type": kind, "title": title, "datasource": DATASOURCE, "gridPos": grid,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "none"}},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                     "legendFormat": legend, "range": True, "editorMode": "code"}
                    for i, (expr, legend) in enumerate(queries)],
    }


def _variables() -> list[dict[str, Any]]:
    def query(name: str, label: str, promql: str) -> dict[str, Any]:
        return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
                "query": {"query": promql, "refId": f"{name}-variable"},
                "definition": promql, "refresh": 2, "multi": True, "includeAll": True,
                "allValue": ".*", "sort": 1, "current": {}, "options": [], "hide": 0}

    return [
        {"name": "datasource", "label": "Data source", "type": "datasource",
         "query": "prometheus", "current": {}, "options": [], "hide": 0, "refresh": 1},
        query("namespace", "Namespace", "label_values(autoscaler_current_replicas, namespace)"),
        query("target", "Target",
              'label_values(autoscaler_current_replicas{namespace=~"$namespace"}, name)'),
    ]


def prometheus_rule() -> dict[str, Any]:
    rules = yaml.safe_load(RULES.read_text())
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "autoscaler", "namespace": "autoscaler",
                     "labels": {"app.kubernetes.io/name": "autoscaler"}},
        "spec": {"groups": rules["groups"]},
    }


def rendered() -> dict[Path, str]:
    """Each generated file and the text it should hold."""
    header = ("# Generated by monitoring/generate.py from monitoring/autoscaler.rules.yaml: "
              "edit that file, then run the script.\n")
    return {
        DASHBOARD: json.dumps(dashboard(), indent=2) + "\n",
        PROMETHEUS_RULE: header + yaml.safe_dump(prometheus_rule(), sort_keys=False, width=100),
    }


def main() -> int:
    for path, text in rendered().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
