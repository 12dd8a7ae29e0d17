"""HTTP statuses and transport failures map onto the daemon's error taxonomy."""

import json

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.errors import (
    AccessDeniedError,
    ConflictError,
    NotFoundError,
    RejectedError,
    TransientError,
)


def api_exception(status: int, message: str = "nope") -> ApiException:
    error = ApiException(status=status, reason="Reason")
    error.body = json.dumps({"kind": "Status", "message": message, "code": status})
    return error


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (api_exception(401), AccessDeniedError),
        (api_exception(403), AccessDeniedError),
        (api_exception(404), NotFoundError),
        (api_exception(409), ConflictError),
        (api_exception(422), RejectedError),
        (api_exception(429), TransientError),
        (api_exception(500), TransientError),
        (api_exception(503), TransientError),
        (TimeoutError(), TransientError),
        (aiohttp.ClientConnectionError("refused"), TransientError),
    ],
    ids=["401", "403", "404", "409", "422", "429", "500", "503", "timeout", "connection"],
)
def test_mapping(raised: Exception, expected: type[Exception]) -> None:
    """Each failure becomes one of our errors, naming the operation."""
    with pytest.raises(expected, match="get /scale of web"), api_errors("get /scale of web"):
        raise raised


def test_status_message_is_kept() -> None:
    """The Status message of the body reaches our error's text."""
    with pytest.raises(ConflictError, match="object has been modified"), api_errors("put"):
        raise api_exception(409, "the object has been modified")


def test_old_names_are_the_same_classes() -> None:
    """RejectedError lives in autoscaler.errors; the kube re-export is the very same class,
    so every except clause still catches."""
    from autoscaler import errors
    from autoscaler.adapters.kube import api_errors as kube_errors

    assert kube_errors.RejectedError is errors.RejectedError
