"""``metadata.managedFields`` for the replicas a ``/scale`` subresource shows, and nothing else.

Upstream records, for every write, which *field manager* changed which fields: the request's
``fieldManager`` parameter, else the first word of its User-Agent (``kubectl``,
``OpenAPI-Generator``...). An update through ``/scale`` takes ``spec.replicas`` over for the
writer, in an entry marked ``subresource: scale`` (kubernetes#98377, Kubernetes 1.21); an
update of the object that changes the field does the same without the marker; a write that
leaves the count as it was takes nothing over. So the entry owning ``f:spec.f:replicas``
names whoever last set the count.

Modelled here for that one field: each entry holds only the replicas path, an entry that
loses it is dropped, and an apply (operation ``Apply``) that sets the count takes it over
alone (upstream would share a field two appliers set to the same value). Writes outside a
request (the simulated controllers, the test's own helpers) are made by ``manager(...)``'s
name, ``sim`` unless a helper says otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .resources import ResourceType
from .selectors import get_path

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Writer:
    manager: str
    operation: str = "Update"


_WRITER: ContextVar[Writer | None] = ContextVar("sim_field_manager", default=None)
_SIM = Writer("sim")


@contextlib.contextmanager
def manager(name: str, operation: str = "Update") -> Iterator[None]:
    """Writes inside the block are made by field manager ``name``."""
    token = _WRITER.set(Writer(name, operation))
    try:
        yield
    finally:
        _WRITER.reset(token)


def request_manager(field_manager: str | None, user_agent: str) -> str:
    """Upstream's name for a request's manager: ``fieldManager``, else the User-Agent's
    product (``kubectl/v1.32.0 (linux/amd64) ...`` -> ``kubectl``)."""
    if field_manager:
        return field_manager
    return user_agent.split("/", 1)[0].strip() or "unknown"


def _replicas_path(rt: ResourceType) -> list[str] | None:
    if rt.scale is None:
        return None
    return [part for part in rt.scale.spec_replicas_path.split(".") if part]


def _owns(entry: Obj, path: list[str]) -> bool:
    node: Any = entry.get("fieldsV1") or {}
    for part in path:
        if not isinstance(node, dict) or f"f:{part}" not in node:
            return False
        node = node[f"f:{part}"]
    return True


def record_write(rt: ResourceType, old: Obj | None, new: Obj, *, subresource: str | None,
                 now: str) -> None:
    """Give ``new`` the managed fields ``old`` had, the replicas taken over by the current
    writer when this write set them (a create that names them, an update that changes
    them)."""
    path = _replicas_path(rt)
    entries = list((old or {}).get("metadata", {}).get("managedFields") or [])
    if path is None:
        return
    dotted = ".".join(path)
    value = get_path(new, dotted)
    changed = value is not None if old is None else value != get_path(old, dotted)
    if changed:
        writer = _WRITER.get() or _SIM
        entries = [e for e in entries if not _owns(e, path)]
        fields: Obj = {}
        node = fields
        for part in path:
            node[f"f:{part}"] = node = {}
        entry: Obj = {"manager": writer.manager, "operation": writer.operation,
                      "apiVersion": rt.api_version, "time": now, "fieldsType": "FieldsV1",
                      "fieldsV1": fields}
        if subresource is not None:
            entry["subresource"] = subresource
        entries.append(entry)
    if entries:
        new["metadata"]["managedFields"] = entries
    else:
        new["metadata"].pop("managedFields", None)
