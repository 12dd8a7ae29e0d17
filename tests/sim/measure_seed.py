"""Measure how the simulated API server scales: seeding, LIST, watch fan-out, memory.

Not a test (no ``test_`` prefix): run it by hand and read the figures::

    PYTHONPATH=. .venv/bin/python tests/sim/measure_seed.py --deployments 1000
    PYTHONPATH=. .venv/bin/python tests/sim/measure_seed.py --deployments 10000 --bulk

It seeds ``--deployments`` Deployments x ``--replicas`` pods over ``--namespaces`` namespaces
and settles the controllers (every pod Running and Ready), then times a LIST of one
namespace's pods over HTTPS, a LIST of ``--big`` pods in one namespace, a LIST of every pod
in pages of 500 (as client-go's reflector pages it), and how long one pod change takes to
reach ``--watchers`` open watch streams. Peak RSS comes from getrusage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import ssl
import time

import aiohttp

from tests.sim.apiserver.tls import server_tls
from tests.sim.kube import PodTiming, SimApiServer, run_apiserver, wait_until


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _seed(api: SimApiServer, prefix: str, count: int, *, replicas: int,
          namespaces: list[str], bulk: bool) -> float:
    started = time.perf_counter()
    if bulk:
        api.create_deployments([(namespaces[i % len(namespaces)], f"{prefix}-{i}")
                                for i in range(count)], replicas=replicas,
                               requests={"cpu": "100m"})
    else:
        for i in range(count):
            api.create_deployment(namespaces[i % len(namespaces)], f"{prefix}-{i}",
                                  replicas=replicas, labels={"app": f"{prefix}-{i}"},
                                  requests={"cpu": "100m"})
    api.settle()
    return time.perf_counter() - started


def _ready_pods(api: SimApiServer) -> int:
    return sum(1 for p in api.store.scan(("", "pods"))
               if any(c["type"] == "Ready" and c["status"] == "True"
                      for c in p["status"].get("conditions") or []))


async def _timed_list(session: aiohttp.ClientSession, api: SimApiServer, namespace: str,
                      context: ssl.SSLContext) -> tuple[float, int]:
    started = time.perf_counter()
    async with session.get(f"{api.url}/api/v1/namespaces/{namespace}/pods", ssl=context,
                           headers={"Authorization": f"Bearer {api.token}"}) as response:
        body = await response.read()
    return time.perf_counter() - started, len(json.loads(body)["items"])


async def _timed_pages(session: aiohttp.ClientSession, api: SimApiServer,
                       context: ssl.SSLContext) -> tuple[float, int, int]:
    """Every pod, cluster-wide, in pages of 500: (seconds, items, pages)."""
    started, items, pages, token = time.perf_counter(), 0, 0, ""
    while True:
        query = "limit=500" + (f"&continue={token}" if token else "")
        async with session.get(f"{api.url}/api/v1/pods?{query}", ssl=context,
                               headers={"Authorization": f"Bearer {api.token}"}) as response:
            page = json.loads(await response.read())
        items, pages = items + len(page["items"]), pages + 1
        token = page["metadata"].get("continue", "")
        if not token:
            return time.perf_counter() - started, items, pages


async def _fan_out(session: aiohttp.ClientSession, api: SimApiServer, namespace: str,
                   watchers: int, context: ssl.SSLContext) -> tuple[float, float]:
    """Open ``watchers`` pod watches from now, change one pod; (commit s, all delivered s)."""
    rv = str(api.store.resource_version)
    url = f"{api.url}/api/v1/namespaces/{namespace}/pods?watch=1&resourceVersion={rv}"
    responses = [await session.get(url, ssl=context,
                                   headers={"Authorization": f"Bearer {api.token}"})
                 for _ in range(watchers)]
    await wait_until(lambda: api.open_watches >= watchers, timeout=30)
    pod = api.store.scan(("", "pods"), namespace)[0]
    started = time.perf_counter()
    api.touch("v1", "Pod", namespace, pod["metadata"]["name"])
    committed = time.perf_counter() - started
    await asyncio.gather(*(r.content.readline() for r in responses))
    delivered = time.perf_counter() - started
    for r in responses:
        r.close()
    return committed, delivered


async def main(args: argparse.Namespace) -> None:
    namespaces = [f"ns{i}" for i in range(args.namespaces)]
    async with run_apiserver(timing=PodTiming()) as api:
        seconds = _seed(api, "app", args.deployments, replicas=args.replicas,
                        namespaces=namespaces, bulk=args.bulk)
        pods = api.store.count(("", "pods"))
        print(f"seed+settle {args.deployments} Deployments x {args.replicas} pods in "
              f"{args.namespaces} namespaces: {seconds:.2f} s, {pods} pods, "
              f"{_ready_pods(api)} ready, peak RSS {_rss_mb():.0f} MB", flush=True)
        big = _seed(api, "big", args.big // args.replicas, replicas=args.replicas,
                    namespaces=["big"], bulk=args.bulk)
        print(f"seed+settle {args.big} more pods in one namespace: {big:.2f} s", flush=True)
        context = ssl.create_default_context(cafile=str(server_tls().ca_cert))
        async with aiohttp.ClientSession() as session:
            for namespace in (namespaces[0], "big"):
                took, items = await _timed_list(session, api, namespace, context)
                print(f"LIST pods in {namespace}: {items} items in {took * 1000:.0f} ms")
            took, items, pages = await _timed_pages(session, api, context)
            print(f"LIST every pod in pages of 500: {items} items, {pages} pages in "
                  f"{took:.2f} s")
            committed, delivered = await _fan_out(session, api, "big", args.watchers, context)
            print(f"one pod change to {args.watchers} watches: committed in "
                  f"{committed * 1000:.1f} ms, delivered to all in {delivered * 1000:.1f} ms")
        print(f"peak RSS {_rss_mb():.0f} MB")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--namespaces", type=int, default=50)
    parser.add_argument("--big", type=int, default=5000, help="pods in one extra namespace")
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--bulk", action="store_true", help="seed with create_deployments")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_arguments()))
