"""Hostile config files and a way to run `autoscaler check` on them with its time and memory.

Shared by the CLI tests (which assert bounds) and ``bench/check_hostile.py`` (which prints
the figures). Each builder makes its input under a directory and returns the path to check.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.config.helpers import TARGET


def dev_zero(_: Path) -> Path:
    """An endless character device: reading it to the end never ends."""
    return Path("/dev/zero")


def fifo(directory: Path) -> Path:
    """A FIFO nobody writes to: a blocking open or read waits forever."""
    path = directory / "config.fifo"
    os.mkfifo(path)
    return path


def nested(directory: Path) -> Path:
    """Arrays nested 100,000 deep (tomllib recurses once per level): 200 kB of brackets."""
    path = directory / "nested.toml"
    path.write_text(f"a = {'[' * 100_000}{']' * 100_000}\n")
    return path


def big(directory: Path) -> Path:
    """A 100 MB file (sparse, so it costs no disk): far over the size a config may have."""
    path = directory / "big.toml"
    with path.open("wb") as handle:
        handle.truncate(100 * 10**6)
    return path


def huge_integer(directory: Path) -> Path:
    """An integer of 5,000 digits: more than int() converts (a ValueError, not a TOML error)."""
    path = directory / "digits.toml"
    path.write_text(f"a = {'9' * 5000}\n")
    return path


def binary(directory: Path) -> Path:
    """Bytes that are not UTF-8 on the second line."""
    path = directory / "binary.toml"
    path.write_bytes(b"[daemon]\n\x89PNG\r\n\x1a\n\x00\x00")
    return path


def broken_everywhere(directory: Path) -> Path:
    """4 MiB of empty ``[[autoscaler]]`` tables: 280,000 targets, three problems each."""
    path = directory / "broken.toml"
    path.write_text("[[autoscaler]]\n" * (4 * 2**20 // 16))
    return path


def valid(directory: Path) -> Path:
    """A small valid config: the baseline for time and memory."""
    path = directory / "valid.toml"
    path.write_text(TARGET)
    return path


HOSTILE: dict[str, Callable[[Path], Path]] = {
    "/dev/zero": dev_zero, "fifo": fifo, "nested": nested, "100 MB": big,
    "huge-integer": huge_integer, "binary": binary,
}
"""Inputs `check` must refuse at once, by name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRun:
    code: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_kib: int
    """The child's own peak resident set (``ru_maxrss`` from ``wait4``)."""


def run_check(args: Sequence[str], *, timeout: float = 30.0) -> CheckRun:
    """``python -m autoscaler check ARGS`` in a child; killed (by its PID) after ``timeout``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-m", "autoscaler", "check", *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        killer = threading.Timer(timeout, child.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            killer.cancel()
        seconds = time.monotonic() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return CheckRun(code=child.returncode, stdout=out.read().decode(errors="replace"),
                        stderr=err.read().decode(errors="replace"), seconds=seconds,
                        max_rss_kib=usage.ru_maxrss)
