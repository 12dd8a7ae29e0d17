"""``autoscaler plan``: one pass against the live Prometheus and cluster that changes nothing.

Prints the ``status`` table for the targets as a pass would leave them now (``--explain``:
the ``status`` page of each, saying what the pass would do), or the same bodies as JSON or
YAML. Fails fast, in one line, when the API server or a Prometheus cannot be reached. Exit
codes: 0 every target evaluated, 1 a target could not be evaluated (an error, or an invalid
metric: the pass would hold it) or a backend cannot be reached, 2 a usage error. Warnings of
the pass stay off the output unless ``-v``.
"""

from __future__ import annotations

import argparse
import sys

from autoscaler.commands.conventions import CommandError, add_config, add_output, add_verbose

HELP = "one pass against the live cluster that changes nothing"
DESCRIPTION = ("Run one pass of the daemon against the live Prometheus and cluster, in dry-run "
               "with no events: print what each target is at, what it would be scaled to, and "
               "why. Nothing is written. Exit 1 if any target could not be evaluated.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--target", action="append", metavar="KEY",
                        help="only this target, as namespace/Kind/name (repeatable)")
    parser.add_argument("--explain", action="store_true",
                        help="print each target's page: metrics, queries, pods and each "
                             "stage of the decision")
    add_output(parser)
    add_verbose(parser, "show the pass's warnings (-vv: its info logs too)")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from autoscaler.commands.conventions import load, write_document
    from autoscaler.commands.reach import require
    from autoscaler.commands.status import closest
    from autoscaler.commands.views import now_utc, page, table
    from autoscaler.observability.logs import configure_logging
    from autoscaler.plan import document, plan, unevaluated

    config = load(args.config)
    keys = [t.key for t in config.targets]
    for wanted in args.target or ():
        if wanted not in keys:
            raise CommandError(f"no target {wanted!r} in {args.config}{closest(wanted, keys)}")
    targets = [t for t in config.targets if not args.target or t.key in args.target]
    level = "debug" if args.debug else ("error", "warning", "info")[min(args.verbose, 2)]
    configure_logging(log_format="console", level=level)

    async def one_pass() -> dict[str, object]:
        await require(config, kube=True, prometheus=True)
        return dict(await plan(config, targets=targets))

    states = asyncio.run(one_pass())
    body = document(config, states)  # type: ignore[arg-type]
    if args.output != "table":
        write_document(body, args.output)
    else:
        now = now_utc()
        if args.explain:
            print("\n\n".join(page(b, now=now, planned=True) for b in body["targets"]))
        else:
            print(table(body["targets"], now=now, colour=_colour()))
    failed = unevaluated(states)  # type: ignore[arg-type]
    if failed:
        print(f"autoscaler plan: {len(failed)} target{'s' if len(failed) != 1 else ''} could "
              f"not be evaluated: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _colour() -> bool:
    from autoscaler.terminal import colour_wanted

    return colour_wanted(sys.stdout)
