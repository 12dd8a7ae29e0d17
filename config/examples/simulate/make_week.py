"""Write week.csv and noise.csv: a week of requests/s for the predictive-scaling backtest.

Deterministic (fixed seeds, only random.random()), so running it again rewrites the same
files; a point per minute.

- week.csv: a daily season with a sharp morning ramp (about 100 to 1,400 requests/s in 20
  minutes, starting within a few minutes of 07:40), a daytime plateau with a lunchtime bump,
  an evening decline and a quiet night; each day's level varies by a few percent, with 6 %
  noise on top. Prediction should help here: yesterday's ramp is tomorrow's.
- noise.csv: the same average load with no season: a wandering level and sudden bursts at
  random times. Nothing to forecast: the guard rails should keep prediction out of the way.

    python config/examples/simulate/make_week.py config/examples/simulate/
"""

import math
import random
import sys
from pathlib import Path

LULL, PEAK = 90.0, 1400.0
DAYS = 7


def day_shape(hour: float, ramp_at: float) -> float:
    """Demand without noise at an hour of the day, the morning ramp starting at ``ramp_at``."""
    ramp_hours = 20 / 60
    if hour < ramp_at:
        return LULL * (1 - 0.3 * math.exp(-((hour - 3.5) ** 2)))
    if hour < ramp_at + ramp_hours:
        share = (hour - ramp_at) / ramp_hours
        return LULL + (PEAK - LULL) * (1 - math.cos(math.pi * share)) / 2
    if hour < 18:
        return PEAK * (1 + 0.2 * math.exp(-((hour - 12.5) ** 2) / 0.3))
    if hour < 22:
        share = (hour - 18) / 4
        return PEAK + (LULL * 1.6 - PEAK) * (1 - math.cos(math.pi * share)) / 2
    return LULL * 1.6 - LULL * 0.6 * (hour - 22) / 2


def week(rng: random.Random) -> list[float]:
    out = []
    for _ in range(DAYS):
        level = 1 + 0.08 * (rng.random() - 0.5)
        ramp_at = 7 + 40 / 60 + (rng.random() - 0.5) * 6 / 60
        for minute in range(24 * 60):
            noise = 1 + 0.06 * (rng.random() - 0.5)
            out.append(day_shape(minute / 60, ramp_at) * level * noise)
    return out


def noise(rng: random.Random) -> list[float]:
    """A mean-reverting wander around the week's mean, with bursts of 2-3x for 5-20 minutes
    about every 40 minutes."""
    mean = 600.0
    level, out, burst_left, burst = mean, [], 0, 1.0
    for _ in range(DAYS * 24 * 60):
        level += 0.02 * (mean - level) + 120 * (rng.random() - 0.5)
        if burst_left == 0 and rng.random() < 1 / 40:
            burst_left, burst = 5 + int(rng.random() * 16), 2 + rng.random()
        factor = burst if burst_left else 1.0
        burst_left = max(0, burst_left - 1)
        out.append(max(10.0, level * factor * (1 + 0.1 * (rng.random() - 0.5))))
    return out


def write(path: Path, values: list[float]) -> None:
    lines = ["time,demand"] + [f"{minute * 60},{value:.1f}" for minute, value in
                                enumerate(values)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    write(out / "week.csv", week(random.Random(20261127)))
    write(out / "noise.csv", noise(random.Random(20261128)))


if __name__ == "__main__":
    main()
