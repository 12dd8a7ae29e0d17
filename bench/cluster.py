"""The simulated API server for the benchmark, in its own process, holding N stable targets.

Run by ``bench/daemon_scale.py`` (not by hand)::

    python bench/cluster.py --targets 1000 --pods 5 --namespaces 50

It starts ``tests.sim.kube.run_apiserver`` with a ``ManualClock`` (nothing moves unless told)
and seeds N Deployments of P pods with ``create_deployments`` (one bulk settle: 10,000 x 5 take
about 20 s). The simulator's controllers make the ReplicaSets and Ready pods; as the daemon
runs dry and the clock stands still, nothing changes afterwards: a steady state.

It prints one JSON line ``{"url", "kubeconfig", "control", "pods", "seconds"}`` once ready
(``pods``: every pod as ``[namespace, name]``), and
serves its request log on ``control`` (loopback HTTP): ``GET /counts`` gives the requests
since the last ``POST /reset`` grouped by verb and resource, and ``GET /unwatched`` each
resource and namespace LISTed since then on which no watch has begun yet. It exits when stdin
closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sim.kube import ManualClock, SimApiServer, run_apiserver


def namespace_of(index: int, namespaces: int) -> str:
    return f"bench-{index % namespaces:03d}"


def target_name(index: int) -> str:
    return f"app-{index:05d}"


def populate(api: SimApiServer, *, targets: int, pods: int, namespaces: int) -> list[list[str]]:
    """Seeds the targets; returns every pod as ``[namespace, name]``."""
    api.create_deployments(
        [(namespace_of(i, namespaces), target_name(i)) for i in range(targets)],
        replicas=pods, requests={"cpu": "200m", "memory": "128Mi"}, ready_delay=0)
    names = [[p["metadata"]["namespace"], p["metadata"]["name"]]
             for p in api.store.list(("", "pods"), None)]
    if len(names) != targets * pods:
        raise RuntimeError(f"seeded {len(names)} pods, wanted {targets * pods}")
    return names


def counts(api: SimApiServer) -> dict[str, int]:
    tally = Counter(f"{r.verb} {r.resource}" for r in api.requests())
    return dict(sorted(tally.items()))


def unwatched(api: SimApiServer) -> list[str]:
    """Each resource and namespace LISTed (successfully) with no watch begun on it yet: a
    cache still between its LIST and its watch."""
    listed = {(r.resource, r.namespace) for r in api.requests(verb="list") if r.status < 300}
    watched = {(r.resource, r.namespace) for r in api.requests(verb="watch")}
    return sorted(f"{resource} in {namespace or 'all namespaces'}"
                  for resource, namespace in listed - watched)


async def control_server(api: SimApiServer) -> tuple[web.AppRunner, str]:
    async def get_counts(_: web.Request) -> web.Response:
        return web.json_response(counts(api))

    async def get_unwatched(_: web.Request) -> web.Response:
        return web.json_response(unwatched(api))

    async def reset(_: web.Request) -> web.Response:
        api.log.clear()
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/counts", get_counts)
    app.router.add_get("/unwatched", get_unwatched)
    app.router.add_post("/reset", reset)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    async with run_apiserver(clock=ManualClock()) as api:
        pods = populate(api, targets=args.targets, pods=args.pods, namespaces=args.namespaces)
        api.log.clear()
        runner, control = await control_server(api)
        try:
            print(json.dumps({"url": api.url, "kubeconfig": str(api.kubeconfig),
                              "control": control, "pods": pods,
                              "seconds": time.monotonic() - started}), flush=True)
            # Until the benchmark closes our stdin (or dies): then shut down cleanly.
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        finally:
            await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, required=True)
    parser.add_argument("--pods", type=int, default=5)
    parser.add_argument("--namespaces", type=int, default=50)
    asyncio.run(main(parser.parse_args()))
