"""``autoscaler import-hpa FILE... [--out FILE]``: HPA manifests in, our TOML config out.

The conversion is ``autoscaler.importers.import_hpa``'s; this module parses the arguments and
writes the result: to stdout, or atomically to ``--out`` (only over an importer's own output,
checked first). Exit codes: 0 written, 1 unreadable or unsupported input (or an output that
cannot be written), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from autoscaler.commands.conventions import FILE, CommandError, add_out

HELP = "turn HPA manifests into our TOML"
DESCRIPTION = ("Turn HorizontalPodAutoscaler manifests (kubectl get hpa -o yaml) into a TOML "
               "config, with the PromQL to write marked TODO. Each input may hold up to 10 MiB "
               "of YAML or JSON; YAML aliases are refused (kubectl never writes them).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    files = parser.add_argument("files", nargs="+", metavar="FILE",
                                help="YAML or JSON manifests ('-' reads stdin)")
    files.complete = FILE  # type: ignore[attr-defined]
    add_out(parser, default=None, what="write the TOML to this file (default: stdout)")
    parser.add_argument("-n", "--namespace", default="default", type=namespace,
                        help="namespace for HPAs whose manifest names none (default: default)")
    rules = parser.add_argument(
        "--adapter-rules", metavar="FILE",
        help="prometheus-adapter's rules (its ConfigMap, config file or Helm values): write the "
             "PromQL of the custom and external metrics they serve instead of a TODO")
    rules.complete = FILE  # type: ignore[attr-defined]


def namespace(value: str) -> str:
    """``-n``: a namespace name, as the API server checks it."""
    from autoscaler.importers.manifests import dns_label_problem

    if problem := dns_label_problem(value):
        raise argparse.ArgumentTypeError(problem)
    return value


def run(args: argparse.Namespace) -> int:
    from autoscaler.importers.adapter_rules import read_adapter_rules
    from autoscaler.importers.import_hpa import convert_files
    from autoscaler.importers.manifests import InputError

    check_out(args.out)
    try:
        rules = read_adapter_rules(args.adapter_rules) if args.adapter_rules else None
        text, notes = convert_files(args.files, default_namespace=args.namespace, rules=rules)
    except InputError as error:
        raise CommandError(str(error)) from None
    return write_output(text, notes, out=args.out)


def check_out(out: Path | None) -> None:
    """Refuse an ``--out`` that is not an importer's own output before any work."""
    from autoscaler.config.files import check_replaceable
    from autoscaler.importers.manifests import plain
    from autoscaler.importers.output import written_by_an_importer

    if out is None:
        return
    try:
        check_replaceable(out, ours=written_by_an_importer)
    except OSError as error:
        raise CommandError(f"cannot write {plain(str(out))}: "
                           f"{error.strerror or error}") from None


def write_output(text: str, notes: Sequence[str], *, out: Path | None) -> int:
    """The notes on stderr, then ``text`` to stdout or, atomically, to ``out``."""
    from autoscaler.importers.manifests import plain
    from autoscaler.importers.output import write_out, write_stdout

    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if out is None:
        return write_stdout(text)
    try:
        write_out(out, text)
    except OSError as error:
        raise CommandError(f"cannot write {plain(str(out))}: "
                           f"{error.strerror or error}") from None
    return 0
