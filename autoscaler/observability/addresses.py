"""Where the daemon listens: a listen address parsed, and where /status goes beside it.

The one copy of the rule the daemon follows to choose its /status listener
(``status_address``), and that ``autoscaler status --config`` follows to find it again
(``status_endpoint``). It imports no HTTP library, so the
command that only needs the address pays nothing for the server.

/status is only ever served on loopback: it tells the daemon's identity, config path,
targets and errors, which the scrape port (open to Prometheus and, without a NetworkPolicy,
to the whole pod network) has no need to show. On a loopback listen address it shares the one
listener; on any other, it gets its own on ``127.0.0.1`` at the next port (8081 for 8080),
reached in a cluster with ``kubectl port-forward``, so the API server's authorization
(``pods/portforward``) decides who reads it.
"""

from __future__ import annotations

import ipaddress

_HIGHEST_PORT = 65535


def split_address(address: str) -> tuple[str, int]:
    """"127.0.0.1:8080", "[::1]:8080" or ":8080" (all interfaces) to (host, port)."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"listen address {address!r} has no port")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - the user asked for it


def status_address(listen: str) -> str | None:
    """Where /status listens apart from ``listen``: None when ``listen`` is loopback (it
    shares that listener), else ``127.0.0.1`` at the next port (the one before 65535)."""
    host, port = split_address(listen)
    if _is_loopback(host):
        return None
    if port == 0:  # any free port: for tests, which are told no port in advance anyway
        return "127.0.0.1:0"
    return f"127.0.0.1:{port + 1 if port < _HIGHEST_PORT else port - 1}"


def status_endpoint(listen: str) -> str:
    """The address /status answers at for a daemon listening on ``listen``, as seen from its
    own host (or the pod's end of a ``kubectl port-forward``): its own listener if it has
    one, else ``listen`` itself."""
    return status_address(listen) or listen


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False
