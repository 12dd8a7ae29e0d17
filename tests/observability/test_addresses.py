"""The listen address rule: where the daemon listens, and where /status goes beside it."""

from __future__ import annotations

import pytest

from autoscaler.observability.addresses import split_address, status_address


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:8080", ("127.0.0.1", 8080)), ("[::1]:9", ("::1", 9)), (":80", ("0.0.0.0", 80))],
    ids=["ipv4", "ipv6", "all-interfaces"],
)
def test_split_address(address: str, expected: tuple[str, int]) -> None:
    """Listen addresses parse into host and port."""
    assert split_address(address) == expected


@pytest.mark.parametrize(("listen", "apart"), [
    ("127.0.0.1:8080", None),
    ("127.0.0.2:8080", None),
    ("[::1]:8080", None),
    ("localhost:8080", None),
    ("0.0.0.0:8080", "127.0.0.1:8081"),
    (":8080", "127.0.0.1:8081"),
    ("[::]:8080", "127.0.0.1:8081"),
    ("10.1.2.3:9000", "127.0.0.1:9001"),
    ("autoscaler.example:8080", "127.0.0.1:8081"),
    ("0.0.0.0:65535", "127.0.0.1:65534"),
], ids=["loopback", "loopback-range", "ipv6-loopback", "localhost", "any-ipv4", "any",
        "any-ipv6", "pod-ip", "host-name", "highest-port"])
def test_status_stays_on_loopback(listen: str, apart: str | None) -> None:
    """/status shares a loopback listener; beside any other it moves to 127.0.0.1."""
    assert status_address(listen) == apart
