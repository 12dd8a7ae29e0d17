"""Label and field selectors: parsing the query-string forms and matching objects.

Grammar as in apimachinery's ``labels.Parse``: comma-separated requirements ``k=v``, ``k==v``,
``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` and ``!k``. Field selectors accept only
``=``, ``==`` and ``!=`` on the fields a resource declares; anything else is a 400, as upstream.
Also ``format_label_selector``: a ``LabelSelector`` as the string a Scale's status carries.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import bad_request

Matcher = Callable[[dict[str, str]], bool]

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "in" | "notin" | "exists" | "!exists"  ("=" is "in" with one value)
    values: frozenset[str]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "in":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


def _split(selector: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _requirement(text: str) -> Requirement:
    if m := _SET_RE.match(text):
        values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
        return Requirement(m["key"], m["op"], values)
    if m := _CMP_RE.match(text):
        return Requirement(m["key"], "notin" if m["op"] == "!=" else "in",
                           frozenset({m["value"]}))
    if m := _EXISTS_RE.match(text):
        return Requirement(m["key"], "!exists" if m["neg"] else "exists", frozenset())
    raise bad_request(f"unable to parse requirement: {text.strip()!r}: invalid label selector")


def parse_label_selector(selector: str) -> Matcher:
    """A matcher over a labels dict; the empty selector matches everything."""
    requirements = [_requirement(p) for p in _split(selector)]
    return lambda labels: all(r.matches(labels) for r in requirements)


def get_path(obj: Any, dotted: str) -> Any:
    """The value at a dotted path (a leading dot is allowed), or None if any step is missing."""
    for part in dotted.strip(".").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def set_path(obj: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.strip(".").split(".")
    for part in parts[:-1]:
        obj = obj.setdefault(part, {})
    obj[parts[-1]] = value


def parse_field_selector(selector: str, fields: dict[str, str]) -> Callable[[dict[str, Any]], bool]:
    """A matcher over whole objects; unknown fields are a 400 as upstream."""
    checks: list[tuple[str, bool, str]] = []
    for part in _split(selector):
        m = re.match(r"^\s*([^=!]+?)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        label, op, value = m.groups()
        if label not in fields:
            raise bad_request(f'"{label}" is not a known field selector: only '
                              f'"{", ".join(sorted(fields))}"')
        checks.append((fields[label], op != "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        for path, equal, value in checks:
            actual = get_path(obj, path)
            text = "" if actual is None else str(actual).lower() if isinstance(actual, bool) \
                else str(actual)
            if (text == value) != equal:
                return False
        return True

    return matches


def format_label_selector(selector: dict[str, Any] | None) -> str:
    """``metav1.LabelSelectorAsSelector(sel).String()``: requirements sorted by key."""
    if not selector:
        return ""
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], sorted(expr.get("values") or [])
        text = {"In": f"{key} in ({','.join(values)})",
                "NotIn": f"{key} notin ({','.join(values)})",
                "Exists": key, "DoesNotExist": f"!{key}"}[op]
        reqs.append((key, text))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def selector_matcher(selector: dict[str, Any] | None) -> Matcher:
    """A matcher for a ``LabelSelector`` object (an empty one matches nothing, as a controller)."""
    text = format_label_selector(selector)
    return parse_label_selector(text) if text else (lambda labels: False)
