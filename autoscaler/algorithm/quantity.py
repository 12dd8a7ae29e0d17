"""Kubernetes resource quantities ("500m", "1.5Gi", "10k", "2e3") as integer milli-units.

Upstream compares and averages ``Quantity.MilliValue()`` integers; parsing to an exact
``Fraction`` first keeps "0.1" from becoming 99m. Fractions of a milli-unit round up, as
``MilliValue()`` does.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from autoscaler.algorithm.model import Milli

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(text: str | int | float) -> Fraction:
    """Parse a quantity (or a plain number) into its exact value in base units."""
    if isinstance(text, bool):
        raise QuantityError(f"expected a quantity such as '500m' or '1.5Gi', got {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"expected a finite quantity, got {text!r}")
        return Fraction(str(text))
    match = _PATTERN.match(text.strip())
    if match is None:
        raise QuantityError(
            f"expected a quantity such as '500m', '1.5Gi', '10k' or '2e3', got {text!r}"
        )
    value = Fraction(match["number"])
    if match["exp"]:
        value *= Fraction(10) ** int(match["exp"][1:])
    else:
        suffix = match["suffix"] or ""
        value *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -value if match["sign"] == "-" else value


def milli_value(value: Fraction) -> Milli:
    """Milli-units, rounded up like ``Quantity.MilliValue()`` (a Prometheus sample is
    rounded to the nearest instead: ``adapters.prometheus.parse.sample_milli``)."""
    return Milli(math.ceil(value * 1000))


def parse_milli(text: str | int | float) -> Milli:
    return milli_value(parse_quantity(text))


def format_milli(milli: int) -> str:
    """Render milli-units the way Kubernetes prints them: "500m", "2", "1500m"."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
