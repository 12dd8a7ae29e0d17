"""Reading an exposition as Prometheus would: samples by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from autoscaler.observability.metrics import DaemonMetrics


def exposition(metrics: DaemonMetrics) -> str:
    return metrics.render().decode()


def value(text: str, series: str, /, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``; None if there is none."""
    found = [s.value for family in text_string_to_metric_families(text)
             for s in family.samples
             if s.name == series and labels.items() <= s.labels.items()]
    assert len(found) <= 1, f"{series}{labels} matches {len(found)} samples"
    return found[0] if found else None


def label_sets(text: str, series: str, /) -> list[dict[str, str]]:
    return [dict(s.labels) for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == series]
