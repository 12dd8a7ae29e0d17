"""Write day.csv: one day of requests/s for the `web` example, a point per minute.

Deterministic (a fixed seed and only random.random()), so running it again rewrites the same
file. The shape: a night lull, a morning ramp, a daytime plateau, a ten-minute spike at
14:00, an evening decline and a quiet late night.

    python config/examples/simulate/make_day.py > config/examples/simulate/day.csv
"""

import math
import random
import sys

LULL, PEAK, SPIKE = 60.0, 1200.0, 3200.0


def base(minute: int) -> float:
    """Demand without noise at a minute of the day."""
    hour = minute / 60
    if hour < 6:  # night: low, dipping further around 03:30
        return LULL * (1 - 0.4 * math.exp(-((hour - 3.5) ** 2)))
    if hour < 10:  # morning ramp, eased
        share = (hour - 6) / 4
        return LULL + (PEAK - LULL) * (1 - math.cos(math.pi * share)) / 2
    if hour < 18:  # plateau with a lunchtime bump
        return PEAK * (1 + 0.15 * math.exp(-((hour - 12.5) ** 2) / 0.5))
    if hour < 23:  # evening decline
        share = (hour - 18) / 5
        return PEAK + (LULL * 1.5 - PEAK) * (1 - math.cos(math.pi * share)) / 2
    return LULL * 1.5 - (LULL * 0.5) * (hour - 23)


def spike(minute: int) -> float:
    """A sharp rise at 14:00, ten minutes at the top, then a five-minute decay."""
    start, top = 14 * 60, 10
    since = minute - start
    if since < 0:
        return 0.0
    if since < top:
        return SPIKE - PEAK
    return (SPIKE - PEAK) * math.exp(-(since - top) / 2.5)


def main() -> None:
    rng = random.Random(20261123)
    out = sys.stdout
    out.write("time,demand\n")
    for minute in range(24 * 60 + 1):
        noise = 1 + 0.06 * (rng.random() - 0.5)
        value = (base(minute) + spike(minute)) * noise
        out.write(f"{minute * 60},{value:.1f}\n")


if __name__ == "__main__":
    main()
