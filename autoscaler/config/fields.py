"""Reusable field types for the schema: ranges, durations, quantities, names, query templates.

Each validator raises ``PydanticCustomError`` with the exact sentence the user will read
("must be between 1 and 1800, got 3000"), so messages need no rewriting afterwards.
Numbers are bounded by what the rest of the system can hold: counts as upstream's int32
fields, quantities as its int64 milli-units, durations by a range per field (``schema.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from autoscaler.algorithm.quantity import QuantityError, milli_value, parse_quantity
from autoscaler.config.durations import DurationError, format_duration, parse_duration
from autoscaler.config.issues import quote
from autoscaler.config.query import template_problems

INT32_MAX = 2**31 - 1
"""Upstream's replica counts, utilization and policy values are int32 fields."""

INT64_MAX = 2**63 - 1
"""Upstream compares quantities as int64 milli-units (``Quantity.MilliValue()``)."""

_MAX_EXPONENT = 30
"""``"1e999999999"`` would make an integer of a billion digits: refuse it before parsing."""

_EXPONENT = re.compile(r"[eE]([+-]?\d+)\s*$")


def fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("config", "{message}", {"message": message})


def problem_with(kind: Any, value: Any) -> str | None:
    """What the config would say of ``value`` in a field of type ``kind`` (``None``: it is
    fine): a command-line override meets the same rule as the key it overrides."""
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError as error:
        return str(error.errors()[0]["msg"])
    return None


def show(value: object) -> str:
    """A value as the user wrote it in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return str(value)


def _check(test: Callable[[Any], bool], message: str) -> AfterValidator:
    def validate(value: Any) -> Any:
        if not test(value):
            raise fail(f"{message}, got {show(value)}")
        return value

    return AfterValidator(validate)


def between(low: float, high: float) -> AfterValidator:
    return _check(lambda v: low <= v <= high, f"must be between {low} and {high}")


def at_least(low: float) -> AfterValidator:
    return _check(lambda v: v >= low, f"must be at least {low}")


def above(low: float) -> AfterValidator:
    return _check(lambda v: v > low, f"must be greater than {low}")


def at_most(high: float, why: str = "") -> AfterValidator:
    return _check(lambda v: v <= high, f"must be at most {high}{why}")


int32 = at_most(INT32_MAX, " (upstream's int32)")
"""Refuses what upstream's API rejects as out of range for an int32 field."""


def _check_seconds(test: Callable[[float], bool], message: str) -> AfterValidator:
    def validate(value: float) -> float:
        if not test(value):
            raise fail(f"{message}, got {format_duration(value)}")
        return value

    return AfterValidator(validate)


def shortest(low: float) -> AfterValidator:
    """A duration of at least ``low`` seconds."""
    return _check_seconds(lambda v: v >= low, f"must be at least {format_duration(low)}")


def longest(high: float) -> AfterValidator:
    """A duration of at most ``high`` seconds."""
    return _check_seconds(lambda v: v <= high, f"must be at most {format_duration(high)}")


whole_seconds = _check_seconds(lambda v: v == int(v), "must be a whole number of seconds")


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except DurationError as error:
        raise fail(str(error)) from None


def _quantity(value: object, expected: str, limit: str) -> Fraction:
    """The exact value of a quantity that fits upstream's int64 milli-units; else ``fail``."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fail(f"{expected}, got {show(value)}")
    exponent = _EXPONENT.search(value) if isinstance(value, str) else None
    if exponent and int(exponent[1]) > _MAX_EXPONENT:
        raise fail(f"{limit}, got {show(value)}")
    if exponent and int(exponent[1]) < -_MAX_EXPONENT:
        raise fail(f"must have an exponent of at least -{_MAX_EXPONENT}, got {show(value)}")
    try:
        parsed = parse_quantity(value)
    except (QuantityError, ValueError):  # ValueError: more digits than int() converts
        raise fail(f"{expected}, got {show(value)}") from None
    if milli_value(abs(parsed)) > INT64_MAX:
        raise fail(f"{limit}, got {show(value)}")
    return parsed


def quantity_problem(value: object, *, positive: bool) -> str | None:
    """Why ``value`` is no quantity the config takes (positive, or at least 0), or None: the
    same sentence a config gets, for the importers to say of a manifest's field."""
    try:
        (_positive_quantity if positive else _non_negative_quantity)(value)
    except PydanticCustomError as error:
        return error.message()
    return None


