"""A fleet-wide per-pod query cut to a share's namespaces (a ring member's, a static shard's).

A per-pod reading for targets in namespaces S looks only at series labelled with a namespace
in S or with none (``parse.pod_samples`` skips another namespace's series), so an answer
cut to those series reads the same values. The query is wrapped, never edited (a selector
cannot be narrowed safely without knowing what its series are): ``label_replace`` marks the
share's series, ``and on`` a one-series vector keeps them, a last ``label_replace`` removes
the mark. Prometheus still evaluates the whole query; what the cut saves is the rest of the
answer (encoding it, sending it, parsing it), a ring member's share being 1/N of it.
"""

from __future__ import annotations

from collections.abc import Iterable

from autoscaler.adapters.prometheus.queries import alternation, promql_string

SHARE_LABEL = "autoscaler_share"
"""A label the cut adds to mark the series it keeps, and removes again."""


def narrowed(promql: str, namespaces: Iterable[str]) -> str:
    """``promql`` cut to the series of ``namespaces`` and those without a namespace label."""
    keep = alternation(namespaces) + "|"  # "|": the empty value (the label absent)
    return _wrapped(promql, keep)


def _wrapped(promql: str, keep: str) -> str:
    # On lines of its own: a "#" comment in the query ends at its line.
    marked = (f'label_replace(\n{promql}\n, "{SHARE_LABEL}", "1", "namespace", '
              f'"{promql_string(keep)}")')
    mark = f'label_replace(vector(1), "{SHARE_LABEL}", "1", "", "")'
    return f'label_replace({marked} and on({SHARE_LABEL}) {mark}, "{SHARE_LABEL}", "", "", "")'
