"""PromQL templates: the placeholders a query may use, their checking and their rendering.

A query is a ``string.Template``: ``${name}`` (or ``$name``) is replaced, ``$$`` is a literal
``$``, and PromQL's own braces are left alone. The placeholders:

``${namespace}``
    The target's namespace.
``${name}``
    ``scaleTargetRef.name``: the workload's name (``web`` for ``Deployment/web``).
``${kind}``
    ``scaleTargetRef.kind`` (``Deployment``).
``${pod_selector}``
    ``namespace="<ns>",pod=~"<pod_regex>"``: label matchers for the target's current pods,
    ready to put inside ``{...}``:
    ``sum by (pod) (rate(http_requests_total{${pod_selector}}[2m]))``.
``${pod_regex}``
    The target's current pod names, regex-escaped and joined with ``|``.
``${container}``
    The container of a ContainerResource metric (empty for other metric types).

An unknown placeholder or a stray ``$`` is a validation error when the config is loaded, so a
typo never reaches Prometheus. ``check`` also parses every query once its placeholders are
filled in (``promql_problem``, with the promql-parser package), so broken PromQL is found
without a Prometheus; the daemon does not, since a query Prometheus rejects only makes its
metric invalid (hold), while a parser lagging behind Prometheus must never refuse a config.
"""

from __future__ import annotations

import string

PLACEHOLDERS: tuple[str, ...] = (
    "namespace", "name", "kind", "pod_selector", "pod_regex", "container",
)
"""Every placeholder a query template may use."""

TODO_MARKER = "TODO"
"""``import-hpa`` and ``import-keda`` write queries starting with this; ``check`` rejects them
with a pointer."""


def template_problems(template: str) -> list[str]:
    """What is wrong with a query template (empty when it is fine)."""
    if not template.strip():
        return ["must not be empty"]
    if template.lstrip().startswith(TODO_MARKER):
        return [
            "is still the TODO placeholder an importer wrote: replace it with the PromQL for this "
            "metric (see the comment above it in the file)"
        ]
    compiled = string.Template(template)
    if not compiled.is_valid():
        return [
            "has a '$' that starts no placeholder: write '$$' for a literal '$' "
            f"(placeholders: {known_placeholders()})"
        ]
    unknown = [name for name in compiled.get_identifiers() if name not in PLACEHOLDERS]
    return [
        f"unknown placeholder ${{{name}}}; known placeholders: {known_placeholders()}"
        for name in unknown
    ]


def known_placeholders() -> str:
    return ", ".join(f"${{{name}}}" for name in PLACEHOLDERS)


def render_query(
    template: str, *, namespace: str, name: str, kind: str, pod_selector: str,
    pod_regex: str, container: str = "",
) -> str:
    """Substitute the target into a query template (``string.Template`` semantics).

    Templates are checked when the config is loaded; an invalid one raises ``KeyError`` or
    ``ValueError`` here.
    """
    return string.Template(template).substitute(
        namespace=namespace, name=name, kind=kind, pod_selector=pod_selector,
        pod_regex=pod_regex, container=container,
    )


def promql_problem(promql: str) -> str | None:
    """Why ``promql`` does not parse as PromQL, or ``None`` when it does."""
    import promql_parser  # a compiled parser: imported only by the commands that check

    try:
        promql_parser.parse(promql)
    except ValueError as error:
        return f"is not valid PromQL once its placeholders are filled in: {error}"
    return None
