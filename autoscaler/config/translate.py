"""pydantic's validation errors as our problems: field paths and sentences a user can act on.

Unknown keys get a "did you mean" hint from the keys the table at that path accepts, found
by walking the schema's annotations along the error's path.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from autoscaler.config.fields import show
from autoscaler.config.issues import Loc, Problem, did_you_mean

_TYPE_WORDS = {
    "int_type": "an integer", "int_parsing": "an integer", "float_type": "a number",
    "bool_type": "true or false", "string_type": "a string", "list_type": "an array",
    "dict_type": "a table", "model_type": "a table", "model_attributes_type": "a table",
}


def problems_from(
    error: ValidationError, model: type[BaseModel], *, prefix: Loc = ()
) -> Iterator[Problem]:
    """One problem per pydantic error, its path under ``prefix``."""
    for detail in error.errors():
        raw = detail["loc"]
        if detail["type"] == "extra_forbidden" and raw:
            # The last element is the user's own key, whatever characters it holds.
            loc = (*_clean(raw[:-1]), raw[-1])
        else:
            loc = _clean(raw)
        yield Problem(loc=prefix + loc, message=_message(detail, model, loc))


def _clean(loc: tuple[str | int, ...]) -> Loc:
    """Drop the validator names pydantic puts in paths (``function-after[...]``)."""
    return tuple(part for part in loc if isinstance(part, int) or "[" not in part)


def _message(detail: ErrorDetails, model: type[BaseModel], loc: Loc) -> str:
    kind, value = detail["type"], detail["input"]
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden" and loc:
        allowed = keys_at(model, loc[:-1])
        return f"unknown key{did_you_mean(str(loc[-1]), allowed) if allowed else ''}"
    if kind in _TYPE_WORDS:
        return f"must be {_TYPE_WORDS[kind]}, got {show(value)}"
    if kind in {"literal_error", "enum"}:
        expected = _expected(detail)
        hint = did_you_mean(str(value), expected, listing=None) if isinstance(value, str) else ""
        return f"must be one of {', '.join(show(e) for e in expected)}, got {show(value)}{hint}"
    return str(detail["msg"])


def _expected(detail: ErrorDetails) -> list[str]:
    text = str((detail.get("ctx") or {}).get("expected", ""))
    return [part.strip().strip("'") for part in text.replace(" or ", ", ").split(",") if part]


def keys_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """The keys the table at ``loc`` accepts, or ``[]`` if the path leads to no model."""
    current: Any = model
    for part in loc:
        current = _step(_unwrap(current), part)
        if current is None:
            return []
    found = _unwrap(current)
    if isinstance(found, type) and issubclass(found, BaseModel):
        return [field.alias or name for name, field in found.model_fields.items()]
    return []


def _step(annotation: Any, part: str | int) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if part in {name, field.alias}:
                return field.annotation
        return None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and isinstance(part, int):
        return args[0]
    if origin is dict and isinstance(part, str):
        return args[1]
    return None


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated[...]`` and ``X | None`` down to the type that holds the keys."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in {typing.Union, types.UnionType}:
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation
