"""The one argument convention every command follows, and how a command fails.

- ``-c/--config FILE``: the daemon's TOML config (``check`` also takes it as its argument).
- ``-o/--output FORMAT``: the output format (``table``, ``json``, ``yaml``); never a file.
- ``--out PATH``: where files are written (a file or a directory).
- ``-v/--verbose``: more on stderr; ``--debug``: a traceback for an unexpected error.

Exit codes: 0 done, 1 failed (one line on stderr naming what failed and what to check),
2 a usage error (argparse's message and usage). Nothing here imports more than the standard
library, so building the parser for ``--help`` or completion stays instant.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
from pathlib import Path
from typing import IO, Any

FILE = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}
"""shtab's completion hint for a file argument (``shtab.FILE``, without importing shtab)."""
DIRECTORY = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/", "tcsh": "d"}

FORMATS = ("table", "json", "yaml")


class CommandError(Exception):
    """An expected failure: the message is the one line the user sees (exit 1)."""


class UsageError(Exception):
    """Arguments that do not go together: argparse's kind of message (exit 2)."""


def add_config(parser: argparse.ArgumentParser, *, required: bool = True,
               what: str = "the daemon's TOML config file") -> None:
    action = parser.add_argument("-c", "--config", type=Path, required=required,
                                 metavar="FILE", help=what)
    action.complete = FILE  # type: ignore[attr-defined]


def add_output(parser: argparse.ArgumentParser, formats: tuple[str, ...] = FORMATS) -> None:
    parser.add_argument("-o", "--output", choices=formats, default=formats[0],
                        help=f"output format (default: {formats[0]})")


def add_verbose(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0, help=what)


def add_out(parser: argparse.ArgumentParser, *, default: Path | None, what: str,
            directory: bool = False) -> None:
    action = parser.add_argument("--out", type=Path, default=default, metavar="PATH", help=what)
    action.complete = DIRECTORY if directory else FILE  # type: ignore[attr-defined]


def write_document(data: Any, output: str, stream: IO[str] | None = None) -> None:
    """``data`` as JSON or YAML on stdout (the machine-readable outputs). Both render the
    same plain data: an enum is its value, whichever command's document holds it."""
    stream = stream or sys.stdout
    text = json.dumps(data, indent=2, ensure_ascii=False, default=_plain)
    if output == "yaml":
        import yaml

        stream.write(yaml.safe_dump(json.loads(text), sort_keys=False, allow_unicode=True))
    else:
        stream.write(text + "\n")


def _plain(value: Any) -> Any:
    """What JSON cannot hold as it is: an enum (not a ``str`` one) by its value."""
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"{type(value).__name__} is not plain data")


def load(path: Path, *, check_files: bool = True) -> Any:
    """The config at ``path``, or a ``CommandError`` listing its problems."""
    from autoscaler.config import ConfigError, load_config

    try:
        return load_config(path, check_files=check_files)
    except ConfigError as error:
        raise CommandError(f"invalid config:\n{error}") from None
