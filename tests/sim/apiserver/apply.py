"""Server-side apply, minimally: what ``kubectl apply --server-side`` needs, no more.

A PATCH with ``Content-Type: application/apply-patch+yaml`` carries the whole object as its
applier wants it (JSON or YAML) and must name a ``fieldManager`` (else 422, as upstream).
Absent, the object is created from that body (201); present, the body is merged into it
(200): built-in kinds by the strategic-merge approximation of patch.py (lists of named items
merged by name), custom resources by JSON merge patch (lists replaced). Either way the write
goes through the ordinary create or update, so validation, defaults, resourceVersion and
watch events are as for any write.

Not modelled: field ownership (beyond who last set the replicas: ``managed.py``), hence no
conflict (409) between two managers, and ``force`` changes nothing; a field a manager applied before and leaves out now
is kept (upstream removes it); apply to a subresource (415).
"""

from __future__ import annotations

from typing import Any

from .errors import ApiError, bad_request, invalid
from .patch import MERGE, STRATEGIC
from .resources import ResourceType
from .rest import Rest
from .store import Obj


def server_side_apply(rest: Rest, rt: ResourceType, namespace: str | None, name: str, *,
                      body: Any, field_manager: str | None,
                      subresource: str | None) -> tuple[int, Obj]:
    """(HTTP status, the object as stored) for an apply PATCH of ``name``."""
    if subresource is not None:
        raise ApiError(415, "UnsupportedMediaType",
                       "server-side apply to a subresource is not supported by the simulated "
                       "API server")
    if not field_manager:
        raise invalid("PatchOptions", "meta.k8s.io", "", [(
            "fieldManager", "FieldValueRequired", "Required value: is required for apply patch")])
    _check_applied(rt, name, body)
    if rest.store.get(rt.storage_key, namespace, name) is None:
        return 201, rest.create(rt, namespace, body)
    merge = MERGE if rt.custom else STRATEGIC
    return 200, rest.patch(rt, namespace, name, content_type=merge, body=body)


def _check_applied(rt: ResourceType, name: str, body: Any) -> None:
    """An apply body is a whole object: its own apiVersion, kind and the URL's name."""
    if not isinstance(body, dict):
        raise bad_request("error decoding YAML: the applied configuration is not an object")
    if body.get("apiVersion") != rt.api_version or body.get("kind") != rt.kind:
        raise bad_request(f"the applied configuration's apiVersion/kind ({body.get('apiVersion')}"
                          f"/{body.get('kind')}) does not match the URL's ({rt.api_version}/"
                          f"{rt.kind})")
    meta = body.get("metadata")
    if not isinstance(meta, dict) or meta.get("name") != name:
        raise bad_request(f"the name of the object ({(meta or {}).get('name')}) does not match "
                          f"the name on the URL ({name})")
