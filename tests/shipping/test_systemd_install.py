"""The README's "Under systemd" install, done for real: in a machine booted by systemd, its
commands install the unit and the files with the owners and modes they give, and the daemon
must start, read each file (config, kubeconfig, the token and CA the kubeconfig names, the
Prometheus token), answer /readyz and take the README's reload."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.shipping import nspawn
from tests.shipping.offline import install_matrix, wheelhouse_or_skip
from tests.sim.apiserver.server import DEFAULT_USER
from tests.sim.apiserver.tls import server_tls
from tests.sim.kube import SimApiServer, apiserver
from tests.sim.prometheus import (
    LoopbackHTTPServer,
    StubRequest,
    StubResponse,
    free_port,
    prometheus_vector,
)

__all__ = ["apiserver"]

REPO = Path(__file__).parents[2]
README = REPO / "README.md"
PROMETHEUS_TOKEN = "prometheus-token-from-a-file"


def readme_commands() -> list[str]:
    """The command lines of the README's "Under systemd" block, as an operator types them."""
    section = README.read_text().split("### Under systemd", 1)[1]
    block = re.match(r"\s*\n((?: {4}.*\n)+)", section)
    assert block, "README: no indented command block under 'Under systemd'"
    return [line[4:] for line in block.group(1).splitlines()]


def install_script(sources: dict[str, str]) -> str:
    """The README's commands, verbatim, with the operator's files filled in; pip takes the
    locked packages from the wheelhouse the machine sees (no network)."""
    script = "\n".join([OFFLINE_PIP, *readme_commands()])
    for placeholder, files in sources.items():
        script = script.replace(placeholder, files)
    assert "your-" not in script, f"a README placeholder this test does not fill:\n{script}"
    return script


MACHINE_CHECKOUT, MACHINE_WHEELHOUSE = "/srv/autoscaler/checkout", "/srv/autoscaler/wheelhouse"
"""Where the machine sees its copy of this checkout (writable: pip builds in it) and the
wheelhouse: outside /tmp, which the unit's ``PrivateTmp=yes`` hides from the service."""
OFFLINE_PIP = (f"export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 "
               f"PIP_FIND_LINKS={MACHINE_WHEELHOUSE} PIP_DISABLE_PIP_VERSION_CHECK=1")
"""The environment the README's ``pip install .`` runs in: the locked packages as files
(scripts/test.sh downloads them), instead of PyPI, which CI's machine need not reach."""


def python_mismatch() -> str | None:
    """Why this checkout's packages cannot run on the machine's python3, or None."""
    try:
        found = subprocess.run(["python3", "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=30, check=True,
                               env={"PATH": "/usr/bin:/bin"}).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return f"no python3 in /usr/bin for the machine: {error}"
    ours = str(sys.version_info[:2])
    return None if found == ours else f"/usr/bin/python3 is {found}, the checkout's is {ours}"


SKIP = nspawn.unavailable() or python_mismatch()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=f"no systemd machine here: {SKIP}")


