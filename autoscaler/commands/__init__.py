"""Every ``autoscaler`` command, one module each, under one parser and one convention.

The package sits above everything else (app, plan, config, simulate): a command module
parses its arguments (``add_arguments``, standard library only, so ``--help`` and shell
completion never pay for the Kubernetes client) and calls into the layers below (``run``,
which imports what it needs). ``conventions`` holds the shared options and exit codes.

An expected failure is one line on stderr and exit 1; a usage error is argparse's message
and exit 2; anything unexpected is one line too, with the traceback only under ``--debug``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from autoscaler import CORE
from autoscaler.commands.conventions import CommandError, UsageError
from autoscaler.errors import AutoscalerError

COMMANDS = {
    "run": "autoscaler.commands.run",
    "check": "autoscaler.commands.check",
    "plan": "autoscaler.commands.plan",
    "status": "autoscaler.commands.status",
    "simulate": "autoscaler.commands.simulate",
    "import-hpa": "autoscaler.commands.import_hpa",
    "import-keda": "autoscaler.commands.import_keda",
    "completion": "autoscaler.commands.completion",
}
"""Command name -> module with ``HELP``, ``add_arguments(parser)`` and ``run(args)``."""


def package_version() -> str:
    try:
        return version("autoscaler")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, as shell completion and ``--help`` see it."""
    parser = argparse.ArgumentParser(
        prog="autoscaler",
        description="A Prometheus-driven autoscaler for Kubernetes that runs the HPA "
                    "algorithm exactly.",
        epilog="Run 'autoscaler COMMAND --help' for a command's options. Exit codes: 0 done, "
               "1 failed, 2 usage error.")
    parser.add_argument("--version", action="version",
                        version=f"autoscaler {package_version()} (core: {CORE.describe()})")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = _module(name)
        sub = commands.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        sub.add_argument("--debug", action="store_true",
                         help="show the traceback of an unexpected error (for a bug report)")
        module.add_arguments(sub)
        sub.set_defaults(usage=sub.format_usage)
    return parser


def _module(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name])


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run the command; the exit code."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:  # --help, --version (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    if extra:  # said with the command's usage, as argparse would say it of the command
        return _failed(args, UsageError(f"unrecognized arguments: {' '.join(extra)}"))
    try:
        result: int = _module(args.command).run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        return _failed(args, error)
    return result


def _failed(args: argparse.Namespace, error: Exception) -> int:
    """One line for a failure (exit 1) or a usage error (exit 2); a traceback only for an
    unexpected error under ``--debug``."""
    prefix = f"autoscaler {args.command}"
    if isinstance(error, UsageError):
        print(f"{args.usage()}{prefix}: error: {error}", file=sys.stderr)
        return 2
    if isinstance(error, CommandError | AutoscalerError):
        print(f"{prefix}: {error}", file=sys.stderr)
        return 1
    if args.debug:
        raise error
    print(f"{prefix}: unexpected {type(error).__name__}: {error} (run again with --debug "
          "for the traceback and report it)", file=sys.stderr)
    return 1
