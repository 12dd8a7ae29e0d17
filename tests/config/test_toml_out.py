"""The TOML writer behind import-hpa: whatever it writes, tomllib reads back the same."""

from __future__ import annotations

import tomllib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.config.toml_out import assignment, key

scalars = st.one_of(st.text(), st.integers(-(2**63), 2**63 - 1), st.booleans(),
                    st.floats(allow_nan=False, allow_infinity=False))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


@given(st.text(min_size=1, max_size=10), values)
def test_assignment_round_trips(name: str, value: Any) -> None:
    """`key = value` lines, with any key and any nesting, parse back to the same value."""
    text = "\n".join(assignment(key(name), value)) + "\n"
    assert tomllib.loads(text) == {name: value}


def test_array_of_tables_gets_a_line_per_element() -> None:
    """Policies read like a hand-written config: one table per line."""
    lines = assignment("policies", [{"type": "Pods", "value": 4}, {"type": "Percent"}])
    assert lines == ["policies = [", '  { type = "Pods", value = 4 },',
                     '  { type = "Percent" },', "]"]