def operator_files(directory: Path, api: SimApiServer, *, prometheus_url: str,
                   port: int) -> dict[str, str]:
    """What an operator brings: the config, a kubeconfig naming a token file and a CA file
    beside it (relative paths), and the Prometheus token; by README placeholder."""
    directory.mkdir()
    (directory / "kube-token").write_text(api.token + "\n")
    (directory / "ca.crt").write_bytes(server_tls().ca_pem())
    (directory / "prometheus-token").write_text(PROMETHEUS_TOKEN + "\n")
    api.write_kubeconfig(directory / "kubeconfig", token_file="kube-token")
    kubeconfig = yaml.safe_load((directory / "kubeconfig").read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    del cluster["certificate-authority-data"]
    cluster["certificate-authority"] = "ca.crt"
    (directory / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    (directory / "config.toml").write_text(CONFIG.format(port=port, url=prometheus_url))
    secrets = " ".join(str(directory / name) for name in ("kube-token", "ca.crt",
                                                          "prometheus-token"))
    return {"your-config.toml": str(directory / "config.toml"),
            "your-kubeconfig": str(directory / "kubeconfig"), "your-secret-files": secrets}


CONFIG = """\
[daemon]
syncPeriod = "1s"
listenAddress = "127.0.0.1:{port}"

[prometheus]
url = "{url}"
bearerTokenFile = "/etc/autoscaler/prometheus-token"
timeout = "2s"

[kubernetes]
requestTimeout = "3s"

[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
minReplicas = 2
maxReplicas = 4

[[autoscaler.metrics]]
type = "Pods"
pods = {{ metric = {{ name = "load" }}, target = {{ type = "AverageValue", averageValue = "100" }}, query = 'load{{${{pod_selector}}}}' }}
"""


@contextlib.contextmanager
def prometheus_requiring_token(pods: list[str]) -> Iterator[LoopbackHTTPServer]:
    """Stands in for a Prometheus behind an auth proxy: 401 unless the bearer token is right;
    every pod on target."""
    def answer(request: StubRequest) -> StubResponse:
        if request.headers.get("Authorization") != f"Bearer {PROMETHEUS_TOKEN}":
            return StubResponse(status=401, body=b"Unauthorized")
        return StubResponse(body=prometheus_vector([({"pod": p}, 100) for p in pods]))

    with LoopbackHTTPServer(answer) as server:
        yield server


async def get(url: str) -> tuple[int, str]:
    """GET from a thread, so the simulated API server in this loop keeps answering."""
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, ""
        except OSError:
            return 0, ""
    return await asyncio.to_thread(fetch)


async def eventually(check: Callable[[], Awaitable[bool]], *, what: str,
                     machine: nspawn.Machine, timeout: float = 30) -> None:
    """Poll ``check`` until true; on timeout fail with the machine's diagnostics."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():  # noqa: ASYNC110 - the state is in another machine
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"no {what} within {timeout} s\n{machine.diagnostics()}") from None


SCRIPT = """\
cd {checkout}
( set -e
{install}
) ; {installed}
{journal}
{files}
{wait}
systemctl stop autoscaler
{state}
{journal}
"""


def machine_script(sources: dict[str, str]) -> str:
    """Install as the README says and report (with the unit's journal so far); after the
    host's stop, stop the unit and report its state file and whole journal."""
    return SCRIPT.format(
        checkout=MACHINE_CHECKOUT, install=install_script(sources),
        installed=nspawn.report("installed", "echo $?"),
        files=nspawn.report("files", "stat -c '%U:%G %a %n' /etc/autoscaler /etc/autoscaler/*"),
        wait=nspawn.WAIT_FOR_STOP,
        state=nspawn.report("state", "stat -c '%U %n' /var/lib/autoscaler/state"),
        journal=nspawn.report("journal", "journalctl -u autoscaler --no-pager -o cat"))


INSTALLED_FILES = """\
root:autoscaler 750 /etc/autoscaler
root:autoscaler 640 /etc/autoscaler/autoscaler.toml
root:autoscaler 640 /etc/autoscaler/ca.crt
root:autoscaler 640 /etc/autoscaler/kube-token
root:autoscaler 640 /etc/autoscaler/kubeconfig
root:autoscaler 640 /etc/autoscaler/prometheus-token
"""


@pytest.mark.timeout(420)
async def test_readme_install_starts_under_systemd(apiserver: SimApiServer,
                                                   tmp_path: Path) -> None:
    """Installed as the README says, the unit starts; the daemon reads the config, the
    kubeconfig and the files they name as its own account, and takes the reload."""
    apiserver.create_deployment("default", "web", replicas=2, labels={"app": "web"})
    pods = [pod["metadata"]["name"] for pod in apiserver.pods("default", "app=web")]
    port = free_port()
    with prometheus_requiring_token(pods) as prometheus:
        sources = operator_files(tmp_path / "operator", apiserver,
                                 prometheus_url=prometheus.url, port=port)
        wheelhouse = wheelhouse_or_skip()
        checkout = install_matrix.copy_checkout(tmp_path / "checkout")
        async with nspawn.booted(
                machine_script(sources), workdir=tmp_path,
                read_only=[str(tmp_path / "operator"), f"{wheelhouse}:{MACHINE_WHEELHOUSE}"],
                options=[f"--bind={checkout}:{MACHINE_CHECKOUT}"]) as machine:
            installed = await machine.wait_for("installed", timeout=300)
            assert installed.strip() == "0", machine.diagnostics()

            async def ready() -> bool:
                return (await get(f"http://127.0.0.1:{port}/readyz"))[0] == 200

            async def queried_with_token() -> bool:
                return prometheus.count("/api/v1/query") > 0

            async def reloaded() -> bool:
                metrics = (await get(f"http://127.0.0.1:{port}/metrics"))[1]
                return 'autoscaler_config_reloads_total{result="applied"} 1.0' in metrics

            await eventually(ready, what="200 from /readyz", machine=machine)
            await eventually(queried_with_token, what="Prometheus query", machine=machine)
            await eventually(reloaded, what="applied reload", machine=machine)
    journal = (machine.out / "journal").read_text()  # the machine is down: reports are final
    assert "config reloaded" in journal
    assert {r.headers.get("Authorization") for r in prometheus.requests} == {
        f"Bearer {PROMETHEUS_TOKEN}"}, journal
    assert apiserver.log.records
    assert {(r.user, r.status == 401) for r in apiserver.log.records} == {(DEFAULT_USER, False)}
    assert (machine.out / "files").read_text() == INSTALLED_FILES
    assert (machine.out / "state").read_text() == "autoscaler /var/lib/autoscaler/state\n"
