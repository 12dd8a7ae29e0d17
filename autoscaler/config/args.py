"""Argument parsing for the config subcommands: argparse that returns exit codes, never exits."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


class ArgParser(argparse.ArgumentParser):
    def parse_args_or_exit(self, argv: Sequence[str]) -> argparse.Namespace | int:
        """Parsed arguments, or the exit code argparse chose (0 for --help, 2 for errors)."""
        try:
            return self.parse_args(list(argv))
        except SystemExit as exit_:
            return exit_.code if isinstance(exit_.code, int) else 2
