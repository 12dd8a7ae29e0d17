"""The ``autoscaler`` command: one subcommand per job, each owned by the module that does it.

Subcommand modules are imported lazily so ``autoscaler check`` does not pay for the
Kubernetes client's import, and each module parses its own arguments.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS = {
    "run": ("autoscaler.app", "start the daemon"),
    "check": ("autoscaler.config.check", "validate a config file (and its queries)"),
    "import-hpa": ("autoscaler.config.importer", "turn HPA manifests into our TOML"),
    "import-keda": ("autoscaler.config.import_keda", "turn KEDA ScaledObjects into our TOML"),
    "plan": ("autoscaler.plan", "one pass against the live cluster that changes nothing"),
    "simulate": ("autoscaler.simulate", "run a config against a demand trace in virtual time"),
}


def usage() -> str:
    lines = ["usage: autoscaler COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<11} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += ["", "Run 'autoscaler COMMAND --help' for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"autoscaler: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    result: int = module.command(rest)
    return result
