"""Text for a terminal: whether output may carry colour, and rows as aligned columns.

Colour only on a terminal, never when ``NO_COLOR`` is set: one rule for the logs and the
commands' output (https://no-color.org: any non-empty value). ``columns`` is the one table
renderer of ``check``, ``status``, ``plan`` and ``simulate``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import IO


def colour_wanted(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    if environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def columns(rows: Sequence[Sequence[str]], *, gap: str = "   ") -> str:
    """Rows as left-aligned columns ``gap`` apart (kubectl's three spaces by default), no
    trailing blanks; every row has as many cells as the first."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(gap.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in rows)
