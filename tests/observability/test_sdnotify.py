"""sd_notify over a real datagram socket."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from autoscaler.observability.sdnotify import Notifier


def test_ready_and_watchdog_reach_the_socket(tmp_path: Path) -> None:
    """READY=1 (with a status) and WATCHDOG=1 arrive as datagrams on NOTIFY_SOCKET."""
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(2)
        notifier = Notifier(path)
        assert notifier.ready("3 targets")
        assert server.recv(1024) == b"READY=1\nSTATUS=3 targets"
        assert notifier.watchdog()
        assert server.recv(1024) == b"WATCHDOG=1"


def test_abstract_namespace_address() -> None:
    """A leading '@' names an abstract-namespace socket, as systemd passes it."""
    name = f"autoscaler-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(2)
        assert Notifier("@" + name).stopping()
        assert server.recv(1024) == b"STOPPING=1"


def test_outside_systemd_is_a_no_op() -> None:
    """Without NOTIFY_SOCKET nothing is sent and nothing fails."""
    assert not Notifier("").ready()


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [("20000000", None, 10.0), ("20000000", "1", None), (None, None, None)],
    ids=["half-the-interval", "other-pid", "no-watchdog"],
)
def test_watchdog_interval(
    monkeypatch: pytest.MonkeyPatch, usec: str | None, pid: str | None, expected: float | None
) -> None:
    """The ping interval is half of WATCHDOG_USEC, only for the PID systemd named."""
    for name, value in (("WATCHDOG_USEC", usec), ("WATCHDOG_PID", pid)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert Notifier("x").watchdog_interval() == expected
