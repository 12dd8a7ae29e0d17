"""``autoscaler import-hpa FILE... [--out FILE]``: HPA manifests in, our TOML config out.

The conversion is ``autoscaler.config.importer``'s; this module parses the arguments and
writes the result: to stdout, or atomically to ``--out``. Exit codes: 0 written, 1 unreadable
or unsupported input (or an output that cannot be written), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys

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
    parser.add_argument("-n", "--namespace", default="default", type=_namespace,
                        help="namespace for HPAs whose manifest names none (default: default)")


def _namespace(value: str) -> str:
    from autoscaler.config.manifests import dns_label_problem

    if problem := dns_label_problem(value):
        raise argparse.ArgumentTypeError(problem)
    return value


def run(args: argparse.Namespace) -> int:
    from autoscaler.config.importer import convert_files, write_atomically
    from autoscaler.config.manifests import InputError, plain

    try:
        text, notes = convert_files(args.files, default_namespace=args.namespace)
    except InputError as error:
        raise CommandError(str(error)) from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.out is None:
        return _write_stdout(text)
    try:
        write_atomically(str(args.out), text)
    except OSError as error:
        raise CommandError(f"cannot write {plain(str(args.out))}: "
                           f"{error.strerror or error}") from None
    return 0


def _write_stdout(text: str) -> int:
    try:
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing, as cat does, and let exit be quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
