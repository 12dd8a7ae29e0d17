"""The README's "In the cluster" install, run as written.

A user's copy of deploy/ gets the README's two image lines and the user's Prometheus; the
real ``kubectl kustomize`` renders it and the real ``kubectl apply --server-side`` applies it
to the simulated API server. Then the daemon starts exactly as the applied Deployment's pod
says (tests/shipping/pod.py: the image's entrypoint with the container's args, the env with
its fieldRefs, the ConfigMap mounted where the pod mounts it, the service account's files,
the securityContext) in a machine booted by systemd with a network of its own: it has the
pod's IP, reaches the API server and Prometheus at the addresses the pod is given
(tests/shipping/relay.py), and binds nothing on the host. The test checks that the daemon
scales the config's workload on its cpu usage, that ``autoscaler status`` reaches /status
the documented ways (the pod's own 127.0.0.1:8081 is what ``kubectl port-forward`` gives),
and that /metrics and the probes answer on the port the Service targets while /status does
not. A port, an arg or the config path of deploy/ that drifts from the code fails it.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import yaml

from tests.shipping import nspawn, relay
from tests.shipping.pod import Cluster, PodRun, plan_pod, read_dockerfile
from tests.sim.apiserver.server import DEFAULT_USER
from tests.sim.apiserver.tls import server_tls
from tests.sim.kube import PodTiming, SimApiServer, kubectl, run_apiserver, wait_until
from tests.sim.prometheus import MetricsExporter, PrometheusProcess

REPO = Path(__file__).parents[2]
README = REPO / "README.md"
DEPLOY = REPO / "deploy"
DOCKERFILE = REPO / "Dockerfile"
ADMIN_TOKEN = "admin-token"
"""The user who applies deploy/ (the daemon uses the service account's token)."""
POD_UNIT = "autoscaler-pod"
STATUS_PORT_FORWARD = "http://127.0.0.1:8081"
"""README, "Endpoints": ``kubectl -n autoscaler port-forward deploy/autoscaler 8081``."""
SOCKETS, USER_FILES = Path("/e2e-sockets"), Path("/e2e-user")
CPU_PER_POD = 0.55
"""Cores each web pod uses: 110 % of its 500m request against the config's 60 % target, so
the 2 pods' proposal is 4 for any reading of the rate between 90 and 120 %."""
SETTLED_RATE = 0.5
"""A rate at least this high: the counters are older than the window (a young series'
rate() reads low), so the reading is within the band above."""

SKIP = nspawn.unavailable() or (None if shutil.which("kubectl") else "no kubectl on PATH")
pytestmark = pytest.mark.skipif(SKIP is not None, reason=f"LOUD: not run here: {SKIP}")


# the user's copy of deploy/ ----------------------------------------------------------------
def readme_image_lines() -> list[str]:
    """The ``newName:`` and ``newTag:`` lines of the README's "In the cluster" block."""
    section = README.read_text().split("### In the cluster", 1)[1].split("\n### ", 1)[0]
    lines = [line for line in section.splitlines()
             if re.match(r"\s*(newName|newTag):", line)]
    assert [line.split(":")[0].strip() for line in lines] == ["newName", "newTag"], \
        "README: the two image lines are gone from 'In the cluster'"
    return lines


def with_readme_image(kustomization: Path) -> str:
    """Replace the two image lines as the README says; the image they name."""
    ours = {line.split(":")[0].strip(): line.strip() for line in readme_image_lines()}
    text, replaced = kustomization.read_text(), []
    for key, line in ours.items():
        text, count = re.subn(rf"(?m)^(\s*){key}:.*$", rf"\g<1>{line}", text)
        replaced.append(count)
    assert replaced == [1, 1], f"deploy/kustomization.yaml: newName/newTag found {replaced}"
    kustomization.write_text(text)
    values = {key: yaml.safe_load(line)[key] for key, line in ours.items()}
    return f"{values['newName']}:{values['newTag']}"


def with_users_config(configmap: Path, prometheus_url: str) -> None:
    """The user's edits of the config: their Prometheus; and, so the test takes seconds, a
    5 s cpu window (the cpu readiness rule ignores a sample younger than a whole window
    after the pod became Ready: 60 s by default)."""
    document = yaml.safe_load(configmap.read_text())
    (key,) = document["data"]
    config = tomllib.loads(document["data"][key])
    config["prometheus"]["url"] = prometheus_url
    (target,) = config["autoscaler"]
    (metric,) = target["metrics"]
    metric["resource"]["window"] = "5s"
    document["data"][key] = tomli_w.dumps(config)
    configmap.write_text(yaml.safe_dump(document, sort_keys=False))


def users_copy(tmp_path: Path, prometheus_url: str) -> tuple[Path, str]:
    copy = shutil.copytree(DEPLOY, tmp_path / "deploy")
    image = with_readme_image(copy / "kustomization.yaml")
    with_users_config(copy / "configmap.yaml", prometheus_url)
    return copy, image


# the machine ---------------------------------------------------------------------------
def report_with_exit(name: str, command: str) -> str:
    """The report ``name``: what ``command`` printed (stderr too), then ``exit <code>``."""
    return nspawn.report(name, f"{command} 2>&1; echo \"exit $?\"")


def http_code(url: str) -> str:
    return f"curl -s -o /dev/null --max-time 5 -w '%{{http_code}}' {url}"


PROCESS = """pid=$(systemctl show -p MainPID --value {unit})
grep -E '^(Uid|Gid|Groups|CapEff|NoNewPrivs):' /proc/$pid/status
sed -n 's#^[^ ]* \\(/\\|/tmp\\) [^ ]* \\([^ ]*\\) .*#\\1: \\2#p' /proc/$pid/mounts"""
"""How the pod's process runs: its ids and capabilities, and the options of its root and
/tmp as it sees them (``/: ro,...``; the last mount of a path is the one in force)."""


def machine_script(run: PodRun, *, relays: dict[int, str], metrics_port: int,
                   probes: dict[str, tuple[str, int]]) -> str:
    """Be the kubelet: the pod's IP on an interface, the Services reachable, the container
    started as the pod says. On the host's word, be the user: status both ways, /metrics
    and the probes on the pod's IP, /status not. On stop, stop the pod as a kubelet does."""
    out, ip, path = nspawn.OUT, run.pod_ip, run.env["PATH"]
    user = f"env -i PATH={path} PYTHONDONTWRITEBYTECODE=1"
    pairs = " ".join(f"{port}={SOCKETS}/{name}" for port, name in relays.items())
    status_port = STATUS_PORT_FORWARD.rpartition(":")[2]
    checks = [
        report_with_exit("status-config",
                         f"{user} autoscaler status --config {USER_FILES}/autoscaler.toml -o json"),
        report_with_exit("status-url",
                         f"{user} autoscaler status --url {STATUS_PORT_FORWARD} -o json"),
        report_with_exit("metrics", f"curl -sS --max-time 5 http://{ip}:{metrics_port}/metrics"),
        nspawn.report("probes", "; ".join(
            f"echo {kind} $({http_code(f'http://{ip}:{port}{probe}')})"
            for kind, (probe, port) in probes.items())),
        nspawn.report("process", PROCESS.format(unit=POD_UNIT)),
        nspawn.report("status-off-pod-network", "; ".join([
            f"echo status-port $({http_code(f'http://{ip}:{status_port}/status')})",
            f"echo metrics-port $({http_code(f'http://{ip}:{metrics_port}/status')})"])),
    ]
    return "\n".join([
        # The interpreter of this checkout may live under /root (pyenv): let the pod's user
        # through, in the machine's own /root only.
        "chmod o+x /root",
        # The pod's IP, on the machine's only interface (no dummy or veth module needed):
        # what the daemon binds on 0.0.0.0 answers there, what it binds on 127.0.0.1 does not.
        f"ip link set lo up && ip addr add {ip}/32 dev lo",
        f"cd {REPO} && PYTHONDONTWRITEBYTECODE=1 {sys.executable} -m tests.shipping.relay "
        f"--ready {out}/relays {pairs} &",
        f"for _ in $(seq 100); do [ -e {out}/relays ] && break; sleep 0.1; done 2>/dev/null",
        f"cd / && {run.start_command(POD_UNIT, log=f'{out}/journal')}",
        nspawn.report("started", f"systemctl is-active {POD_UNIT}"),
        # Until the host's word, or the pod's process ends (the trace of the loop is dropped).
        f"for _ in $(seq 600); do [ -e {out}/check ] || [ -e {out}/stop ] || "
        f"! systemctl is-active -q {POD_UNIT} && break; sleep 0.1; done 2>/dev/null",
        f"systemctl is-active -q {POD_UNIT} || {{ systemctl status --no-pager -l {POD_UNIT}; "
        + nspawn.report("exited", f"systemctl show -p Result -p ExecMainStatus {POD_UNIT}")
        + "; }",
        *checks,
        nspawn.WAIT_FOR_STOP,
        f"systemctl stop {POD_UNIT}",
        nspawn.report("stopped", f"systemctl show -p Result -p ExecMainStatus {POD_UNIT}"),
    ])


# the test --------------------------------------------------------------------------------
def applied(api: SimApiServer, rendered: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one object of ``kind`` as the API server holds it after the apply."""
    (doc,) = [d for d in rendered if d["kind"] == kind]
    found = api.get(doc["apiVersion"], kind, doc["metadata"].get("namespace"),
                    doc["metadata"]["name"])
    assert found is not None, f"{kind} {doc['metadata']['name']} was not applied"
    return found


def pod_of(api: SimApiServer, deployment: dict[str, Any]) -> dict[str, Any]:
    labels = deployment["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    pods = api.pods(deployment["metadata"]["namespace"], selector)
    assert pods, "the applied Deployment has no pods"
    return sorted(pods, key=lambda p: p["metadata"]["name"])[0]


def probe_ports(run: PodRun, container: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {kind: (container[kind]["httpGet"]["path"], run.port(container[kind]["httpGet"][
        "port"])) for kind in ("livenessProbe", "readinessProbe", "startupProbe")
        if kind in container}


def exit_and_body(text: str) -> tuple[int, str]:
    body, _, last = text.rstrip("\n").rpartition("\n")
    assert last.startswith("exit "), text
    return int(last.split()[1]), body


async def until(check: Callable[[], bool], *, what: str, machine: nspawn.Machine,
                timeout: float) -> None:
    """Poll ``check``; fail with the machine's diagnostics at the timeout, or at once if the
    pod's process ended."""
    deadline = time.monotonic() + timeout
    while not check():
        if (machine.out / "exited").exists():
            raise AssertionError(f"the pod's process ended before {what}\n"
                                 + machine.diagnostics())
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s\n{machine.diagnostics()}")
        await asyncio.sleep(0.1)


def exported_cpu(exporter: MetricsExporter, api: SimApiServer) -> None:
    """The web pods' cpu counters, as cAdvisor exports them through the kubelet."""
    for pod in api.pods("shop", "app=web"):
        exporter.set_counter("container_cpu_usage_seconds_total", {
            "namespace": "shop", "pod": pod["metadata"]["name"], "container": "app",
            "image": "registry.example/app:1.0"}, per_second=CPU_PER_POD)


@dataclass(frozen=True, slots=True, kw_only=True)
class Installed:
    """What the apply left in the cluster, and how its pod runs."""

    pod: dict[str, Any]
    run: PodRun
    config: str
    """The rendered ConfigMap's config: the user's own copy, for ``status --config``."""
    metrics_port: int
    """The container port the Service targets."""
    probes: dict[str, tuple[str, int]]


async def install(api: SimApiServer, tmp_path: Path, prometheus_url: str) -> Installed:
    """The README's steps on a user's copy of deploy/: render, apply as an admin; then read
    back the Deployment's pod and plan it as a kubelet would."""
    copy, image = users_copy(tmp_path, prometheus_url)
    rendered_text = (await kubectl(api, "kustomize", str(copy))).check().stdout
    (tmp_path / "rendered.yaml").write_text(rendered_text)
    rendered = [d for d in yaml.safe_load_all(rendered_text) if d]
    api.add_token(ADMIN_TOKEN, user="kubernetes-admin")
    admin = api.write_kubeconfig(tmp_path / "admin.kubeconfig", token=ADMIN_TOKEN)
    applying = await kubectl(api, "apply", "--server-side", "-f",
                             str(tmp_path / "rendered.yaml"), kubeconfig=admin)
    assert applying.returncode == 0, applying.stderr
    assert applying.stdout.count(" serverside-applied\n") == len(rendered), applying.stdout
    deployment = applied(api, rendered, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == image
    await wait_until(lambda: (pod_of(api, deployment).get("status") or {}).get("podIP"))
    pod = pod_of(api, deployment)
    dockerfile = read_dockerfile(DOCKERFILE)
    (venv,) = dockerfile.copies.values()
    run = plan_pod(pod, image=dockerfile, image_root={venv: Path(sys.prefix)},
                   workdir=tmp_path / "pod", cluster=Cluster(
                       config_map=lambda ns, name: api.get("v1", "ConfigMap", ns, name),
                       token=api.token, ca=server_tls().ca_pem(), service_host="127.0.0.1",
                       service_port=api.port))
    (service_port,) = applied(api, rendered, "Service")["spec"]["ports"]
    (config,) = applied(api, rendered, "ConfigMap")["data"].values()
    return Installed(pod=pod, run=run, config=config,
                     metrics_port=run.port(service_port["targetPort"]),
                     probes=probe_ports(run, container))


async def run_pod(api: SimApiServer, prometheus: PrometheusProcess, installed: Installed,
                  tmp_path: Path) -> dict[str, str]:
    """Boot the machine, start the pod; once it scaled shop/web, the user's reports."""
    prometheus_port = int(prometheus.url.rpartition(":")[2])
    sockets, user_files, machine_dir = (tmp_path / name for name in ("sockets", "user",
                                                                      "machine"))
    for directory in (sockets, user_files, machine_dir):
        directory.mkdir()
    (user_files / "autoscaler.toml").write_text(installed.config)
    script = machine_script(installed.run, relays={api.port: "api.sock",
                                                   prometheus_port: "prom.sock"},
                            metrics_port=installed.metrics_port, probes=installed.probes)
    options = ["--private-network", f"--bind={sockets}:{SOCKETS}",
               f"--bind-ro={user_files}:{USER_FILES}", *installed.run.nspawn_options()]
    async with relay.forwarding(sockets / "api.sock", api.port), \
            relay.forwarding(sockets / "prom.sock", prometheus_port), \
            nspawn.booted(script, workdir=machine_dir, options=options, read_only=[
                str(REPO), sys.prefix, sys.base_prefix]) as machine:
        assert (await machine.wait_for("started", timeout=60)).strip() == "active", \
            machine.diagnostics()
        await until(lambda: (api.get("apps/v1", "Deployment", "shop", "web") or {})[
            "spec"]["replicas"] == 4, what="scale of shop/web to 4", machine=machine,
            timeout=60)
        (machine.out / "check").touch()
        reports = {name: await machine.wait_for(name, timeout=60) for name in (
            "status-config", "status-url", "metrics", "probes", "process",
            "status-off-pod-network")}
    return {**reports, "stopped": (machine.out / "stopped").read_text(),
            "journal": (machine.out / "journal").read_text()}


def assert_status_answers(reports: dict[str, str], pod: dict[str, Any]) -> None:
    """Both ways of the README reach the one daemon, which knows the pod it runs as."""
    for name in ("status-config", "status-url"):
        code, body = exit_and_body(reports[name])
        assert code == 0, f"{name}: {body}"
        status = json.loads(body)
        assert status["targets"]["shop/Deployment/web"]["desiredReplicas"] == 4, body
        # The pod's name (its hostname) and namespace reached the daemon.
        assert status["identity"].startswith(pod["metadata"]["name"] + "_"), body
        namespace = pod["metadata"]["namespace"]
        assert status["history"]["store"] == f"ConfigMap {namespace}/autoscaler-state", body


def assert_pod_network(reports: dict[str, str], metrics_port: int) -> None:
    """/metrics and the probes on the pod's IP, at the Service's target port; not /status."""
    code, metrics = exit_and_body(reports["metrics"])
    assert code == 0, (f"no /metrics on the pod's IP at the port the Service targets, "
                       f"{metrics_port} (curl exit {code}); the daemon logged:\n"
                       + reports["journal"])
    assert 'autoscaler_desired_replicas{namespace="shop",kind="Deployment",name="web"} 4' \
        in metrics
    assert {line.split()[0]: line.split()[1] for line in reports["probes"].splitlines()} == {
        "livenessProbe": "200", "readinessProbe": "200", "startupProbe": "200"}
    assert reports["status-off-pod-network"].split() == [
        "status-port", "000", "metrics-port", "404"], "/status answered on the pod's IP"


def assert_runs_as_its_security_context(reports: dict[str, str], pod: dict[str, Any]) -> None:
    """Its user, group and fsGroup, no capabilities, no new privileges, a read-only root
    with /tmp writable; and it stopped cleanly on the kubelet's SIGTERM."""
    context = pod["spec"]["securityContext"]
    user, group = str(context["runAsUser"]), str(context["runAsGroup"])
    process = dict(line.split(":", 1) for line in reports["process"].splitlines())  # last wins
    assert (process["Uid"].split(), process["Gid"].split()) == ([user] * 4, [group] * 4)
    assert str(context["fsGroup"]) in process["Groups"].split(), process
    assert (int(process["CapEff"], 16), process["NoNewPrivs"].strip()) == (0, "1"), process
    assert process["/"].split(",")[0].strip() == "ro", process
    assert process["/tmp"].split(",")[0].strip() == "rw", process
    assert "Result=success" in reports["stopped"], reports["stopped"]  # SIGTERM: a clean stop


@pytest.mark.timeout(150)
async def test_in_cluster_install_runs_as_written(
    prometheus_with_exporter: tuple[MetricsExporter, PrometheusProcess], tmp_path: Path,
) -> None:
    """Rendered, applied with server-side apply and started as its pod says, the daemon
    scales the config's workload; status answers the documented ways; /metrics and the
    probes answer on the Service's port, /status only on the pod's loopback."""
    exporter, prometheus = prometheus_with_exporter
    timing = PodTiming(start_delay=0.1, ready_delay=0.2, termination_delay=0.1)
    async with run_apiserver(timing=timing) as api:
        api.create_deployment("shop", "web", replicas=2, labels={"app": "web"},
                              requests={"cpu": "500m"})
        exported_cpu(exporter, api)
        installed = await install(api, tmp_path, prometheus.url)
        await asyncio.to_thread(
            prometheus.wait_for, 'rate(container_cpu_usage_seconds_total{namespace="shop"}[5s])',
            lambda result: len(result) == 2 and all(
                float(r["value"][1]) >= SETTLED_RATE for r in result))
        reports = await run_pod(api, prometheus, installed, tmp_path)
    writers = {r.user for r in api.requests(verb="update", resource="deployments/scale")}
    assert writers == {DEFAULT_USER}, writers  # the service account's token, not the admin's
    assert_status_answers(reports, installed.pod)
    assert_pod_network(reports, installed.metrics_port)
    assert_runs_as_its_security_context(reports, installed.pod)
