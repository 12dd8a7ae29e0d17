"""Failover of a ring of dynamic sharding: kill or freeze a replica, time until every bucket
it held has had a completed pass by another.

    .venv/bin/python bench/ring_failover.py [--replicas 3] [--targets-per-replica 1000]
                                            [--kills 20] [--stops 20] [--json FILE]
    .venv/bin/python bench/ring_failover.py --smoke     # 3 x 20 targets, 2 kills, 2 stops

R daemons (``[daemon.sharding] mode = "dynamic"``, the ring's default timings: lease 3 s,
renew deadline 2 s, retry 1 s) run as separate processes against the simulated API server
(``bench/cluster.py``, its own process: R x T Deployments of 5 Ready pods over 50 namespaces)
and Debian's Prometheus scraping ``bench/exporter.py`` (every target at its target: passes
decide and never scale). Each round picks the replica holding the most buckets, sends it
SIGKILL (a kill round) or SIGSTOP (a stop round), and reads the survivors' logs for "first
pass over a gained bucket done" of each of its buckets; the failover is the last of those
minus the signal's instant (both on this machine's clock). A killed replica is started again,
a stopped one gets SIGCONT (it finds itself evicted and rejoins as a new member); the next
round starts once the ring holds every target again with every replica holding some, and
strikes once no bucket has moved for three retry periods (a hand-over still under way would
make the victim's buckets, read then, not the ones it holds when struck).

Also printed: the steady state's Lease writes per second per replica (10 s, read from the
simulated server's request log), and the targets each replica holds.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.runtime.ring import Timings  # noqa: E402
from bench.daemon_scale import cluster, config_text  # noqa: E402
from bench.exporter import SyntheticExporter  # noqa: E402
from tests.e2e.harness import DaemonProcess  # noqa: E402
from tests.e2e.test_ring import RING  # noqa: E402
from tests.sim.prometheus import free_port, start_prometheus  # noqa: E402

NAMESPACES = 50
PODS = 5
RETRY_PERIOD = Timings().retry_period
PASSED, CLAIMED = "first pass over a gained bucket done", "holding a bucket of targets"


class Replica:
    def __init__(self, name: str, config: Path, workdir: Path) -> None:
        self.name, self.config, self.workdir = name, config, workdir
        self.port = free_port()
        self.generation = 0
        self.process = self._start()
        self._read = 0

    def _start(self) -> DaemonProcess:
        self.generation += 1
        text = self.config.read_text().replace("__PORT__", str(self.port))
        path = self.workdir / f"{self.name}-{self.generation}.toml"
        path.write_text(text)
        process = DaemonProcess(path, port=self.port,
                                log=self.workdir / f"{self.name}.log")
        process.start()
        return process

    def restart(self) -> None:
        self.process = self._start()

    def status(self) -> dict[str, Any]:
        return self.process.status() or {}

    def new_log_lines(self) -> list[dict[str, Any]]:
        path = self.process.log_path
        with path.open("rb") as handle:
            handle.seek(self._read)
            data = handle.read()
        complete = data.rfind(b"\n") + 1
        self._read += complete
        lines = []
        for raw in data[:complete].splitlines():
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
        return lines


def wait(check: Any, timeout: float, what: str, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:g}s")


def settled(replicas: list[Replica], total: int) -> bool:
    """Every target held by exactly one replica, every replica holding some."""
    seen: set[str] = set()
    count = 0
    for replica in replicas:
        targets = replica.status().get("targets") or {}
        if not targets:
            return False
        seen |= set(targets)
        count += len(targets)
    return count == total == len(seen)


def steady(replicas: list[Replica], total: int, *, hold: float, timeout: float,
           caches: bool = True) -> dict[str, dict[str, Any]]:
    """The replicas' statuses once the ring has held every target with no bucket claiming or
    releasing, no bucket changing hands and every member's standby cached for ``hold``
    seconds (longer than a hand-over waits for a stable preference): a victim's buckets read
    then are the ones it holds when struck, not ones it is handing over (the round then timed
    out waiting for a takeover of a bucket a survivor already held), and the survivors cache
    what they inherit. A fault 10-20 s after the last membership change, while a standby
    still waits for the ring to settle, is a second fault: its takeover waits for a relist
    (``--second-fault`` times those)."""
    deadline = time.monotonic() + timeout
    since, last = time.monotonic(), None
    while time.monotonic() < deadline:
        statuses = {r.name: r.status() for r in replicas}
        rings = {name: status.get("ring") or {} for name, status in statuses.items()}
        held = {name: tuple(ring.get("buckets") or []) for name, ring in rings.items()}
        moving = any(ring.get("claiming") or ring.get("releasing")
                     or (caches and ring.get("standbyPendingNamespaces"))
                     for ring in rings.values())
        if moving or held != last or not settled(replicas, total):
            since, last = time.monotonic(), (None if moving else held)
        elif time.monotonic() - since >= hold:
            return statuses
        time.sleep(0.25)
    raise TimeoutError(f"the ring steady for {hold:g}s: not within {timeout:g}s")


def takeover_seconds(survivors: list[Replica], buckets: set[str], struck: float,
                     timeout: float) -> tuple[float, float]:
    """Seconds from ``struck`` (wall clock) until each bucket's first pass by a survivor, and
    until the first of them was claimed (what a failover is made of: the wait for the
    eviction, then claims, history reads and the first pass)."""
    done: dict[str, float] = {}
    claimed: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and set(done) != buckets:
        for replica in survivors:
            for line in replica.new_log_lines():
                event, bucket = line.get("event"), str(line.get("bucket"))
                if bucket not in buckets or event not in (PASSED, CLAIMED):
                    continue
                at = datetime.fromisoformat(str(line["timestamp"])).timestamp()
                if at > struck:
                    (done if event == PASSED else claimed).setdefault(bucket, at)
        time.sleep(0.1)
    if set(done) != buckets:
        raise TimeoutError(f"buckets never taken over: {sorted(buckets - set(done))}")
    return max(done.values()) - struck, min(claimed.values(), default=struck) - struck


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.replicas * args.targets_per_replica
    workdir = Path(tempfile.mkdtemp(prefix="ring-failover-"))
    with cluster(total, PODS, NAMESPACES) as info:
        pods = [tuple(p) for p in info["pods"]]
        series = ("cpu", "rps", "memory", "requests") if args.shared_query else ("cpu",)
        with SyntheticExporter(pods, series=series) as exporter, start_prometheus(
                scrape_targets=[exporter.target], scrape_interval=5.0) as prometheus:
            text = config_text(targets=total, namespaces=NAMESPACES, prometheus=prometheus.url,
                               kubeconfig=info["kubeconfig"], concurrency=10,
                               shared_query=args.shared_query)
            text = text.replace("dryRun = true\n", 'listenAddress = "127.0.0.1:__PORT__"\n')
            text = text.replace(
                "[prometheus]", RING + f'standby = "{args.standby}"\n\n[prometheus]', 1)
            config = workdir / "ring.toml"
            config.write_text(text)
            replicas = [Replica(f"r{i}", config, workdir) for i in range(args.replicas)]
            try:
                return rounds(args, replicas, total, info)
            finally:
                for replica in replicas:
                    if replica.process.process is not None:
                        replica.process.process.send_signal(signal.SIGCONT)
                    replica.process.stop(timeout=30)


def rounds(args: argparse.Namespace, replicas: list[Replica], total: int,
           info: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    # Every replica caches every target's pods: a start (and a restart after a kill) syncs
    # the whole fleet, minutes at 10,000 targets per replica; each /status lists a share.
    slow = total / 1000
    poll = max(0.5, slow / 10)
    wait(lambda: settled(replicas, total), 600 + 30 * slow, "the ring holding every target",
         poll)
    settled_in = time.monotonic() - started
    print(f"ring settled in {settled_in:.1f}s", flush=True)
    # The steady state's writes: the first start's hand-overs are over.
    steady(replicas, total, hold=3 * RETRY_PERIOD, timeout=180 + 30 * slow)
    writes = lease_writes_per_second(info, seconds=10.0) / len(replicas)
    held = {r.name: len(r.status().get("targets") or {}) for r in replicas}
    results: dict[str, list[float]] = {"SIGKILL": [], "SIGSTOP": []}
    claims: dict[str, list[float]] = {"SIGKILL": [], "SIGSTOP": []}
    plan = ["SIGKILL"] * args.kills + ["SIGSTOP"] * args.stops
    for number, fault in enumerate(plan, 1):
        for replica in replicas:
            replica.new_log_lines()  # skip what came before
        statuses = steady(replicas, total, hold=3 * RETRY_PERIOD, timeout=180 + 30 * slow,
                          caches=not args.second_fault)
        victim = max(replicas, key=lambda r: len((statuses[r.name].get("ring") or {})
                                                 .get("buckets") or []))
        buckets = set((statuses[victim.name].get("ring") or {}).get("buckets") or [])
        assert victim.process.process is not None
        struck = time.time()
        victim.process.process.send_signal(getattr(signal, fault))
        survivors = [r for r in replicas if r is not victim]
        seconds, claimed = takeover_seconds(survivors, buckets, struck, timeout=60 + slow)
        results[fault].append(seconds)
        claims[fault].append(claimed)
        print(f"round {number:2d} {fault}: {victim.name} held {len(buckets)} buckets; "
              f"taken over in {seconds:.2f}s (first claim after {claimed:.2f}s)", flush=True)
        if fault == "SIGKILL":
            victim.process.process.wait(10)
            victim.restart()
        else:
            victim.process.process.send_signal(signal.SIGCONT)
        wait(lambda: settled(replicas, total), 180 + 30 * slow, "the ring settled again", poll)
    return {
        "replicas": len(replicas), "targetsPerReplica": total // len(replicas),
        "leaseWritesPerSecondPerReplica": round(writes, 2), "heldAtStart": held,
        "failover": {fault: {"runs": len(values),
                             "median": round(statistics.median(values), 3) if values else None,
                             "max": round(max(values), 3) if values else None,
                             "all": [round(v, 3) for v in values],
                             "firstClaimAfter": [round(v, 3) for v in claims[fault]]}
                     for fault, values in results.items()},
        "sharedQuery": args.shared_query, "secondsToSettle": round(settled_in, 1),
        "secondFault": args.second_fault,
    }


def lease_writes_per_second(info: dict[str, Any], *, seconds: float) -> float:
    import urllib.request

    control = info["control"]
    urllib.request.urlopen(urllib.request.Request(f"{control}/reset", method="POST"),
                           timeout=10).read()
    time.sleep(seconds)
    with urllib.request.urlopen(f"{control}/counts", timeout=10) as response:
        counts: dict[str, int] = json.load(response)
    return sum(n for key, n in counts.items()
               if key.split(" ")[0] in ("update", "create", "patch") and key.endswith("leases"))\
        / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--targets-per-replica", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--stops", type=int, default=20)
    parser.add_argument("--no-shared-query", dest="shared_query", action="store_false",
                        help="only the cpu metric: no Pods query every target shares verbatim "
                             "(the whole fleet's; each replica asks for its share of it)")
    parser.add_argument("--second-fault", action="store_true",
                        help="strike once the buckets are steady, not waiting for every "
                             "standby to be cached (a fault soon after the last one)")
    parser.add_argument("--standby", choices=("warm", "none"), default="warm",
                        help="daemon.sharding.standby: cache what a member may inherit, or not")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.targets_per_replica, args.kills, args.stops = 20, 2, 2
    result = run(args)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
