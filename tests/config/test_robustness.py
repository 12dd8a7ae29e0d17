"""Whatever the file holds, loading ends in a Config or a ConfigError, never another exception."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config import Config, ConfigError, ConfigIssue, parse_config

EXAMPLE = (Path(__file__).parents[2] / "config" / "examples" / "multi-cluster.toml").read_text()

leaves = st.one_of(
    st.integers(-5, 5000), st.booleans(), st.floats(allow_nan=False), st.text(max_size=12),
    st.sampled_from(["5m", "500m", "1.5Gi", "Pods", "Utilization", "${x}", "TODO", "$", ""]),
)
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=8), inner,
                                                 max_size=3)), max_leaves=6)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replace(document: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        document = document[part]
    document[path[-1]] = value


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mutated_example_never_crashes(data: st.DataObject) -> None:
    """Replace a few values of a valid config with anything: a Config or a ConfigError."""
    document = tomllib.loads(EXAMPLE)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(document)))
        _replace(document, path, data.draw(values))
    text = tomli_w.dumps(document)
    issues = _issues(text)
    assert all(i.line is None or 1 <= i.line <= text.count("\n") + 1 for i in issues)


def _issues(text: str | bytes) -> tuple[ConfigIssue, ...]:
    """The issues of ``text``; none when it loads (and then it must be a Config)."""
    try:
        result = parse_config(text)
    except ConfigError as error:
        assert error.issues, "a ConfigError without issues"  # noqa: PT017
        return error.issues
    assert isinstance(result, Config)
    return ()


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                 st.integers(1, 3000).map(lambda depth: b"a = " + b"[" * depth)))
def test_any_bytes_end_in_a_config_or_a_config_error(data: bytes) -> None:
    """Garbage, text and deep nests alike: parse_config raises ConfigError and nothing else."""
    _issues(data)
