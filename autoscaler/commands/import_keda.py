"""``autoscaler import-keda FILE... [--out FILE]``: KEDA ScaledObjects in, our TOML config out.

The conversion is ``autoscaler.importers.import_keda``'s; this module parses the arguments and
writes the result as import-hpa does: to stdout, or atomically to ``--out``. Exit codes: 0
written, 1 unreadable or unsupported input (or an output that cannot be written), 2 usage
error.
"""

from __future__ import annotations

import argparse

from autoscaler.commands.conventions import FILE, CommandError, add_out
from autoscaler.commands.import_hpa import check_out, namespace, write_output

HELP = "turn KEDA ScaledObjects into our TOML"
DESCRIPTION = ("Turn KEDA ScaledObjects (kubectl get scaledobjects -o yaml, with their "
               "TriggerAuthentications if you have them) into a TOML config: prometheus, cron, "
               "cpu and memory triggers, fallback, pause, behavior and the replica counts. What "
               "cannot be carried over is listed with the reason. Each input may hold up to "
               "10 MiB of YAML or JSON; YAML aliases are refused.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    files = parser.add_argument("files", nargs="+", metavar="FILE",
                                help="YAML or JSON manifests ('-' reads stdin)")
    files.complete = FILE  # type: ignore[attr-defined]
    add_out(parser, default=None, what="write the TOML to this file (default: stdout)")
    parser.add_argument("-n", "--namespace", default="default", type=namespace,
                        help="namespace for ScaledObjects whose manifest names none "
                             "(default: default)")


def run(args: argparse.Namespace) -> int:
    from autoscaler.importers.import_keda import convert_files
    from autoscaler.importers.manifests import InputError

    check_out(args.out)
    try:
        text, notes = convert_files(args.files, default_namespace=args.namespace)
    except InputError as error:
        raise CommandError(str(error)) from None
    return write_output(text, notes, out=args.out)
