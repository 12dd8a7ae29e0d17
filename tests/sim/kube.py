"""Start the simulated Kubernetes API server in a test, and talk to it as real clients do.

Fixture API (import what you need: ``from tests.sim.kube import apiserver, kubectl``)::

    async with run_apiserver() as api:          # or the `apiserver` pytest fixture
        api.url          # "https://127.0.0.1:<port>" (real TLS; the CA is in the kubeconfig)
        api.kubeconfig   # Path of a kubeconfig: cluster "sim", user with api.token, context
                         # "sim" (namespace default), current-context sim
        api.token        # bearer token of the default, all-allowed user

    # seed and steer state (synchronous, immediate; see SimApiServer for the full list)
    api.create_deployment("default", "web", replicas=2, labels={"app": "web"},
                          requests={"cpu": "500m"}, ready_delay=0.2)
    api.create_deployments([(ns, name), ...], replicas=5, requests={"cpu": "100m"})
    with api.bulk(): ...  # many create_* calls, the controllers settle once at the end
    api.create_workload("StatefulSet" | "ReplicaSet" | "Rollout", ns, name, replicas=...)
    api.create_hpa(ns, "web-hpa", target_name="web"); api.create_scaled_object(...)
    api.create({...any object...}); api.get("apps/v1", "Deployment", ns, name)
    api.set_replicas("Deployment", ns, "web", 5)     # drift: someone else (kubectl) scaled it
    api.pods("default", "app=web"); api.set_pod_ready(ns, pod_name, False)
    api.set_pod_phase(ns, pod_name, "Failed")        # the controller adds a replacement
    api.resize_pod(ns, pod_name, {"app": {"cpu": "4"}})   # in place, through /resize: the
    api.finish_resize(ns, pod_name)   # kubelet holds it half done (hold="InProgress",
                                      # "Deferred", "Infeasible"; None applies it at once)
    api.advance(10)   # ManualClock only (fixture `apiserver_manual`): move time, run what is due
    api.settle()      # run the simulated controllers until quiet

    # faults and protocol edge cases
    api.fail_next(2, status=503, verb="update", resource="deployments/scale")
    api.delay_next(1, seconds=5, resource="pods", verb="list")
    api.after_next(verb="get", resource="deployments/scale",   # a genuine race: the next
                   action=lambda: api.touch("apps/v1", "Deployment", ns, "web"))  # PUT is a 409
    api.delay_next(1, seconds=2, verb="update", user=u)   # held, then applied and answered
    api.fail_next(1, status=503, user=u)      # every rule takes user=: only that user's requests
    api.partition(u, mode="stall")            # cut user u off ("reset": fail fast, watches cut)
    api.heal(u)                               # stalled requests and watch events go through
    api.deny("update", "deployments/scale")   # 403 for the default token
    api.add_token("other", user="someone")    # a second identity; api.write_kubeconfig(...)
    api.revoke_token(api.token)               # 401 from now on (a rotated-away token)
    api.write_kubeconfig(path, token_file="token")  # or insecure=True (no CA, skip verify)
    api.expire_watches(gone=False)            # end open watch streams now
    api.compact()                             # old resourceVersions -> watch ERROR 410
    api.send_bookmarks()                      # BOOKMARK to watches with allowWatchBookmarks
    api.watches.bookmark_interval = 0.5       # periodic bookmarks (default 60 s)
    api.watches.default_timeout = 5           # watches without timeoutSeconds (default 1800 s)
    run_apiserver(history_limit=50)           # a short watch window: old versions expire
    api.add_custom_resource(rollout_type("argoproj.io", "v1alpha1"))  # kind appears later
    api.shard_selector_mode = "on"   # KEP-5866 shardSelector (apiserver/sharding.py): "on"
                                     # filters LIST and WATCH and echoes metadata.shardInfo;
                                     # "off", "list-only" (HA mid-rollout), "old-grammar"

    # introspection
    api.count(verb="list", resource="pods"); api.requests(verb="watch")
    record.arrived, record.applied, record.answered  # the sim clock's monotonic readings;
                                     # applied None: nothing written; answered None: never sent
    api.open_watches; api.store.resource_version
    api.bytes_sent[user]  # bytes of answers and watch events sent to a user
    api.lease_history   # every committed Lease write: applied (same clock as the log), verb,
                        # user, holder, transitions, renew_time, resourceVersion, annotations
    api.lease_at(ns, name, record.applied)   # that Lease as it stood then (None: absent)

Pods are simulated: a workload's replicas become pods (labels and container requests from the
template) that go Pending -> Running -> Ready after ``start_delay``/``ready_delay`` and vanish
``termination_delay`` after deletion. A running container reports its resources as applied
(``containerStatuses[*].resources``, ``allocatedResources``), and a pod's ``/resize``
subresource changes its containers' resources in place (apiserver/kubelet.py says how a held
resize is reported). Time is the wall clock unless ``clock=ManualClock()``
(then only ``api.advance`` moves it). The CA and server certificate are made once per test
process with openssl; startup takes a few milliseconds after that.

Deployments run through ReplicaSets as upstream; a template change rolls to a new ReplicaSet
at once (no surge steps). ReplicationControllers scale too. ServiceAccounts, Services, the
RBAC kinds, PodDisruptionBudgets and NetworkPolicies are stored without behaviour (nothing is
evicted, no traffic is policed), so ``kubectl apply`` of a deploy directory works, with
``--server-side`` too (apiserver/apply.py: an apply PATCH needs a ``fieldManager``, creates
the object if absent, else merges into it); ``dryRun=All`` validates and answers without
committing. metadata.generation exists only where
upstream keeps it (workloads, HPAs, custom resources; not pods, configmaps, leases, events).

Scale: 10,000 Deployments x 5 pods seed and settle in about half a minute (see
``tests/sim/measure_seed.py``); the controllers work from per-object queues and the store
keeps namespace, uid and owner indexes. ``api.stop()`` is bounded by ``api.stop_timeout``
(5 s): a request handler still stuck then is cancelled.

``metadata.managedFields`` are kept for the replicas a ``/scale`` shows, and only for them
(apiserver/managed.py): whoever last set the count owns ``f:spec.f:replicas``, named by the
request's ``fieldManager`` or User-Agent (``kubectl scale`` is ``kubectl``, with
``subresource: scale``); the test's own writes are ``sim``'s, or ``set_replicas(...,
manager="keda", via_scale=True)``'s.

Where it knowingly differs from a real API server: no HPA controller (HPA status stays
empty); server-side apply without field ownership beyond the replicas (no conflicts between
managers, ``force`` is ignored, a field a manager stops applying is kept rather than removed,
no apply to a subresource: 415); request bodies must be JSON, or YAML for an apply (a protobuf
body, which kubectl's typed clients send for `create configmap`, `autoscale`, `auth can-i`,
is refused with 415); fieldValidation=Strict is accepted but only the checks in objects.py
run; OpenAPI documents are minimal; a continue token pages the current state, not a snapshot.

``await wait_until(lambda: len(api.pods()) == 3)`` polls with a deadline.
``await http(api, "GET", "/api/v1/pods", token="")`` sends one raw request (status, headers,
text; ``token=""`` sends none) for protocol details a client library hides.
``kubectl(api, "get", "deployments")`` runs the real kubectl against the server (with its own
discovery cache directory) without blocking the event loop; ``api_client(api)`` yields a
kubernetes-asyncio ``ApiClient`` configured from the kubeconfig.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .apiserver import ManualClock, PodTiming, SimApiServer
from .apiserver.clock import Clock
from .apiserver.kubeconfig import write_kubeconfig
from .apiserver.tls import server_tls

__all__ = ["HttpResult", "KubectlResult", "ManualClock", "PodTiming", "SimApiServer", "api_client",
           "apiserver", "apiserver_manual", "http", "kubectl", "run_apiserver", "wait_until",
           "write_kubeconfig"]


@contextlib.asynccontextmanager
async def run_apiserver(*, clock: Clock | None = None, token: str = "sim-token",
                        timing: PodTiming | None = None,
                        history_limit: int = 10_000) -> AsyncIterator[SimApiServer]:
    """A started server with ``.kubeconfig`` written; stopped (watches closed) on exit."""
    directory = Path(tempfile.mkdtemp(prefix="sim-apiserver-"))
    server = SimApiServer(clock=clock, token=token, timing=timing, history_limit=history_limit,
                          workdir=directory)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def apiserver() -> AsyncIterator[SimApiServer]:
    """A simulated API server on a free loopback port, real wall clock."""
    async with run_apiserver() as api:
        yield api


@pytest.fixture
async def apiserver_manual() -> AsyncIterator[SimApiServer]:
    """A simulated API server whose clock only moves with ``api.advance(seconds)``."""
    async with run_apiserver(clock=ManualClock()) as api:
        yield api


@dataclass(frozen=True, slots=True)
class KubectlResult:
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> KubectlResult:
        if self.returncode != 0:
            raise AssertionError(f"kubectl failed ({self.returncode}): {self.stderr}")
        return self


async def kubectl(api: SimApiServer, *args: str, timeout: float = 30.0,
                  kubeconfig: Path | None = None) -> KubectlResult:
    """Run the real kubectl against ``api`` without blocking the server's event loop."""
    cache = api.workdir / "kubectl-cache"
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig or api.kubeconfig), "--cache-dir", str(cache),
        "--request-timeout", f"{int(timeout)}s", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return KubectlResult(process.returncode or 0, out.decode(), err.decode())


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` (state owned by the server's tasks or a subprocess) until true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"condition not reached within {timeout} s")
        await asyncio.sleep(0.01)


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


async def http(api: SimApiServer, method: str, path: str, *, body: Any = None,
               content_type: str = "application/json", accept: str = "application/json",
               token: str | None = None, headers: dict[str, str] | None = None) -> HttpResult:
    """One raw HTTPS request to the simulator (for protocol details a client library hides);
    ``headers`` are added to its own."""
    import aiohttp

    context = ssl.create_default_context(cafile=str(server_tls().ca_cert))
    headers = {"Accept": accept, "Content-Type": content_type, **(headers or {})}
    if token != "":
        headers["Authorization"] = f"Bearer {token or api.token}"
    data = None if body is None else json.dumps(body).encode()
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.request(
            method, api.url + path, data=data, headers=headers, ssl=context) as response:
        return HttpResult(response.status, dict(response.headers), await response.text())


@contextlib.asynccontextmanager
async def api_client(api: SimApiServer, *, kubeconfig: Path | None = None) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ApiClient configured from the simulator's kubeconfig."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig or api.kubeconfig),
                                  client_configuration=configuration)
    async with client.ApiClient(configuration) as session:
        yield session


MEMBER_B = "system:serviceaccount:autoscaler:member-b"


@pytest.fixture
async def other(apiserver: SimApiServer, tmp_path: Path) -> AsyncIterator[Any]:
    """A kubernetes-asyncio session for a second user, ``MEMBER_B`` (whose requests the log
    and the per-user faults tell apart from the default user's)."""
    apiserver.add_token("b-token", MEMBER_B)
    config = apiserver.write_kubeconfig(tmp_path / "b", token="b-token")
    async with api_client(apiserver, kubeconfig=config) as session:
        yield session
