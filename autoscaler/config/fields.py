"""Reusable field types for the schema: ranges, durations, quantities, names, query templates.

Each validator raises ``PydanticCustomError`` with the exact sentence the user will read
("must be between 1 and 1800, got 3000"), so messages need no rewriting afterwards.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from autoscaler.algorithm.quantity import QuantityError, parse_quantity
from autoscaler.config.durations import DurationError, parse_duration
from autoscaler.config.query import template_problems


def fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("config", "{message}", {"message": message})


def show(value: object) -> str:
    """A value as the user wrote it in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
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


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except DurationError as error:
        raise fail(str(error)) from None


def _positive_quantity(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fail(f"must be a quantity such as \"500m\", \"1.5Gi\" or 10, got {show(value)}")
    try:
        parsed = parse_quantity(value)
    except QuantityError:
        raise fail("must be a quantity such as \"500m\", \"1.5Gi\", \"10k\" or 2, "
                   f"got {show(value)}") from None
    if parsed <= 0:
        raise fail(f"must be positive, got {show(value)}")
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
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fail(f"must be a number such as 0.1, got {show(value)}")
    try:
        parsed = float(parse_quantity(value))
    except QuantityError:
        raise fail(f"must be a number such as 0.1 or \"50m\", got {show(value)}") from None
    if parsed < 0:
        raise fail(f"must be at least 0, got {show(value)}")
    return parsed


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
ApiVersion = Annotated[
    str, _pattern(r"([a-z0-9.-]+/)?v[0-9]+[a-z0-9]*", "an apiVersion such as \"apps/v1\"")
]
ServerName = Annotated[str, _pattern(r"[A-Za-z0-9_-]+", "letters, digits, '_' or '-'")]
HostPort = Annotated[
    str, _pattern(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):[0-9]{1,5}", "HOST:PORT")
]
Url = Annotated[str, _pattern(r"https?://[^/\s]+(/\S*)?", "an http:// or https:// URL")]
