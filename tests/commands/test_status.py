"""``autoscaler status``: where it finds the daemon's /status."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from autoscaler.commands import build_parser, main
from autoscaler.commands.status import DEFAULT_LISTEN, daemon_url
from autoscaler.commands.views import ring_summary
from autoscaler.config.validated import DaemonSettings
from autoscaler.observability.addresses import split_address, status_address
from autoscaler.runtime.ring import SINGLE_LEADER_NOT_READ
from tests.commands.fake_http import serving

CONFIG = """\
[daemon]
listenAddress = "{listen}"

[prometheus]
url = "http://127.0.0.1:9090"

[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
minReplicas = 1
maxReplicas = 3
"""
LISTEN_ADDRESSES = {
    "in-cluster": ("0.0.0.0:8080", "http://127.0.0.1:8081"),
    "all-interfaces": (":8080", "http://127.0.0.1:8081"),
    "ipv6-any": ("[::]:8080", "http://127.0.0.1:8081"),
    "pod-ip": ("10.1.2.3:9000", "http://127.0.0.1:9001"),
    "loopback": ("127.0.0.1:9000", "http://127.0.0.1:9000"),
    "ipv6-loopback": ("[::1]:8080", "http://[::1]:8080"),
    "localhost": ("localhost:8080", "http://localhost:8080"),
}


def url_for(listen: str, tmp_path: Path) -> str:
    """Where ``status --config`` asks for a config whose listenAddress is ``listen``."""
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(listen=listen))
    return daemon_url(build_parser().parse_args(["status", "--config", str(config)]))


@pytest.mark.parametrize(("listen", "expected"), LISTEN_ADDRESSES.values(),
                         ids=LISTEN_ADDRESSES.keys())
def test_status_asks_where_the_daemon_serves_status(listen: str, expected: str,
                                                   tmp_path: Path) -> None:
    """Beside a listen address off loopback, /status is on 127.0.0.1 at the next port;
    beside a loopback one, on that listener."""
    assert url_for(listen, tmp_path) == expected


@pytest.mark.parametrize("listen", [listen for listen, _ in LISTEN_ADDRESSES.values()],
                         ids=LISTEN_ADDRESSES.keys())
def test_status_and_the_daemon_follow_one_rule(listen: str, tmp_path: Path) -> None:
    """The command asks exactly the listener the daemon opens /status on (app.py serves it
    at ``status_address(listen)``, else on ``listen``): the two cannot drift apart."""
    host, port = split_address(status_address(listen) or listen)
    assert url_for(listen, tmp_path) in {f"http://{host}:{port}", f"http://[{host}]:{port}"}


def test_without_config_status_asks_the_default_listen_address() -> None:
    """No --config: the daemon's default listen address, which is loopback (shared)."""
    assert DaemonSettings().listen_address == DEFAULT_LISTEN
    assert daemon_url(build_parser().parse_args(["status"])) == "http://127.0.0.1:8080"


def test_status_with_the_in_cluster_config_reaches_status(tmp_path: Path) -> None:
    """A config listening on all interfaces (as deploy/configmap.yaml does): ``status
    --config`` reaches the daemon's /status at 127.0.0.1, the next port up, not the scrape
    port (which answers 404 there)."""
    body = {"targets": {"default/Deployment/web": {"currentReplicas": 2,
                                                   "desiredReplicas": 2}}}
    with serving(body=body) as url:
        port = int(url.rpartition(":")[2])
        config = tmp_path / "config.toml"
        config.write_text(CONFIG.format(listen=f"0.0.0.0:{port - 1}"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["status", "--config", str(config), "-o", "json"])
    assert code == 0
    assert '"desiredReplicas": 2' in out.getvalue()


def test_the_ring_line_says_what_the_member_still_waits_for() -> None:
    ring = {"member": "m1", "valid": True, "members": ["m1", "m2"], "buckets": ["01", "02"],
            "claiming": [], "releasing": [], "unownedBuckets": [], "moves": 3,
            "cachedNamespaces": 12, "standbyPendingNamespaces": 0}
    assert ring_summary(ring).endswith("3 moves; caches 12 namespaces")
    waiting = ring_summary({**ring, "standbyPendingNamespaces": 4})
    assert waiting.endswith("caches 12 namespaces (4 more once the ring settles)")
    replacing = ring_summary({**ring, "singleLeader": "old-7f9c"})
    assert replacing.endswith(
        "; claims nothing while the single leader old-7f9c of this name acts")
    reading = ring_summary({**ring, "singleLeader": SINGLE_LEADER_NOT_READ})
    assert reading.endswith(
        "; claims nothing until it has read the single-leader Lease of this name")
