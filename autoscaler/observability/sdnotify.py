"""systemd notification (READY=1, WATCHDOG=1, STOPPING=1) without a dependency.

A datagram to ``$NOTIFY_SOCKET``; a leading ``@`` names the abstract namespace. Outside
systemd the socket is unset and every call is a no-op.
"""

from __future__ import annotations

import os
import socket


class Notifier:
    def __init__(self, address: str | None = None) -> None:
        self.address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def watchdog_interval(self) -> float | None:
        """Half the ``WATCHDOG_USEC`` systemd asks for, as sd_watchdog_enabled(3) advises."""
        usec = os.environ.get("WATCHDOG_USEC")
        pid = os.environ.get("WATCHDOG_PID")
        if not usec or (pid and pid != str(os.getpid())):
            return None
        return int(usec) / 1e6 / 2

    def notify(self, *states: str) -> bool:
        if not self.enabled:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect(target)
                sock.sendall("\n".join(states).encode())
            except OSError:
                return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")