def _positive_quantity(value: object) -> object:
    parsed = _quantity(
        value, "must be a quantity such as \"500m\", \"1.5Gi\", \"10k\" or 2",
        f"must be at most {INT64_MAX}m (about 9.2P: upstream's int64 milli-units)")
    if parsed <= 0:
        raise fail(f"must be positive, got {show(value)}")
    return value


def _non_negative_quantity(value: object) -> object:
    parsed = _quantity(
        value, "must be a quantity such as \"0\", \"500m\", \"10k\" or 2",
        f"must be at most {INT64_MAX}m (about 9.2P: upstream's int64 milli-units)")
    if parsed < 0:
        raise fail(f"must be at least 0, got {show(value)}")
    return value


def _byte_size(value: object) -> int:
    """Bytes as an integer or a quantity string ("16Mi", "500k"), as a memory limit is written."""
    problem = f"must be a size in bytes such as 16777216 or \"16Mi\", got {show(value)}"
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise fail(problem)
    try:
        parsed = parse_quantity(value)
    except QuantityError:
        raise fail(problem) from None
    if parsed.denominator != 1 or parsed < 1:
        raise fail(problem)
    return int(parsed)


def _tolerance(value: object) -> float:
    """A number or a quantity string ("0.05", "50m"), as upstream's Quantity-typed field."""
    parsed = _quantity(value, "must be a number such as 0.1 or \"50m\"",
                       f"must be at most {INT64_MAX // 1000} (upstream's int64 milli-units)")
    if parsed < 0:
        raise fail(f"must be at least 0, got {show(value)}")
    return float(parsed)


def _template(value: str) -> str:
    problems = template_problems(value)
    if problems:
        raise fail("; ".join(problems))
    return value


def _pattern(regex: str, what: str) -> AfterValidator:
    compiled = re.compile(regex)
    return _check(lambda v: compiled.fullmatch(v) is not None, f"must be {what}")


Duration = Annotated[float, BeforeValidator(_duration)]
PositiveDuration = Annotated[float, BeforeValidator(_duration), above(0)]
PositiveQuantity = Annotated[str | int | float, BeforeValidator(_positive_quantity)]
NonNegativeQuantity = Annotated[str | int | float, BeforeValidator(_non_negative_quantity)]
ByteSize = Annotated[int, BeforeValidator(_byte_size)]
Tolerance = Annotated[float, BeforeValidator(_tolerance)]
QueryTemplate = Annotated[str, AfterValidator(_template)]
NonEmpty = Annotated[str, _check(lambda v: bool(v.strip()), "must not be empty")]
DnsLabel = Annotated[
    str, _pattern(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a DNS-1123 label (lowercase, '-')")
]
ObjectName = Annotated[
    str, _pattern(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", "a DNS-1123 subdomain name")
]
Kind = Annotated[str, _pattern(r"[A-Z][A-Za-z0-9]*", "a kind such as \"Deployment\"")]
ApiGroup = Annotated[str, _pattern(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
    "an API group, a DNS subdomain such as \"metrics.example.com\"")]
"""A ``MetricSourceReference.apiGroup`` (KEP-6382): a DNS subdomain, as upstream validates."""
ApiVersion = Annotated[
    str, _pattern(r"([a-z0-9.-]+/)?v[0-9]+[a-z0-9]*", "an apiVersion such as \"apps/v1\"")
]
ServerName = Annotated[str, _pattern(r"[A-Za-z0-9_-]+", "letters, digits, '_' or '-'")]
HostPort = Annotated[
    str, _pattern(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):[0-9]{1,5}", "HOST:PORT"),
    _check(lambda v: 1 <= int(v.rsplit(":", 1)[1]) <= 65535, "must have a port from 1 to 65535"),
]
# RFC 9110: a field name is a token; a value is visible characters with inner spaces or tabs.
# CR, LF and other controls would split or break the request (requests refuses them).
HeaderName = Annotated[str, _pattern(
    r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", "an HTTP header name (letters, digits, !#$%&'*+-.^_`|~)")]
HeaderValue = Annotated[str, _pattern(
    r"([\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?)?",
    "printable ASCII without control characters (CR, LF, ...) or leading or trailing space")]
QueryParamName = Annotated[str, _pattern(r"[^\x00-\x1f\x7f]+", "non-empty text without "
                                                                  "control characters")]
QueryParamValue = Annotated[str, _pattern(r"[^\x00-\x1f\x7f]*", "text without control "
                                                                   "characters (CR, LF, ...)")]
Url = Annotated[str, _pattern(r"https?://[^/\s]+(/\S*)?", "an http:// or https:// URL")]
