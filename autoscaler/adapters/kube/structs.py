"""Plain values the Kubernetes adapter's modules share: an object reference and a ``/scale``.

Kept apart from the code that reads and writes them (``scale``, ``targets``, ``events``) so
those modules import values, not each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from autoscaler.adapters.kube.labels import Selector, parse_selector
from autoscaler.errors import BadDataError

NO_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})
"""What an object without annotations has: one for all (most targets have none)."""


def annotations_of(annotations: Mapping[Any, Any] | None) -> Mapping[str, str]:
    """``metadata.annotations`` as a read-only map of strings (``NO_ANNOTATIONS`` if none:
    an empty map of its own held 0.11 KB a target)."""
    if not annotations:
        return NO_ANNOTATIONS
    return MappingProxyType({str(k): str(v) for k, v in annotations.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectRef:
    """An object as an Event's ``involvedObject`` names it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scale:
    """A target's ``/scale``: what the core reads and what a write must carry back."""

    target: ObjectRef
    spec_replicas: int
    status_replicas: int
    selector: str
    """``status.selector``: the pods the target owns, as a label-selector string."""
    resource_version: str
    annotations: Mapping[str, str] = field(default_factory=lambda: NO_ANNOTATIONS, hash=False)
    """The target object's ``metadata.annotations`` (pause, ...); a Scale has none itself."""
    replicas_managers: tuple[str, ...] | None = None
    """Who last set ``spec.replicas``: the field managers owning it in the object's
    ``metadata.managedFields``, newest first (``None``: the object says nothing)."""

    def pod_selector(self) -> Selector:
        """The parsed selector; upstream refuses a target without one ("selector is required")."""
        if not self.selector.strip():
            raise BadDataError(
                f"{self.target.kind} {self.target.namespace}/{self.target.name}: its /scale has "
                "no status.selector (selector is required; a custom resource needs "
                "labelSelectorPath in its scale subresource)")
        return parse_selector(self.selector)


def replicas_managers(metadata: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The managers owning ``spec.replicas`` in ``metadata.managedFields``, newest first.

    Upstream records an update of ``/scale`` as the writer taking that field over (an entry
    with ``subresource: scale``), and an update of the object that changes it likewise; a
    write that leaves the count alone takes nothing (kubernetes#98377, 1.21). So the owner
    is whoever last set the count. ``None`` when there are no managed fields at all (a
    server or a proxy that strips them); a custom resource whose replicas live elsewhere
    than ``spec.replicas`` reads as owned by nobody (``()``).
    """
    entries = metadata.get("managedFields")
    if not isinstance(entries, list) or not entries:
        return None
    owners = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("manager"), str):
            continue
        spec = (entry.get("fieldsV1") or {}).get("f:spec") if isinstance(
            entry.get("fieldsV1"), dict) else None
        if isinstance(spec, dict) and "f:replicas" in spec:
            owners.append((str(entry.get("time") or ""), entry["manager"]))
    return tuple(manager for _, manager in sorted(owners, reverse=True))
