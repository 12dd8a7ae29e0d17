"""PromQL text: the built-in resource queries and the rendering of user templates.

Built-in queries read cAdvisor's series as the kubelet exports them and are shared by every
target on a server: they cover all the namespaces involved (one ``namespace=~`` regex) and
group ``by (namespace, pod)`` or ``by (namespace, pod, container)``; the adapter splits the
answer per target. Only ``cpu`` and ``memory`` have built-in queries.

- cpu: ``rate(container_cpu_usage_seconds_total[W])`` where W is the metric's ``window``
  (default 60 s); each sample's window is W, its timestamp the evaluation time.
- memory: ``container_memory_working_set_bytes`` (a gauge; the sample's window is the
  metric's ``window``, as upstream's metrics-server reports its scrape window).
- requests (``requests_source = "kube-state-metrics"``):
  ``max by (namespace, pod, container) (kube_pod_container_resource_requests{resource=...})``;
  ``max`` folds the duplicate series of several kube-state-metrics replicas.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable

from autoscaler.config.query import render_query

CADVISOR_FILTER = 'container!="",container!="POD",image!=""'
"""Real containers only: the pod-level cgroup (container="") and the pause container are not."""

_USAGE = {
    "cpu": "rate(container_cpu_usage_seconds_total{{{selector}}}[{window}])",
    "memory": "container_memory_working_set_bytes{{{selector}}}",
}
_REQUESTS = (
    "max by (namespace, pod, container) "
    '(kube_pod_container_resource_requests{{resource="{resource}",{namespaces}}})'
)

BUILT_IN_RESOURCES = frozenset(_USAGE)


def promql_string(value: str) -> str:
    """``value`` escaped for a double-quoted PromQL string literal."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_REGEX_META = re.compile(r"([.^$*+?()\[\]{}|\\])")


def alternation(names: Iterable[str]) -> str:
    """A regex matching exactly ``names`` (PromQL anchors ``=~`` itself), sorted for stable text.

    Only regex metacharacters are escaped (``re.escape`` also escapes ``-``, which RE2 and
    PromQL strings reject); the caller escapes the result for a PromQL string literal.
    """
    return "|".join(_REGEX_META.sub(r"\\\1", name) for name in sorted(set(names)))


def duration(seconds: float) -> str:
    """A PromQL duration: ``60s``, or ``1500ms`` when not a whole number of seconds."""
    millis = max(1, round(seconds * 1000))
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def usage_query(
    resource: str, *, namespaces: Iterable[str], per_container: bool, window: float
) -> str:
    """The shared usage query for ``resource`` over ``namespaces``; KeyError if not built in."""
    selector = f'{CADVISOR_FILTER},namespace=~"{promql_string(alternation(namespaces))}"'
    by = "namespace, pod, container" if per_container else "namespace, pod"
    inner = _USAGE[resource].format(selector=selector, window=duration(window))
    return f"sum by ({by}) ({inner})"


def requests_query(resource: str, *, namespaces: Iterable[str]) -> str:
    """The shared kube-state-metrics requests query for ``resource`` over ``namespaces``."""
    matcher = f'namespace=~"{promql_string(alternation(namespaces))}"'
    return _REQUESTS.format(resource=promql_string(resource), namespaces=matcher)


def pod_regex(pods: Iterable[str]) -> str:
    """``${pod_regex}``: a regex matching the target's pod names exactly, escaped for use
    inside a double-quoted PromQL string (``pod=~"${pod_regex}"``)."""
    return promql_string(alternation(pods))


def pod_selector(namespace: str, pods: Iterable[str]) -> str:
    """``${pod_selector}``: label matchers for the target's pods, to put inside ``{...}``."""
    return f'namespace="{promql_string(namespace)}",pod=~"{pod_regex(pods)}"'


def render(
    template: str, *, namespace: str, name: str, kind: str, pods: Iterable[str],
    container: str = "",
) -> str:
    """Substitute the target into a user query (``autoscaler.config.render_query``).

    Raises ``KeyError`` or ``ValueError`` for an unknown or malformed ``$`` placeholder.
    """
    if "$" not in template:  # nothing to substitute (and no "$$" to unescape)
        return template
    used = _placeholders(template)
    # The pod alternations cost more than the rest together (a pass renders every target's
    # queries): build them only for a template that uses them.
    names = tuple(pods) if {"pod_regex", "pod_selector"} & used else ()
    return render_query(
        template, namespace=namespace, name=name, kind=kind, container=container,
        pod_regex=pod_regex(names) if "pod_regex" in used else "",
        pod_selector=pod_selector(namespace, names) if "pod_selector" in used else "",
    )


def fleet_wide(template: str) -> bool:
    """Whether a query template names neither its target's namespace nor its pods: every
    target renders it to an answer for the whole fleet."""
    return "$" not in template or not _SCOPING & _placeholders(template)


_SCOPING = frozenset({"namespace", "pod_selector", "pod_regex"})


@functools.lru_cache(maxsize=1024)
def _placeholders(template: str) -> frozenset[str]:
    return frozenset(string.Template(template).get_identifiers())


_WORKLOAD_POD_NAMES = {
    "Deployment": "{name}-[a-z0-9]+-[a-z0-9]+",  # <deployment>-<pod-template-hash>-<suffix>
    "ReplicaSet": "{name}-[a-z0-9]+",
    "StatefulSet": "{name}-[0-9]+",
}


def workload_pod_regex(kind: str, name: str) -> str:
    """A regex for every pod the workload creates, past and present, by the names its
    controller gives them (for a kind we do not know: ``<name>-`` and anything after),
    escaped for a double-quoted PromQL string."""
    escaped = _REGEX_META.sub(r"\\\1", name)
    pattern = _WORKLOAD_POD_NAMES.get(kind, "{name}-.+").format(name=escaped)
    return promql_string(pattern)


def history_query(
    *, template: str | None, given: str | None, resource: str | None, per_container: bool,
    namespace: str, name: str, kind: str, container: str, window: float,
) -> str:
    """The PromQL whose range query gives a metric's past totals.

    ``given`` (the ``historyQuery``) is used as written; else ``sum`` of the metric's own
    query (``template``) with the pod placeholders widened to every pod the workload ever
    had (``workload_pod_regex``), or of the built-in ``resource`` query (``template`` None)
    restricted to those pods. Raises ``KeyError`` or ``ValueError`` for a template that
    does not render."""
    regex = workload_pod_regex(kind, name)
    selector = f'namespace="{promql_string(namespace)}",pod=~"{regex}"'
    if given is not None or template is not None:
        rendered = render_query(
            given or template or "", namespace=namespace, name=name, kind=kind,
            container=container, pod_regex=regex, pod_selector=selector)
        return rendered if given is not None else f"sum({rendered})"
    if resource not in _USAGE:
        raise KeyError(f"no built-in query for resource {resource!r}")
    matchers = f"{CADVISOR_FILTER},{selector}"
    if per_container:
        matchers += f',container="{promql_string(container)}"'
    return f"sum({_USAGE[resource].format(selector=matchers, window=duration(window))})"
