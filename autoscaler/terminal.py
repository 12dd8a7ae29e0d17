"""Whether output may carry colour: only on a terminal, never when ``NO_COLOR`` is set.

One rule for the logs and the commands' output (https://no-color.org: any non-empty value).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO


def colour_wanted(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    if environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
