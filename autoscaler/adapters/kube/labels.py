"""Label selectors in their string form, as a scale's ``status.selector`` carries them.

Parses what ``metav1.FormatLabelSelector`` and ``labels.Selector.String()`` print:
``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a`` (exists) and ``!a``
(does not exist), joined by commas. ``!=`` and ``notin`` also match pods without the label,
as upstream's ``labels.Requirement.Matches`` does. ``format_label_selector`` goes the other
way: a workload's ``spec.selector`` object to the string its ``/scale`` reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from autoscaler.errors import BadDataError

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_COMPARE = re.compile(rf"^(?P<key>{_KEY})\s*(?P<op>==|!=|=)\s*(?P<value>{_VALUE})$")
_EXISTS = re.compile(rf"^(?P<neg>!?)\s*(?P<key>{_KEY})$")
_VALUE_ONLY = re.compile(rf"^{_VALUE}$")


class Operator(StrEnum):
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    """Sorted, each once: a tuple of one value takes 48 bytes, a frozenset 216, and a
    fleet keeps a parsed selector a target."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present
            case Operator.IN:
                return present and labels[self.key] in self.values
            case Operator.NOT_IN:
                return not present or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True, kw_only=True)
class Selector:
    """A conjunction of requirements; the empty selector matches every pod."""

    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    """Parse a selector string; raises ``BadDataError`` naming the bad requirement."""
    requirements = tuple(_parse_requirement(part, text) for part in _split(text))
    return Selector(text=text, requirements=requirements)


def _split(text: str) -> list[str]:
    """Split on the commas that are not inside ``( ... )``."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    stripped = [part.strip() for part in parts]
    return [] if stripped == [""] else stripped


def _parse_requirement(part: str, text: str) -> Requirement:
    if match := _SET.match(part):
        values = [v.strip() for v in match["values"].split(",")]
        if not all(_VALUE_ONLY.match(v) for v in values):
            raise BadDataError(f"label selector {text!r}: bad value in {part!r}")
        operator = Operator.IN if match["op"] == "in" else Operator.NOT_IN
        return Requirement(key=match["key"], operator=operator, values=tuple(sorted(set(values))))
    if match := _COMPARE.match(part):
        operator = Operator.NOT_IN if match["op"] == "!=" else Operator.IN
        return Requirement(key=match["key"], operator=operator,
                           values=(match["value"],))
    if match := _EXISTS.match(part):
        operator = Operator.DOES_NOT_EXIST if match["neg"] else Operator.EXISTS
        return Requirement(key=match["key"], operator=operator)
    raise BadDataError(
        f"label selector {text!r}: cannot parse requirement {part!r} (expected key=value, "
        "key!=value, key in (a,b), key notin (a,b), key or !key)"
    )


_EXPRESSIONS = {"In": "{key} in ({values})", "NotIn": "{key} notin ({values})",
                "Exists": "{key}", "DoesNotExist": "!{key}"}


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """A ``LabelSelector`` object as the API server renders it in a built-in's ``/scale``.

    Upstream's scale storage prints ``metav1.LabelSelectorAsSelector(spec.selector)``:
    ``matchLabels`` become ``k=v``, ``matchExpressions`` ``k in (a,b)``, ``k notin (a)``,
    ``k`` or ``!k`` with their values sorted; ``Selector.Add`` sorts the requirements by key
    (a stable sort here: a label before an expression on the same key); a null or empty
    selector prints as ``""``. ``BadDataError`` for an operator upstream does not know.
    """
    if not selector:
        return ""
    requirements = [(str(key), f"{key}={value}")
                    for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or ():
        key, operator = expression.get("key"), expression.get("operator")
        if operator not in _EXPRESSIONS or not key:
            raise BadDataError(f"label selector: {operator!r} on {key!r} is not a valid "
                               "requirement (expected In, NotIn, Exists or DoesNotExist)")
        values = ",".join(sorted(str(value) for value in expression.get("values") or ()))
        requirements.append((str(key), _EXPRESSIONS[operator].format(key=key, values=values)))
    return ",".join(text for _, text in sorted(requirements, key=lambda item: item[0]))
