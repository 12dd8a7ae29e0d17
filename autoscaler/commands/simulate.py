"""``autoscaler simulate``: the arguments of a simulation (``autoscaler.simulate`` runs it).

Example (no cluster, no Prometheus)::

    autoscaler simulate --config config/examples/simulate/web.toml \\
        --workload config/examples/simulate/workload.toml \\
        --trace config/examples/simulate/day.csv --out out/
"""

from __future__ import annotations

import argparse
from pathlib import Path

from autoscaler.commands.conventions import FILE, CommandError, UsageError, add_config, add_out

HELP = "run a config against a demand trace in virtual time"
DESCRIPTION = ("Run the HPA core in virtual time against a demand trace and a pod model; "
               "write the timeline, a summary and a plot. Workload settings come from "
               "--workload FILE ([simulate] table) and these flags; flags win.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config(p)
    p.add_argument("--target", metavar="KEY",
                   help="the target (namespace/Kind/name) to simulate (default: the first)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", type=Path, metavar="FILE",
                        help="CSV or JSON: time,demand[,<metric>...]").complete = FILE  # type: ignore[attr-defined]
    source.add_argument("--prometheus", metavar="URL", help="take the demand from Prometheus")
    p.add_argument("--query", action="append", default=[], metavar="[NAME=]PROMQL",
                   help="range query for the demand (or NAME=... for a metric's own total)")
    p.add_argument("--start", default="now-1d", help="range start: ISO 8601, Unix or now-1d")
    p.add_argument("--end", default="now", help="range end (default: now)")
    p.add_argument("--step", help="query step (default: the sync period)")
    p.add_argument("--workload", type=Path, metavar="FILE",
                   help="TOML file with a [simulate] table").complete = FILE  # type: ignore[attr-defined]
    p.add_argument("--capacity", type=float,
                   help="demand one pod serves at 100%% of its request (Resource metrics)")
    p.add_argument("--startup", metavar="DURATION", help="pod creation to Running (e.g. 30s)")
    p.add_argument("--readiness", metavar="DURATION", help="Running to Ready (e.g. 10s)")
    p.add_argument("--termination", metavar="DURATION", help="deletion to gone (default 0s)")
    p.add_argument("--replicas", type=int, help="replicas at the start (default: minReplicas)")
    p.add_argument("--request", action="append", default=[], metavar="RESOURCE=QUANTITY",
                   help="the pods' request, e.g. cpu=500m (default cpu=1)")
    p.add_argument("--metric-window", metavar="DURATION",
                   help="each sample averages this long (default: the metric's window, 1m)")
    p.add_argument("--saturation", type=float, metavar="PERCENT",
                   help="usage cap in %% of the request")
    p.add_argument("--interpolation", choices=("step", "linear"), help="between trace points")
    # const: simulate.command.REACTIVE (the empty path), which run() reads as "no file".
    p.add_argument("--compare", type=Path, nargs="?", const=Path(), metavar="OTHER.toml",
                   help="a second config to overlay; alone, the same config with prediction "
                   "off (a backtest of predictive against reactive)"
                   ).complete = FILE  # type: ignore[attr-defined]
    p.add_argument("--compare-target", metavar="KEY", help="the target to simulate in --compare")
    add_out(p, default=Path("simulation"), directory=True,
            what="output directory (default: simulation/)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")


def run(args: argparse.Namespace) -> int:
    """A flag that does not work is a usage error (exit 2); an input that cannot be read or
    holds no data, an invalid config or an output the system refuses is a failure (exit 1),
    as for every command."""
    from autoscaler.simulate.command import run as simulate
    from autoscaler.simulate.simulation_error import FlagError, SimulationError

    try:
        return simulate(args)
    except FlagError as error:
        raise UsageError(str(error)) from None
    except SimulationError as error:
        raise CommandError(str(error)) from None
