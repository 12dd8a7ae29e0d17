"""The TOML writer behind import-hpa: whatever it writes, tomllib reads back the same."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.importers.toml_out import assignment, comment, key, literal, string

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


@given(st.text())
def test_string_shows_every_character(text: str) -> None:
    """A string value is one line of printable characters and parses back to itself."""
    written = string(text)
    assert written.isprintable()
    assert tomllib.loads(f"v = {written}\n") == {"v": text}


@pytest.mark.parametrize(("text", "written"), [
    ('a"b', '"a\\"b"'), ("a\\b", '"a\\\\b"'), ("a\nb", '"a\\nb"'), ("\u2028", '"\\u2028"'),
    ("\x85", '"\\u0085"'), ("\x00\x7f", '"\\u0000\\u007F"'), ("\U000e0001", '"\\U000E0001"'),
    ("é ☃", '"é ☃"'),
], ids=["quote", "backslash", "newline", "line-separator", "next-line", "control",
        "astral-format", "printable-unicode"])
def test_string_escapes(text: str, written: str) -> None:
    """Quotes, backslashes and what is not printable are escaped; printable text is kept."""
    assert string(text) == written


def test_comment_refuses_a_second_line() -> None:
    """A comment can never end its line: text that is not printable is a programming error."""
    assert comment("TODO: write it") == "# TODO: write it"
    with pytest.raises(ValueError, match="one printable line"):
        comment("x\n[prometheus]")


@given(st.text())
def test_literal_shows_every_character(text: str) -> None:
    """A literal is one printable line that parses back to itself; PromQL keeps its quotes."""
    written = literal(text)
    assert written.isprintable()
    assert tomllib.loads(f"v = {written}\n") == {"v": text}


@pytest.mark.parametrize(("text", "written"), [
    ('sum(x{a="b\\\\c"})', "'sum(x{a=\"b\\\\c\"})'"), ("it's", '"it\'s"'), ("a\nb", '"a\\nb"'),
], ids=["promql", "apostrophe", "newline"])
def test_literal_falls_back_to_a_basic_string(text: str, written: str) -> None:
    """Text a literal cannot hold (an apostrophe, a line break) becomes an escaped string."""
    assert literal(text) == written
