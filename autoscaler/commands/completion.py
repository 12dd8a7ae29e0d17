"""``autoscaler completion bash|zsh``: a shell completion script, generated from the parser.

shtab writes a static script from the argparse parser itself, so completion always matches
the options (no copy kept by hand) and a TAB press costs the shell nothing: argcomplete would
instead start Python, and import the command line, on every TAB.
"""

from __future__ import annotations

import argparse

HELP = "print a shell completion script (bash or zsh)"
DESCRIPTION = ("Print a completion script for bash or zsh. Load it now with "
               "'source <(autoscaler completion bash)', or install it where your shell looks "
               "(bash: /etc/bash_completion.d/autoscaler; zsh: a file _autoscaler in $fpath).")
SHELLS = ("bash", "zsh")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    import shtab

    from autoscaler.commands import build_parser

    print(shtab.complete(build_parser(), shell=args.shell))
    return 0
