"""Dynamic sharding at scale: R replicas as separate processes, each one's cost its share.

    .venv/bin/python bench/ring_scale.py [--targets 50000] [--replicas 5] [--json FILE]
    .venv/bin/python bench/ring_scale.py --smoke      # 3 replicas, 300 targets; CI

R daemons (``[daemon.sharding] mode = "dynamic"``, the ring's default timings, ``[kubernetes]
watchScope = "cluster"``, one config with every target, as a ring is deployed) run as separate
processes against the simulated API server (``bench/cluster.py``, its own process: T
Deployments of 5 Ready pods, 100 targets a namespace) and Debian's Prometheus scraping
``bench/exporter.py`` (every target at its target: passes decide and never scale). Each target
has one metric, Resource cpu Utilization: the built-in query, which a replica asks for the
namespaces it holds only. (``--shared-query`` adds daemon_scale.py's second metric, a Pods
query every target shares verbatim: its answer is the whole fleet's, to every replica.)

Once the ring holds every target, a window of ``--passes`` passes is measured per replica
from outside it: peak RSS (``VmHWM``) and RSS (``VmRSS``) from ``/proc/PID/status``, CPU from
``/proc/PID/stat`` (utime + stime) over the window, and from its ``/metrics`` the passes
(``autoscaler_pass_duration_seconds_count``), the PromQL queries
(``autoscaler_prometheus_query_duration_seconds_count``), the targets it holds (a member has
per-target series only for the targets it holds and has passed over) and each one's
``autoscaler_reconciles_total{outcome="ok"}``: every target was decided every pass when each
one's count grew by the number of passes. The window starts and ends at a scrape with no pass
in flight (every held target's last reconcile within a third of a period of the others).

Then a replica joins (a new process) and, once the ring has settled again, one leaves
(SIGTERM to the replica holding the most buckets). For each: how many targets changed owner
(from the per-target series before and after), the seconds from the start (or the signal) to
the last "first pass over a gained bucket done" of a moved bucket, and per moved bucket the
seconds without an acting owner (the giver's "handed a bucket of targets over" to the
receiver's first pass over it). A joining replica first syncs its caches (today every
replica caches the whole fleet's pods and workloads), so that time is printed apart.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.config.files import MAX_CONFIG_BYTES  # noqa: E402
from bench.cluster import namespace_of, target_name  # noqa: E402
from bench.daemon_scale import cluster, config_text, wait_for_data  # noqa: E402
from bench.exporter import SyntheticExporter  # noqa: E402
from tests.e2e.harness import DaemonProcess  # noqa: E402
from tests.e2e.test_ring import RING  # noqa: E402
from tests.procfs import memory_kib  # noqa: E402
from tests.sim.prometheus import free_port, start_prometheus  # noqa: E402

PODS = 5
TARGETS_PER_NAMESPACE = 100
PERIOD = 15.0
TICKS = os.sysconf("SC_CLK_TCK")
SMOKE = {"targets": 300, "replicas": 3, "namespaces": 30, "passes": 2, "period": 5.0}


# --- one replica, seen from outside ------------------------------------------------------------

@dataclass
class Scrape:
    """What a replica's ``/metrics`` says, reduced to what this bench reads."""

    passes: int = 0
    queries: int = 0
    ring_targets: int = 0
    unowned_buckets: int = 0
    buckets: dict[str, int] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    """Per held target key: its last reconcile (wall clock)."""
    ok: dict[str, int] = field(default_factory=dict)
    """Per held target key: its passes that ended "ok"."""

    at: float = 0.0
    """When it was asked for (wall clock)."""

    def quiet(self, period: float) -> bool:
        """No pass in flight: every held target was last decided in the same pass, and that
        a second before the scrape (the pass counter is rendered before the per-target
        series: a pass ending during the scrape would show in the one, not the other)."""
        if not self.last:
            return False
        latest = max(self.last.values())
        return latest - min(self.last.values()) < period / 3 and self.at - latest > 1.0


