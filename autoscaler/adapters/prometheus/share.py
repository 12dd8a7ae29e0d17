"""A fleet-wide per-pod query cut to a share's namespaces (a ring member's, a static shard's).

A per-pod reading for targets in namespaces S looks only at series labelled with a namespace
in S or with none (``parse.pod_samples`` skips another namespace's series), so an answer
cut to those series reads the same values. Two ways to cut, the cheaper when it is exact:

- **Matchers in the selectors** (``namespace=~"a|b|"``, the empty alternative keeping series
  without the label): Prometheus then reads only the share's series. Exact only when no
  part of the query mixes series of different namespaces, so only for queries whose every
  part is in a known class: selectors, per-series functions (``rate``, ``*_over_time``,
  ``histogram_quantile``, ...), aggregations grouped by ``namespace`` (``by`` naming it,
  ``without`` not), binary operations matching on it (no ``on`` without it, no ``ignoring``
  with it), numbers. ``sum by (pod)``, ``scalar()``, ``label_replace`` or a join ``on(pod)``
  mix namespaces: those take the other way. The query is parsed by promql-parser (as
  ``check`` does) and printed again with the matchers; a query it cannot parse (a parser
  behind Prometheus) takes the other way too.
- **The answer wrapped** (always exact): ``label_replace`` marks the share's series, ``and
  on`` a one-series vector keeps them, a last ``label_replace`` removes the mark. Prometheus
  still evaluates the whole query; the answer sent, and parsed, is the share's.

On 15,000 pods (``bench/share_query.py``, bench/README.md) the whole answer took 406 ms,
a sixth of it wrapped 245 ms, by matchers 62 ms.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from autoscaler.adapters.prometheus.queries import alternation, promql_string

SHARE_LABEL = "autoscaler_share"
"""A label the wrapped cut adds to mark the series it keeps, and removes again."""

_PER_SERIES = frozenset({
    "abs", "ceil", "floor", "round", "sqrt", "exp", "ln", "log2", "log10", "sgn",
    "clamp", "clamp_min", "clamp_max", "timestamp",
    "rate", "irate", "increase", "delta", "idelta", "deriv", "predict_linear", "resets",
    "changes", "avg_over_time", "sum_over_time", "min_over_time", "max_over_time",
    "count_over_time", "last_over_time", "present_over_time", "stddev_over_time",
    "stdvar_over_time", "quantile_over_time", "mad_over_time",
    "histogram_quantile", "histogram_avg", "histogram_count", "histogram_sum",
    "histogram_fraction", "histogram_stddev", "histogram_stdvar",
})
"""Functions whose every output series comes from input series with its own labels (a
histogram's buckets differ only in ``le``)."""
_GROUPING = frozenset({"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar",
                       "quantile", "topk", "bottomk"})


def narrowed(promql: str, namespaces: Iterable[str]) -> str:
    """``promql`` cut to the series of ``namespaces`` and those without a namespace label."""
    keep = alternation(namespaces) + "|"  # "|": the empty value (the label absent)
    return _with_matchers(promql, keep) or _wrapped(promql, keep)


def wrapped(promql: str, namespaces: Iterable[str]) -> str:
    """``promql``'s answer cut by wrapping the query (exact for any query)."""
    return _wrapped(promql, alternation(namespaces) + "|")


def _wrapped(promql: str, keep: str) -> str:
    # On lines of its own: a "#" comment in the query ends at its line.
    marked = (f'label_replace(\n{promql}\n, "{SHARE_LABEL}", "1", "namespace", '
              f'"{promql_string(keep)}")')
    mark = f'label_replace(vector(1), "{SHARE_LABEL}", "1", "", "")'
    return f'label_replace({marked} and on({SHARE_LABEL}) {mark}, "{SHARE_LABEL}", "", "", "")'


def _with_matchers(promql: str, keep: str) -> str | None:
    """``promql`` with ``namespace=~keep`` in every selector, or None when that would not be
    exact (or the query cannot be parsed and printed back faithfully)."""
    parsed = _parsed(promql)
    if parsed is None:
        return None
    import promql_parser  # compiled; loaded by _parsed already

    matcher = f'namespace=~"{promql_string(keep)}"'

    def with_matcher(node: Any) -> Any:
        if not isinstance(node, promql_parser.VectorSelector):
            return None
        text, braces = str(node), str(node.matchers)
        name = node.name or ""
        if not text.startswith(name + braces):
            raise _UnprintableError
        inner = braces[1:-1].strip()
        return promql_parser.parse(
            f"{name}{{{inner + ',' if inner else ''}{matcher}}}{text[len(name + braces):]}")

    try:
        cut = str(promql_parser.transform(parsed, post_visit=with_matcher))
    except (_UnprintableError, ValueError, TypeError):
        return None
    return cut


class _UnprintableError(Exception):
    """A selector promql-parser does not print as ``name{matchers}`` plus modifiers."""


@functools.lru_cache(maxsize=256)
def _parsed(promql: str) -> Any:
    """The parsed query when matchers in its selectors cut it exactly, else None."""
    try:
        import promql_parser  # a compiled parser, imported only where a share is cut
    except ImportError:
        return None
    try:
        parsed = promql_parser.parse(promql)
        printed = str(parsed)
        if str(promql_parser.parse(printed)) != printed:  # a printer that loses something
            return None
    except (ValueError, TypeError):
        return None
    return parsed if _keeps_namespaces(parsed, promql_parser) else None


def _keeps_namespaces(node: Any, promql_parser: Any) -> bool:
    """Whether no part of ``node`` mixes series of different namespaces."""
    own, parts = _part(node, promql_parser)
    return own and all(_keeps_namespaces(part, promql_parser) for part in parts)


def _part(node: Any, pp: Any) -> tuple[bool, tuple[Any, ...]]:
    """Whether ``node`` itself keeps namespaces apart, and the parts under it."""
    kinds: tuple[tuple[Any, Any], ...] = (
        (pp.VectorSelector, lambda n: (not n.matchers.or_matchers, ())),
        (pp.MatrixSelector, lambda n: (True, (n.vector_selector,))),
        ((pp.NumberLiteral, pp.StringLiteral), lambda n: (True, ())),
        ((pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr), lambda n: (True, (n.expr,))),
        (pp.Call, lambda n: (n.func.name in _PER_SERIES, tuple(n.args))),
        (pp.AggregateExpr, lambda n: (_groups_by_namespace(n, pp), (n.expr,))),
        (pp.BinaryExpr, lambda n: (_matches_on_namespace(n, pp), (n.lhs, n.rhs))),
    )
    for kind, read in kinds:
        if isinstance(node, kind):
            return read(node)  # type: ignore[no-any-return]
    return False, ()


def _groups_by_namespace(node: Any, pp: Any) -> bool:
    """An aggregation that keeps each namespace's series apart: ``by`` naming ``namespace``,
    ``without`` not, and a literal parameter (``topk``, ``quantile``) if any."""
    modifier, param = node.modifier, node.param
    if str(node.op) not in _GROUPING or modifier is None:
        return False
    by: bool = modifier.type == pp.AggModifierType.By
    return ("namespace" in modifier.labels) == by and (
        param is None or isinstance(param, pp.NumberLiteral))


def _matches_on_namespace(node: Any, pp: Any) -> bool:
    """A binary operation that pairs series of one namespace only (the default matching on
    every label, ``on`` naming ``namespace``, ``ignoring`` not; or a number on one side)."""
    matching = None if node.modifier is None else node.modifier.matching
    if matching is None:
        return True
    on: bool = matching.type == pp.LabelModifierType.Include
    return ("namespace" in matching.labels) == on
