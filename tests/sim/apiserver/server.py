"""``SimApiServer``: the simulated Kubernetes API server, its lifecycle and its test controls.

It serves the real REST protocol over HTTPS on 127.0.0.1 (see routes.py, watches.py) from an
in-memory store (store.py) with simulated controllers and kubelet (workloads.py). Tests reach
into it directly to seed state (``create_deployment``), steer pods (``set_pod_ready``), inject
faults (``fail_next``, ``delay_next``, ``hold_next``, ``deny``, each optionally for one
``user``), cut a user off (``partition``, ``heal``), expire watches (``expire_watches``,
``compact``) and count what clients asked (``count``). Start it with
``tests.sim.kube.run_apiserver`` or the ``apiserver`` fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from . import managed
from .access import (
    AfterRule,
    FaultRule,
    Partition,
    PartitionMode,
    Principal,
    RequestLog,
    RequestRecord,
)
from .clock import Clock, ManualClock, SystemClock
from .errors import ApiError, expired
from .kubeconfig import write_kubeconfig
from .kubelet import PodTiming
from .leases import LeaseHistory, LeaseWrite
from .patch import STRATEGIC
from .resources import Registry, ResourceType, builtin_types, rollout_type, scaledobject_type
from .rest import Rest
from .routes import Router
from .selectors import parse_label_selector
from .sharding import ShardMode
from .store import Store
from .tls import server_tls
from .watches import Watches
from .wire import EncodedItems
from .workloads import Workloads

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

DEFAULT_USER = "system:serviceaccount:autoscaler:autoscaler"
_WORKLOAD_KINDS = {"Deployment": ("apps/v1", "deployments"),
                   "StatefulSet": ("apps/v1", "statefulsets"),
                   "ReplicaSet": ("apps/v1", "replicasets")}


class SimApiServer:
    def __init__(self, *, clock: Clock | None = None, token: str = "sim-token",
                 history_limit: int = 10_000, timing: PodTiming | None = None,
                 workdir: Path | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.registry = Registry([*builtin_types(), rollout_type(), scaledobject_type()])
        self.store = Store(history_limit=history_limit)
        self.rest = Rest(self.registry, self.store, self.clock)
        self.encoded = EncodedItems(self.store)
        self.log = RequestLog()
        self.bytes_sent: Counter[str] = Counter()
        """Bytes of answer bodies and watch events sent to each user: what a client's
        filtering costs on the wire (a KEP-5866 selector honoured or not)."""
        self._leases = LeaseHistory(self.clock)
        self.store.listeners.append(self._leases)
        self.faults: list[FaultRule] = []
        self.after_rules: list[AfterRule] = []
        self.partitions: dict[str, Partition] = {}
        self.shard_selector_mode: ShardMode = "on"
        """What a LIST or WATCH's KEP-5866 ``shardSelector`` gets (apiserver/sharding.py):
        on, off (gate off / old server), list-only (HA mid-rollout), old-grammar."""
        self.token = token
        self.tokens: dict[str, Principal] = {token: Principal(user=DEFAULT_USER)}
        self.watches = Watches(self)
        self.workloads = Workloads(self)
        if timing is not None:
            self.workloads.defaults = timing
        self.port = 0
        self._touches = 0
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="sim-apiserver-"))
        self.kubeconfig = self.workdir / "kubeconfig"
        self._runner: web.AppRunner | None = None
        self._controller: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._bulk = 0
        self.stop_timeout = 5.0
        for namespace in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create_namespace(namespace)

    # lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._tracked(Router(self).handle))
        # handler_cancellation: a client that hangs up ends its watch at once, as upstream.
        # Request lines and headers up to 1 MiB, as kube-apiserver's MaxHeaderBytes (a
        # shardSelector naming hundreds of namespaces is a long URL); aiohttp's default is 8 KiB.
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None,
                                     handler_cancellation=True, max_line_size=1 << 20,
                                     max_field_size=1 << 20)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port,
                           ssl_context=server_tls().server_context())
        await site.start()
        self.port = self._runner.addresses[0][1]
        write_kubeconfig(self.kubeconfig, url=self.url, token=self.token)
        self._controller = asyncio.create_task(self.workloads.run(), name="sim-controllers")

    def _tracked(self, handle: Handler) -> Handler:
        """Remember each request's task while it runs, so stop() can cancel a stuck one."""
        async def tracked(request: web.Request) -> web.StreamResponse:
            task = asyncio.current_task()
            if task is not None:
                self._handlers.add(task)
            try:
                return await handle(request)
            finally:
                if task is not None:
                    self._handlers.discard(task)
        return tracked

    async def stop(self) -> None:
        """End every watch, stop the controllers and the listener; a controller crash (a bug
        in the simulator) is raised here so the test that hit it fails loudly. Bounded by
        ``stop_timeout``: handlers still running then (a stuck one) are cancelled. Calling it
        again does nothing."""
        self.store.end_watches()
        for rule in self.faults:
            rule.release()  # a held request is answered, not left to the cancellation
        for partition in self.partitions.values():
            partition.heal()
        crash: BaseException | None = None
        controller, self._controller = self._controller, None
        if controller is not None:
            if controller.done() and not controller.cancelled():
                crash = controller.exception()
            controller.cancel()
            await asyncio.wait({controller}, timeout=self.stop_timeout)
        runner, self._runner = self._runner, None
        if runner is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runner.cleanup(), self.stop_timeout)
        await self._cancel_handlers()
        if crash is not None:
            raise RuntimeError("the simulated controllers crashed") from crash

    async def _cancel_handlers(self) -> None:
        stuck = [task for task in self._handlers if not task.done()]
        for task in stuck:
            task.cancel()
        if stuck:
            await asyncio.wait(stuck, timeout=self.stop_timeout)

    def count_sent(self, user: str | None, response: web.Response) -> web.Response:
        """Add an answer's body to ``bytes_sent`` of ``user`` (known once authenticated)."""
        if user is not None and isinstance(response.body, bytes):
            self.bytes_sent[user] += len(response.body)
        return response

    def authenticate(self, header: str) -> Principal | None:
        scheme, _, token = header.partition(" ")
        return self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None

    # auth and faults ---------------------------------------------------------------------
    def add_token(self, token: str, user: str) -> Principal:
        self.tokens[token] = Principal(user=user)
        return self.tokens[token]

    def write_kubeconfig(self, path: Path, *, token: str | None = None,
                         namespace: str = "default", token_file: str | None = None,
                         insecure: bool = False) -> Path:
        """Another kubeconfig for this server, e.g. with a second or an unknown token, a
        ``tokenFile`` instead of a token, or ``insecure-skip-tls-verify`` instead of the CA."""
        return write_kubeconfig(path, url=self.url, token=token or self.token,
                                namespace=namespace, token_file=token_file, insecure=insecure)

    def revoke_token(self, token: str) -> None:
        """The token stops authenticating: every request carrying it gets 401."""
        del self.tokens[token]

    def deny(self, verb: str, resource: str, *, namespace: str | None = None,
             token: str | None = None) -> None:
        """403 for ``verb`` on ``resource`` (``plural`` or ``plural/sub``; ``*`` matches all)."""
        self.tokens[token or self.token].denied.add((verb, resource, namespace))

    def allow_all(self, token: str | None = None) -> None:
        self.tokens[token or self.token].denied.clear()

    def fail_next(self, n: int = 1, *, status: int = 500, path_prefix: str | None = None,
                  verb: str | None = None, resource: str | None = None,
                  retry_after: int | None = None, then: Callable[[], object] | None = None,
                  hold: bool = False, user: str | None = None) -> FaultRule:
        """The next ``n`` matching requests answer ``status`` with a Status body (a 429 with
        ``Retry-After: retry_after``, 1 by default), without applying anything. ``then`` runs
        right after each failure, before it is answered: ``fail_next(verb="update",
        resource="deployments/scale", then=lambda: api.touch(...))`` is a failed write
        followed by another writer's, whose new resourceVersion the client sees next. With
        ``hold``, each waits for ``rule.release()`` first (see ``hold_next``). ``user``: only
        that user's requests match (as do other rules' ``user``)."""
        rule = FaultRule(remaining=n, status=status, path_prefix=path_prefix, verb=verb,
                         resource=resource, retry_after=retry_after, then=then,
                         held=asyncio.Event() if hold else None, user=user)
        self.faults.append(rule)
        return rule

    def hold_next(self, n: int = 1, *, path_prefix: str | None = None, verb: str | None = None,
                  resource: str | None = None, user: str | None = None) -> FaultRule:
        """The next ``n`` matching requests wait, unserved, until ``rule.release()``; then
        each is served against the objects as they are by then (``rule.arrived`` counts
        those that came). A request in flight for as long as the test needs, by design
        rather than by a delay."""
        rule = FaultRule(remaining=n, held=asyncio.Event(), path_prefix=path_prefix,
                         verb=verb, resource=resource, user=user)
        self.faults.append(rule)
        return rule

    def delay_next(self, n: int = 1, *, seconds: float, path_prefix: str | None = None,
                   verb: str | None = None, resource: str | None = None,
                   user: str | None = None) -> FaultRule:
        """The next ``n`` matching requests stall ``seconds`` before being served: each is
        applied, then answered, only then (the API server holding a request before it
        applies it; ``after_next(answer_after=...)`` is the opposite: applied at once,
        answered late)."""
        rule = FaultRule(remaining=n, delay=seconds, path_prefix=path_prefix, verb=verb,
                         resource=resource, user=user)
        self.faults.append(rule)
        return rule

    def after_next(self, n: int = 1, *, action: Callable[[], object] = lambda: None,
                   path_prefix: str | None = None, verb: str | None = None,
                   resource: str | None = None, answer_after: float = 0.0,
                   user: str | None = None) -> AfterRule:
        """Run ``action`` right after the next ``n`` matching requests succeed: a race.
        ``answer_after``: then hold each answer that long (applied at once, answered late:
        a slow network on the way back).

        ``api.after_next(verb="get", resource="deployments/scale",
        action=lambda: api.touch("apps/v1", "Deployment", "default", "web"))`` makes the
        client's next PUT of that Scale a genuine 409, whatever code path it runs.
        """
        rule = AfterRule(remaining=n, action=action, path_prefix=path_prefix, verb=verb,
                         resource=resource, answer_after=answer_after, user=user)
        self.after_rules.append(rule)
        return rule

    def partition(self, user: str, *, mode: PartitionMode = "stall") -> Partition:
        """Cut ``user`` off from the API server until ``heal(user)``: with ``stall`` each of
        its requests waits unserved (served after the heal if its client still waits) and
        its open watches deliver nothing; with ``reset`` each request fails at once as a
        reset connection (logged with status 0) and its open watches are cut now. Other
        users are served as before."""
        partition = Partition(user=user, mode=mode)
        self.heal(user)
        self.partitions[user] = partition
        if mode == "reset":
            self.watches.cut(user)
        return partition

    def heal(self, user: str) -> None:
        """End ``user``'s partition: stalled requests and watch events go through now."""
        partition = self.partitions.pop(user, None)
        if partition is not None:
            partition.heal()

    # introspection -----------------------------------------------------------------------
    def count(self, *, verb: str | None = None, resource: str | None = None,
              namespace: str | None = None, name: str | None = None,
              group: str | None = None, method: str | None = None,
              status: int | None = None) -> int:
        """How many requests matched, e.g. ``count(verb="list", resource="pods")``."""
        return self.log.count(verb=verb, resource=resource, namespace=namespace, name=name,
                              group=group, method=method, status=status)

    def requests(self, **criteria: Any) -> list[RequestRecord]:
        return self.log.select(**criteria)

    @property
    def lease_history(self) -> list[LeaseWrite]:
        """Every committed Lease write so far, in order (apiserver/leases.py)."""
        return self._leases.writes

    def lease_at(self, namespace: str, name: str, when: float) -> LeaseWrite | None:
        """A Lease as it stood at ``when`` (as ``RequestRecord.applied`` reads the clock):
        its last write by then, None if it did not exist then. For an oracle: "the PUT
        applied at x was made while B held bucket 17" is ``lease_at(ns, "...-17",
        x).holder == "B"``."""
        return self._leases.at(namespace, name, when)

    # watches -----------------------------------------------------------------------------
    def expire_watches(self, *, gone: bool = False) -> int:
        """End every open watch stream (after an ERROR 410 event if ``gone``); returns count."""
        error = expired(self.store.resource_version, self.store.resource_version) if gone \
            else None
        return self.store.end_watches(error=error)

    def compact(self) -> int:
        """Forget the history: a watch from any resourceVersion before now gets 410 Gone."""
        return self.store.compact()

    def send_bookmarks(self) -> None:
        self.store.bookmark()

    @property
    def open_watches(self) -> int:
        return len(self.store.watchers)

    # time and pods -----------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Move a ManualClock forward and run what became due."""
        if not isinstance(self.clock, ManualClock):
            raise TypeError("advance() needs a server started with a ManualClock")
        self.clock.advance(seconds)
        self.workloads.settle()

    def settle(self) -> None:
        """Run the simulated controllers until nothing more happens at the current time."""
        self.workloads.settle()

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Seed many objects: the ``create_*`` helpers inside skip their settle() and the
        controllers run once at the end. The objects are the same as without it: the
        controllers react to each queued object alike, only later."""
        self._bulk += 1
        try:
            yield
        finally:
            self._bulk -= 1
            if not self._bulk:
                self.settle()

    def set_pod_ready(self, namespace: str, name: str, ready: bool | None = True) -> None:
        """Pin a pod's Ready condition (None hands it back to the simulated readiness delay)."""
        self.workloads.force_ready(namespace, name, ready)
        self.workloads.settle()

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> None:
        """Force a pod's phase (Failed, Succeeded, Unknown); the controller replaces
        Failed/Succeeded pods, as a ReplicaSet does."""
        self.workloads.kubelet.set_phase(namespace, name, phase)
        self.workloads.settle()

    def resize_pod(self, namespace: str, name: str, requests: dict[str, dict[str, str]], *,
                   hold: str | None = "InProgress") -> dict[str, Any]:
        """Resize a pod in place, as ``kubectl patch pod --subresource resize`` does: the
        named containers' requests change in the spec at once. ``hold`` keeps the kubelet
        from applying them (``InProgress``, ``Deferred``, ``Infeasible``) until
        ``finish_resize``; ``None`` applies them at once."""
        if hold is not None:
            self.workloads.kubelet.hold_resize(namespace, name, hold)
        rt = self.resource("v1", "Pod")
        pod = self.rest.get(rt, namespace, name)
        body = {"spec": {"containers": [
            {"name": c["name"], "resources": {**(c.get("resources") or {}), "requests": {
                **((c.get("resources") or {}).get("requests") or {}), **requests[c["name"]]}}}
            for c in pod["spec"]["containers"] if c["name"] in requests]}}
        resized = self.rest.patch(rt, namespace, name, content_type=STRATEGIC, body=body,
                                  subresource="resize")
        self.workloads.settle()
        return resized

    def finish_resize(self, namespace: str, name: str) -> None:
        """Let the kubelet apply a held resize: the pod's status reports the spec's requests."""
        self.workloads.kubelet.release_resize(namespace, name)
        self.workloads.settle()

    def pods(self, namespace: str = "default", selector: str = "") -> list[dict[str, Any]]:
        matches = parse_label_selector(selector)
        return [p for p in self.store.list(("", "pods"), namespace)
                if matches(p["metadata"].get("labels") or {})]

    # objects -----------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> ResourceType:
        rt = self.registry.by_kind(api_version, kind)
        if rt is None:
            raise KeyError(f"no resource type for {api_version} {kind}")
        return rt

    def add_custom_resource(self, rt: ResourceType) -> None:
        """Serve a new custom resource type from now on (discovery included)."""
        self.registry.add(rt)

    def create(self, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create any object as a client would (defaults, validation, events)."""
        rt = self.resource(body["apiVersion"], body["kind"])
        ns = namespace or body.get("metadata", {}).get("namespace") or (
            "default" if rt.namespaced else None)
        return self.rest.create(rt, ns if rt.namespaced else None, body)

    def get(self, api_version: str, kind: str, namespace: str | None,
            name: str) -> dict[str, Any] | None:
        rt = self.resource(api_version, kind)
        try:
            return self.rest.get(rt, namespace, name)
        except ApiError:
            return None

    def patch(self, api_version: str, kind: str, namespace: str | None, name: str,
              merge: dict[str, Any]) -> dict[str, Any]:
        """A merge patch as another actor would send (a GitOps tool, a person with kubectl)."""
        rt = self.resource(api_version, kind)
        return self.rest.patch(rt, namespace, name, content_type="application/merge-patch+json",
                               body=merge)

    def delete(self, api_version: str, kind: str, namespace: str | None,
               name: str) -> None:
        """Delete an object as a client would (watchers see a DELETED event)."""
        self.rest.delete(self.resource(api_version, kind), namespace, name, {}, None)

    def touch(self, api_version: str, kind: str, namespace: str | None,
              name: str) -> dict[str, Any]:
        """Another writer changes the object (an annotation): a new resourceVersion only."""
        self._touches += 1
        return self.patch(api_version, kind, namespace, name, {"metadata": {"annotations": {
            "sim.example.com/touched": str(self._touches)}}})

    def set_replicas(self, kind: str, namespace: str, name: str, replicas: int,
                     api_version: str | None = None, *, manager: str = "kubectl",
                     via_scale: bool = False) -> dict[str, Any]:
        """Change spec.replicas behind the daemon's back (drift), as field manager
        ``manager`` (``metadata.managedFields``) would: a patch of the object, or with
        ``via_scale`` an update of its ``/scale`` (as ``kubectl scale``, KEDA and the HPA
        controller write it)."""
        api_version = api_version or _WORKLOAD_KINDS.get(kind, ("example.com/v1", ""))[0]
        rt = self.resource(api_version, kind)
        with managed.manager(manager):
            if via_scale:
                self.rest.update(rt, namespace, name, {"spec": {"replicas": replicas}}, "scale")
                return self.rest.get(rt, namespace, name)
            return self.patch(api_version, kind, namespace, name,
                              {"spec": {"replicas": replicas}})

    def create_namespace(self, name: str) -> dict[str, Any]:
        existing = self.get("v1", "Namespace", None, name)
        return existing or self.create({"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": name}})

    def create_workload(self, kind: str, namespace: str, name: str, *, replicas: int = 1,
                        labels: dict[str, str] | None = None,
                        requests: dict[str, str] | None = None,
                        limits: dict[str, str] | None = None, api_version: str | None = None,
                        timing: PodTiming | None = None,
                        extra_spec: dict[str, Any] | None = None) -> dict[str, Any]:
        """A workload whose pods carry ``labels`` and one container with ``requests``."""
        labels = labels or {"app": name}
        api_version = api_version or _WORKLOAD_KINDS.get(kind, ("example.com/v1", ""))[0]
        rt = self.resource(api_version, kind)
        self.create_namespace(namespace)
        if timing is not None:
            self.workloads.timings[(rt.plural, namespace, name)] = timing
        resources: dict[str, Any] = {}
        if requests:
            resources["requests"] = dict(requests)
        if limits:
            resources["limits"] = dict(limits)
        spec: dict[str, Any] = {
            "replicas": replicas, "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [{
                "name": "app", "image": "registry.example/app:1.0", "resources": resources}]}}}
        if kind == "StatefulSet":
            spec["serviceName"] = name
        spec.update(copy.deepcopy(extra_spec or {}))
        obj = self.create({"apiVersion": api_version, "kind": kind,
                           "metadata": {"name": name, "namespace": namespace}, "spec": spec})
        if not self._bulk:
            self.settle()
        return obj

    def create_deployment(self, namespace: str, name: str, *, replicas: int = 1,
                          labels: dict[str, str] | None = None,
                          requests: dict[str, str] | None = None,
                          ready_delay: float | None = None, start_delay: float = 0.0,
                          termination_delay: float = 0.0, **kwargs: Any) -> dict[str, Any]:
        timing = None if ready_delay is None else PodTiming(
            ready_delay=ready_delay, start_delay=start_delay, termination_delay=termination_delay)
        return self.create_workload("Deployment", namespace, name, replicas=replicas,
                                    labels=labels, requests=requests, timing=timing, **kwargs)

    def create_deployments(self, names: Iterable[tuple[str, str]], *, replicas: int = 1,
                           requests: dict[str, str] | None = None,
                           **kwargs: Any) -> list[dict[str, Any]]:
        """Many Deployments at once, each (namespace, name) as ``create_deployment`` makes it
        (labels default to ``{"app": name}``), settled once at the end."""
        with self.bulk():
            return [self.create_deployment(namespace, name, replicas=replicas,
                                           requests=requests, **kwargs)
                    for namespace, name in names]

    def create_hpa(self, namespace: str, name: str, *, target_kind: str = "Deployment",
                   target_name: str, target_api_version: str = "apps/v1",
                   min_replicas: int = 1, max_replicas: int = 10) -> dict[str, Any]:
        self.create_namespace(namespace)
        return self.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                            "metadata": {"name": name, "namespace": namespace},
                            "spec": {"scaleTargetRef": {"apiVersion": target_api_version,
                                                        "kind": target_kind, "name": target_name},
                                     "minReplicas": min_replicas, "maxReplicas": max_replicas}})

    def create_scaled_object(self, namespace: str, name: str, *, target_name: str,
                             target_kind: str = "Deployment",
                             target_api_version: str = "apps/v1") -> dict[str, Any]:
        self.create_namespace(namespace)
        return self.create({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                            "metadata": {"name": name, "namespace": namespace},
                            "spec": {"scaleTargetRef": {"apiVersion": target_api_version,
                                                        "kind": target_kind, "name": target_name},
                                     "triggers": [{"type": "cpu", "metadata": {"value": "50"}}]}})
