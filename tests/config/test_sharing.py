"""Targets' common parts are one object per config (a ring member loads the whole fleet)."""

from __future__ import annotations

import dataclasses

from autoscaler.config import parse_config
from autoscaler.config.sharing import SHARED_FIELDS, SharedParts

HEAD = """
[defaults]
minReplicas = 2
maxReplicas = 20
metrics = [
  { type = "Resource", resource = { name = "cpu", target = { type = "Utilization", averageUtilization = 50 } } },
  { type = "Pods", pods = { metric = { name = "rps" }, target = { type = "AverageValue", averageValue = "10" }, query = 'sum by (namespace, pod) (rate(http_requests_total[1m]))' } },
]
behavior = { scaleDown = { stabilizationWindowSeconds = 120 } }
"""
TARGET = """
[[autoscaler]]
namespace = "{namespace}"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "{name}" }}
"""


def targets(*tables: str) -> dict[str, object]:
    return {t.key: t for t in parse_config(HEAD + "".join(tables)).targets}


def test_targets_over_the_same_defaults_share_their_spec_and_queries() -> None:
    found = targets(*(TARGET.format(namespace=f"team-{i % 2}", name=f"app-{i}")
                      for i in range(4)))
    first, *others = found.values()
    for other in others:
        for name in SHARED_FIELDS:
            assert getattr(other, name) is getattr(first, name), name
        assert other.scale_target_ref.kind is first.scale_target_ref.kind
    assert found["team-0/Deployment/app-2"].namespace is found["team-0/Deployment/app-0"].namespace


def test_a_target_of_its_own_keeps_its_own_values() -> None:
    """Shared by value only: a target with another bound or window has its own spec, equal
    to what it would be alone."""
    own = TARGET.format(namespace="shop", name="web") + "maxReplicas = 7\n"
    found = targets(TARGET.format(namespace="shop", name="api"), own)
    web, api = found["shop/Deployment/web"], found["shop/Deployment/api"]
    assert web.spec.max_replicas == 7
    assert api.spec.max_replicas == 20
    assert web.spec is not api.spec
    assert web.metric_queries is api.metric_queries
    alone = targets(own)["shop/Deployment/web"]
    assert alone == web


def test_an_unhashable_value_is_kept_as_it_is() -> None:
    shared = SharedParts()
    value = [1, 2]
    assert shared(value) is value
    assert shared((1, 2)) is shared((1, 2))


def test_sharing_changes_no_target() -> None:
    """Every field of every target is equal with and without sharing."""
    text = HEAD + "".join(TARGET.format(namespace="a", name=f"n{i}") for i in range(3))
    for target in parse_config(text).targets:
        again = SharedParts().target(target)
        assert dataclasses.asdict(again) == dataclasses.asdict(target)


def test_a_target_keeps_no_string_of_the_parsed_document() -> None:
    """The document's strings are copied: one kept in each of its arenas would keep all of
    its memory (``config/sharing.py``). Built at run time, so none is a literal's object."""
    parsed = parse_config(HEAD + TARGET.format(namespace="shop", name="web")).targets[0]
    document = {"namespace": "".join(["sh", "op"]), "name": "".join(["w", "eb"]),
                "kind": "".join(["Deploy", "ment"]), "api_version": "".join(["apps/", "v1"]),
                "prometheus": "".join(["def", "ault"])}
    ref = dataclasses.replace(parsed.scale_target_ref, api_version=document["api_version"],
                              kind=document["kind"], name=document["name"])
    given = dataclasses.replace(parsed, namespace=document["namespace"], scale_target_ref=ref,
                                prometheus=document["prometheus"])
    kept = SharedParts().target(given)
    assert kept == given
    for value in (kept.namespace, kept.prometheus, *dataclasses.astuple(kept.scale_target_ref)):
        assert all(value is not parsed_value for parsed_value in document.values()), value
