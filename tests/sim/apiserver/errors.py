"""Kubernetes ``Status`` failures, worded as upstream words them.

Every non-2xx answer of the simulator is one of these, so clients see the same ``reason``,
``code``, ``details`` and message shape they would see from a real API server.
"""

from __future__ import annotations

from typing import Any

from .resources import ResourceType


class ApiError(Exception):
    """An HTTP failure with its ``Status`` body."""

    def __init__(self, code: int, reason: str, message: str,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.retry_after: int | None = None
        """Seconds a 429 asks the client to wait (the Retry-After header)."""

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": self.message}
        if self.reason:
            body["reason"] = self.reason
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(rt: ResourceType | None, name: str | None, kind: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if rt is not None and rt.group:
        details["group"] = rt.group
    kind = kind or (rt.plural if rt is not None else None)
    if kind:
        details["kind"] = kind
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.group_resource} "{name}" not found',
                    _details(rt, name))


def namespace_not_found(name: str) -> ApiError:
    return ApiError(404, "NotFound", f'namespaces "{name}" not found',
                    {"name": name, "kind": "namespaces"})


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{rt.group_resource} "{name}" already exists',
                    _details(rt, name))


def conflict(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, "Conflict",
        f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        _details(rt, name))


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422: ``causes`` are (field, reason type, message) as upstream's field errors."""
    qualified = f"{kind}.{group}" if group else kind
    texts = [f"{f}: {m}" if f else m for f, _, m in causes]
    text = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"  # as utilerrors.Aggregate
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(*, user: str, verb: str, resource: str, group: str, namespace: str | None,
              name: str | None) -> ApiError:
    scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    plural, _, _ = resource.partition("/")
    target = f'{plural}.{group} "{name}"' if group and name else (
        f'{plural} "{name}"' if name else (f"{plural}.{group}" if group else plural))
    return ApiError(
        403, "Forbidden",
        f'{target} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{group}"{scope}',
        {k: v for k, v in (("name", name), ("group", group), ("kind", plural)) if v})


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the "
                    "requested resource")


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(accepted)}", None) if content_type else ApiError(
        415, "UnsupportedMediaType", "missing content type")


def not_acceptable(accepted: list[str]) -> ApiError:
    return ApiError(406, "NotAcceptable",
                    f"only the following media types are accepted: {', '.join(accepted)}")


def expired(requested: int, oldest: int) -> ApiError:
    """The 410 a watch carries in an ERROR event when its resourceVersion left the window."""
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def injected(code: int, *, retry_after: int | None = None) -> ApiError:
    reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
               504: "Timeout", 409: "Conflict", 404: "NotFound", 403: "Forbidden",
               401: "Unauthorized", 400: "BadRequest"}
    error = ApiError(code, reasons.get(code, "Unknown"), f"injected failure (HTTP {code})")
    error.retry_after = retry_after
    return error