def _labels(text: str) -> dict[str, str]:
    labels = {}
    for part in text.split('",'):
        name, _, value = part.partition('="')
        labels[name.strip(",")] = value.rstrip('"')
    return labels


def parse_metrics(text: str) -> Scrape:
    scrape = Scrape()
    for line in text.splitlines():
        if not line.startswith("autoscaler_"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        labels = _labels(rest.rstrip("}")) if rest else {}
        number = float(value)
        if name == "autoscaler_pass_duration_seconds_count":
            scrape.passes += int(number)
        elif name == "autoscaler_prometheus_query_duration_seconds_count":
            scrape.queries += int(number)
        elif name == "autoscaler_ring_targets":
            scrape.ring_targets = int(number)
        elif name == "autoscaler_ring_unowned_buckets":
            scrape.unowned_buckets = int(number)
        elif name == "autoscaler_ring_buckets":
            scrape.buckets[labels["state"]] = int(number)
        elif name == "autoscaler_last_reconcile_timestamp_seconds":
            scrape.last[_key(labels)] = number
        elif name == "autoscaler_reconciles_total" and labels.get("outcome") == "ok":
            scrape.ok[_key(labels)] = int(number)
    return scrape


def _key(labels: dict[str, str]) -> str:
    return f"{labels['namespace']}/{labels['kind']}/{labels['name']}"


def proc_memory(pid: int) -> dict[str, float]:
    """``VmHWM`` and ``VmRSS`` in MB."""
    return {field: memory_kib(pid, field) / 1024 for field in ("VmHWM", "VmRSS")}


def proc_cpu(pid: int) -> float:
    """utime + stime in seconds (``/proc/PID/stat``, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Replica:
    def __init__(self, name: str, config: Path, workdir: Path) -> None:
        self.name = name
        self.port = free_port()
        path = workdir / f"{name}.toml"
        path.write_text(config.read_text().replace("__PORT__", str(self.port)))
        self.process = DaemonProcess(path, port=self.port, log=workdir / f"{name}.log")
        self.started = time.time()
        self.process.start()
        self._read = 0

    @property
    def pid(self) -> int:
        assert self.process.process is not None
        return self.process.process.pid

    def alive(self) -> bool:
        return self.process.process is not None and self.process.process.poll() is None

    def scrape(self) -> Scrape:
        at = time.time()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=30) as answer:
                scrape = parse_metrics(answer.read().decode())
        except OSError:
            return Scrape()
        scrape.at = at
        return scrape

    def standby_pending(self) -> int:
        """Namespaces its standby still has to cache (or waits to, until the ring settles):
        a window that starts before they are cached measures their relist too."""
        ring = (self.process.status() or {}).get("ring") or {}
        return int(ring.get("standbyPendingNamespaces") or 0)

    def log_lines(self) -> list[dict[str, Any]]:
        """The log lines written since the last call."""
        with self.process.log_path.open("rb") as handle:
            handle.seek(self._read)
            data = handle.read()
        complete = data.rfind(b"\n") + 1
        self._read += complete
        lines = []
        for raw in data[:complete].splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                lines.append(json.loads(raw))
        return lines


def wait(check: Callable[[], bool], timeout: float, what: str, interval: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:g}s")


def _at(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(line["timestamp"])).timestamp()


# --- the ring as a whole -----------------------------------------------------------------------

class Ring:
    def __init__(self, config: Path, workdir: Path, keys: set[str], period: float) -> None:
        self.config, self.workdir, self.keys, self.period = config, workdir, keys, period
        self.replicas: list[Replica] = []
        self.stopped: list[Replica] = []
        """Replicas this bench stopped on purpose."""
        self.events: list[tuple[str, dict[str, Any]]] = []
        """Every replica's move log lines so far: (replica, line)."""
        self.poll = max(1.0, len(keys) / 10_000)  # a scrape of 10,000 targets costs ~0.1 s

    def add(self) -> Replica:
        replica = Replica(f"r{len(self.replicas)}", self.config, self.workdir)
        self.replicas.append(replica)
        return replica

    def live(self) -> list[Replica]:
        return [r for r in self.replicas if r.alive()]

    def check_alive(self) -> None:
        """A replica that exited unasked fails the run, with its log's last lines."""
        for replica in self.replicas:
            if not replica.alive() and replica not in self.stopped:
                tail = replica.process.log_path.read_text(errors="replace").splitlines()[-20:]
                raise RuntimeError(f"{replica.name} exited; its log ends:\n" + "\n".join(tail))

    def read_logs(self) -> None:
        for replica in self.replicas:
            for line in replica.log_lines():
                if "bucket" in line:
                    self.events.append((replica.name, line))

    def owners(self) -> dict[str, str] | None:
        """Target key -> the replica acting for it, if every target has exactly one and no
        bucket is being claimed or handed over; else None."""
        owners: dict[str, str] = {}
        for replica in self.live():
            scrape = replica.scrape()
            busy = scrape.buckets.get("claiming", 0) + scrape.buckets.get("releasing", 0)
            if busy or scrape.unowned_buckets or not scrape.last:
                return None
            for key in scrape.last:
                if key in owners:
                    return None
                owners[key] = replica.name
        return owners if set(owners) == self.keys else None

    def settle(self, timeout: float) -> dict[str, str]:
        """Wait until every target has one acting owner, unchanged for 8 polls and 10 s
        (hand-overs come a few at a time, once the planner's wish is stable; on a loaded
        machine batches come more than 10 s apart), and every member's standby is cached."""
        stable_for = max(10.0, 8 * self.poll)
        found: list[dict[str, str]] = []
        since = [0.0]
        said = [time.monotonic()]

        def stable() -> bool:
            self.read_logs()
            self.check_alive()
            owners = self.owners()
            if time.monotonic() - said[0] > 60:
                said[0] = time.monotonic()
                held = {r.name: r.scrape().ring_targets for r in self.live()}
                print(f"  {time.strftime('%H:%M:%S')} waiting; acting for: {held}", flush=True)
            if owners is not None and any(r.standby_pending() for r in self.live()):
                owners = None  # a standby still to be cached relists: not settled yet
            if owners is None or not found or owners != found[-1]:
                found[:] = [owners] if owners is not None else []
                since[0] = time.monotonic()
                return False
            return time.monotonic() - since[0] >= stable_for

        wait(stable, timeout, "every target with one owner, stable", self.poll)
        return found[-1]

    def quiet_scrape(self, replica: Replica, *, end: bool) -> tuple[Scrape, float, bool]:
        """A scrape with no pass in flight if one comes within 4 periods (else the last one,
        and False), and the replica's CPU seconds read right after it (at a window's start)
        or right before (at its end), so no scrape counts."""
        deadline = time.monotonic() + 4 * self.period
        while True:
            cpu = proc_cpu(replica.pid)
            scrape = replica.scrape()
            if not end:
                cpu = proc_cpu(replica.pid)
            if scrape.quiet(self.period):
                return scrape, cpu, True
            if time.monotonic() > deadline:
                print(f"  {replica.name}: no scrape between passes in {4 * self.period:g}s "
                      "(targets missed a pass, or a pass is longer than a third of the period)",
                      flush=True)
                return scrape, cpu, False
            time.sleep(1.0)


# --- what is measured --------------------------------------------------------------------------

def steady(ring: Ring, passes: int) -> list[dict[str, Any]]:
    """Per replica, over a window of at least ``passes`` passes."""
    starts = {r.name: ring.quiet_scrape(r, end=False) for r in ring.replicas}
    time.sleep(passes * ring.period)
    rows = []
    for replica in ring.replicas:
        (before, cpu_before, quiet_before) = starts[replica.name]
        memory = proc_memory(replica.pid)
        after, cpu_after, quiet = ring.quiet_scrape(replica, end=True)
        while after.passes - before.passes < passes:  # the scheduler's jitter
            time.sleep(1.0)
            after, cpu_after, quiet = ring.quiet_scrape(replica, end=True)
        done = after.passes - before.passes
        held = len(after.last)
        counts = [after.ok.get(k, 0) - before.ok.get(k, 0) for k in after.last]
        cpu = (cpu_after - cpu_before) / max(done, 1)
        rows.append({
            "replica": replica.name, "targets": held, "passes": done,
            "peak_rss_mb": round(memory["VmHWM"], 1), "rss_mb": round(memory["VmRSS"], 1),
            "cpu_s_per_pass": round(cpu, 3),
            "cpu_ms_per_target_per_pass": round(1000 * cpu / max(held, 1), 4),
            "queries_per_pass": round((after.queries - before.queries) / max(done, 1), 2),
            "decided_every_pass": (done > 0 and set(after.last) == set(before.last)
                                   and all(c == done for c in counts)),
            "decided_min_max": [min(counts, default=0), max(counts, default=0)],
            "window_between_passes": quiet_before and quiet,
        })
    return rows


def moved(before: dict[str, str], after: dict[str, str]) -> int:
    return sum(1 for key, owner in after.items() if before.get(key) != owner)


def move_figures(ring: Ring, since: float, before: dict[str, str],
                 after: dict[str, str]) -> dict[str, Any]:
    """Targets moved; from ``since`` to the last first pass over a moved bucket; and per
    bucket handed over, the gap until its receiver's first pass over it."""
    handed: dict[str, float] = {}
    first_pass: dict[str, float] = {}
    for _, line in ring.events:
        at = _at(line)
        if at < since:
            continue
        if line.get("event") == "handed a bucket of targets over":
            handed[line["bucket"]] = at
        elif line.get("event") == "first pass over a gained bucket done":
            first_pass[line["bucket"]] = at
    gaps = sorted(first_pass[b] - handed[b] for b in handed if b in first_pass)
    count = moved(before, after)
    return {
        "targets_moved": count, "share_moved": round(count / len(after), 3),
        "buckets_moved": len(first_pass),
        "seconds_to_last_first_pass": round(max(first_pass.values()) - since, 2)
        if first_pass else None,
        "handover_gap_s": {"median": round(statistics.median(gaps), 3), "max": round(gaps[-1], 3)}
        if gaps else None,
    }


def join(ring: Ring, before: dict[str, str], timeout: float) -> dict[str, Any]:
    ring.read_logs()
    since = time.time()
    newcomer = ring.add()
    after = ring.settle(timeout)
    claims = [_at(line) for name, line in ring.events
              if name == newcomer.name and line.get("event") == "holding a bucket of targets"]
    figures = move_figures(ring, since, before, after)
    figures["replica"] = newcomer.name
    figures["first_claim_s"] = round(min(claims) - since, 2) if claims else None
    figures["held_after"] = sum(1 for owner in after.values() if owner == newcomer.name)
    return {"figures": figures, "owners": after}


def leave(ring: Ring, before: dict[str, str], timeout: float) -> dict[str, Any]:
    held = {r.name: sum(1 for owner in before.values() if owner == r.name) for r in ring.live()}
    victim = next(r for r in ring.live() if r.name == max(held, key=held.__getitem__))
    ring.read_logs()
    since = time.time()
    assert victim.process.process is not None
    ring.stopped.append(victim)
    victim.process.process.send_signal(signal.SIGTERM)
    victim.process.process.wait(60)
    stopped = time.time() - since
    after = ring.settle(timeout)
    figures = move_figures(ring, since, before, after)
    figures.update(replica=victim.name, held_before=held[victim.name],
                   exit_code=victim.process.process.returncode, stop_s=round(stopped, 2))
    return {"figures": figures, "owners": after}


# --- the run -----------------------------------------------------------------------------------

def daemon_config(args: argparse.Namespace, *, targets: int, ring: bool, prometheus: str,
                  kubeconfig: str) -> str:
    """The first ``targets`` of the simulated fleet; a ring member's config if ``ring``."""
    text = config_text(targets=0, namespaces=args.namespaces, prometheus=prometheus,
                       kubeconfig=kubeconfig, concurrency=10, shared_query=args.shared_query)
    # One inline table a target, before the first table header: the daemon reads at most
    # MAX_CONFIG_BYTES of config (98 bytes a target here, 125 in [[autoscaler]] tables).
    text = "autoscaler = [\n" + "".join(
        f'{{namespace="{namespace_of(i, args.namespaces)}",scaleTargetRef={{apiVersion='
        f'"apps/v1",kind="Deployment",name="{target_name(i)}"}}}},\n' for i in range(targets)
    ) + "]\n" + text
    text = text.replace("dryRun = true\n", 'listenAddress = "127.0.0.1:__PORT__"\n')
    text = text.replace('syncPeriod = "15s"', f'syncPeriod = "{args.period:g}s"')
    text = text.replace('requestTimeout = "10s"\n', 'requestTimeout = "10s"\n'
                        'watchScope = "cluster"\n')
    ring_table = RING + f'standby = "{args.standby}"\n'
    text = text.replace("[prometheus]", ring_table + "\n[prometheus]", 1) if ring else text
    if len(text.encode()) > MAX_CONFIG_BYTES:
        raise SystemExit(f"{targets:,} targets need {len(text.encode()) / 2**20:.1f} MiB of "
                         f"config; the daemon reads at most {MAX_CONFIG_BYTES / 2**20:g} MiB")
    return text


@contextlib.contextmanager
def ring_config_file(targets: int, *, prefix: str) -> Iterator[Path]:
    """A ring member's config over the first ``targets`` of the simulated fleet, 100 a
    namespace, in a throwaway file; its servers unreachable (for benches that only load it)."""
    args = argparse.Namespace(namespaces=max(1, targets // 100), shared_query=True, period=15,
                              standby="warm")
    text = daemon_config(args, targets=targets, ring=True, prometheus="http://127.0.0.1:9",
                         kubeconfig="/nonexistent").replace("__PORT__", "9")
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        path = Path(workdir) / "autoscaler.toml"
        path.write_text(text)
        del text
        yield path


def fleet(targets: int, namespaces: int) -> set[str]:
    return {f"{namespace_of(i, namespaces)}/Deployment/{target_name(i)}" for i in range(targets)}


@contextlib.contextmanager
def servers(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """The simulated API server and Prometheus, with figures on the first."""
    started = time.monotonic()
    with cluster(args.targets, PODS, args.namespaces) as info:
        seeded = time.monotonic() - started
        sim = {"seconds_to_seed": round(seeded, 1),
               **{f"sim_{k}": v for k, v in proc_memory(info["pid"]).items()}}
        print(f"simulated API server: {args.targets:,} Deployments x {PODS} pods in "
              f"{seeded:.0f}s, RSS {sim['sim_VmRSS']:.0f} MB", flush=True)
        pods = [(ns, name) for ns, name in info.pop("pods")]
        series = ("cpu", "rps") if args.shared_query else ("cpu",)
        scrape = 5.0 if args.targets <= 10_000 else 10.0
        with SyntheticExporter(pods, series=series) as exporter, start_prometheus(
                scrape_targets=[exporter.target], scrape_interval=scrape) as prometheus:
            wait_for_data(prometheus, len(pods), timeout=120 + 4 * scrape)
            yield {**info, "prometheus": prometheus.url, "sim": sim}


def run(args: argparse.Namespace) -> dict[str, Any]:
    # Refused before minutes of seeding, not after (the paths' lengths are about these).
    daemon_config(args, targets=args.targets, ring=True, prometheus="http://127.0.0.1:40000",
                  kubeconfig="k" * 40)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ring-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with servers(args) as info:
        config = workdir / "ring.toml"
        config.write_text(daemon_config(args, targets=args.targets, ring=True,
                                        prometheus=info["prometheus"],
                                        kubeconfig=info["kubeconfig"]))
        ring = Ring(config, workdir, fleet(args.targets, args.namespaces), args.period)
        try:
            result = measure(args, ring, info)
        finally:
            for replica in ring.live():
                replica.process.stop(timeout=60)
        if args.compare:
            result["single"] = single(args, info, workdir)
        print(f"logs and configs in {workdir}", flush=True)
        return result


def single(args: argparse.Namespace, info: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """One plain daemon (no ring) over a replica's share of the targets, against the same
    servers (so it caches the same fleet), measured the same way."""
    share = args.targets // args.replicas
    config = workdir / "single.toml"
    config.write_text(daemon_config(args, targets=share, ring=False,
                                    prometheus=info["prometheus"], kubeconfig=info["kubeconfig"]))
    alone = Ring(config, workdir / "single", fleet(share, args.namespaces), args.period)
    alone.workdir.mkdir()
    started = time.monotonic()
    try:
        alone.add()
        alone.settle(args.timeout)
        settled = time.monotonic() - started
        row = steady(alone, args.passes)[0]
    finally:
        for replica in alone.live():
            replica.process.stop(timeout=60)
    row["seconds_to_first_passes"] = round(settled, 1)
    print("single process, no ring:\n" + table([row]), flush=True)
    return row


def measure(args: argparse.Namespace, ring: Ring, info: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    for _ in range(args.replicas):
        ring.add()
    owners = ring.settle(args.timeout)
    settled = time.monotonic() - started
    print(f"ring of {args.replicas} settled in {settled:.0f}s (caches synced, every target "
          "held and passed over)", flush=True)
    sim_after = {f"sim_{k}": v for k, v in proc_memory(info["pid"]).items()}
    rows = steady(ring, args.passes)
    print(table(rows), flush=True)
    joined = join(ring, owners, args.timeout)
    print("join:", json.dumps(joined["figures"]), flush=True)
    left = leave(ring, joined["owners"], args.timeout)
    print("leave:", json.dumps(left["figures"]), flush=True)
    return {
        "commit": commit(), "targets": args.targets, "replicas": args.replicas,
        "namespaces": args.namespaces,
        "pods": args.targets * PODS, "period_s": args.period, "shared_query": args.shared_query,
        "sim": {**info["sim"], **sim_after}, "seconds_to_settle": round(settled, 1),
        "steady": rows, "join": joined["figures"], "leave": left["figures"],
    }


def commit() -> str:
    found = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],  # noqa: S607
                           capture_output=True, text=True, check=False)
    return found.stdout.strip()


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| replica | targets | peak RSS (MB) | RSS (MB) | CPU s/pass | CPU ms/target/pass "
            "| queries/pass | passes | decided every pass |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    lines += [f"| {r['replica']} | {r['targets']:,} | {r['peak_rss_mb']:.0f} | "
              f"{r['rss_mb']:.0f} | {r['cpu_s_per_pass']:.2f} | "
              f"{r['cpu_ms_per_target_per_pass']:.3f} | {r['queries_per_pass']:g} | "
              f"{r['passes']} | {'yes' if r['decided_every_pass'] else 'NO'} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=50_000)
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--passes", type=int, default=4, help="passes in the measured window")
    parser.add_argument("--period", type=float, default=PERIOD, help="syncPeriod, seconds")
    parser.add_argument("--namespaces", type=int,
                        help=f"default: one per {TARGETS_PER_NAMESPACE} targets")
    parser.add_argument("--shared-query", action="store_true",
                        help="add a Pods metric whose query every target shares verbatim")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds to wait for the ring to settle")
    parser.add_argument("--no-compare", dest="compare", action="store_false",
                        help="skip the single process over one replica's share")
    parser.add_argument("--standby", choices=("warm", "none"), default="warm",
                        help="daemon.sharding.standby: cache what a member may inherit, or not")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--workdir", type=Path,
                        help="where the replicas' configs and logs go, kept after the run "
                             "(default: a new /tmp/ring-scale-* directory)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"{SMOKE['replicas']} replicas, {SMOKE['targets']} targets")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE, timeout=120)
    args.namespaces = args.namespaces or max(1, args.targets // TARGETS_PER_NAMESPACE)
    result = run(args)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
