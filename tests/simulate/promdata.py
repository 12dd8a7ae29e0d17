"""The series the simulate tests backfill into a real Prometheus, and where it lies in time."""

from __future__ import annotations

import math
import time

STEP = 15
POINTS = 480  # two hours at 15 s
START = (math.floor(time.time() / 7200) - 12) * 7200
"""Block-aligned, a day back: inside the default retention, clear of the head block."""
END = START + (POINTS - 1) * STEP


def demand_at(k: int) -> float:
    """``web_demand{app="web"}`` at ``START + k * STEP``."""
    return float(100 + k)


def openmetrics() -> str:
    """Two series: the demand (rising by 1 per step) and a constant 7 for ``app="api"``."""
    lines = ["# TYPE web_demand gauge"]
    lines += [f'web_demand{{app="web"}} {demand_at(k)} {START + k * STEP}' for k in range(POINTS)]
    lines += [f'web_demand{{app="api"}} 7 {START + k * STEP}' for k in range(POINTS)]
    return "\n".join(lines) + "\n"
