"""Plain values the Kubernetes adapter's modules share: an object reference and a ``/scale``.

Kept apart from the code that reads and writes them (``scale``, ``targets``, ``events``) so
those modules import values, not each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from autoscaler.adapters.kube.labels import Selector, parse_selector
from autoscaler.errors import BadDataError


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
    annotations: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), hash=False)
    """The target object's ``metadata.annotations`` (pause, ...); a Scale has none itself."""

    def pod_selector(self) -> Selector:
        """The parsed selector; upstream refuses a target without one ("selector is required")."""
        if not self.selector.strip():
            raise BadDataError(
                f"{self.target.kind} {self.target.namespace}/{self.target.name}: its /scale has "
                "no status.selector (selector is required; a custom resource needs "
                "labelSelectorPath in its scale subresource)")
        return parse_selector(self.selector)
