"""``@record``: value semantics at run time, immutability from the type checker."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from autoscaler.record import record


@record
class Sample:
    pod: str
    value: float
    tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)


@record(kw_only=False)
class Pair:
    left: int
    right: int


def test_records_compare_and_hash_by_their_fields() -> None:
    a, b = Sample(pod="web-1", value=0.5), Sample(pod="web-1", value=0.5)
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != Sample(pod="web-1", value=0.6)
    assert hash(Pair(1, 2)) != hash(Pair(2, 1))


def test_records_are_slotted_and_keyword_only_unless_asked() -> None:
    assert not hasattr(Sample(pod="a", value=1.0), "__dict__")
    with pytest.raises(TypeError):
        Sample("a", 1.0)  # type: ignore[misc]
    assert Pair(1, 2).right == 2


def test_replace_makes_a_changed_copy() -> None:
    first = Sample(pod="a", value=1.0)
    second = dataclasses.replace(first, value=2.0)
    assert (first.value, second.value, second.pod) == (1.0, 2.0, "a")


def test_the_type_checker_rejects_assigning_a_field(tmp_path: Path) -> None:
    """The guard a frozen dataclass keeps at run time, checked statically instead: mypy
    (strict, as CI runs it) fails on an assignment to a record's field, or to a Final field
    of the core's native value types."""
    source = tmp_path / "assign.py"
    source.write_text(textwrap.dedent("""
        from autoscaler.algorithm import Milli, PodSample
        from autoscaler.record import record

        @record
        class Local:
            value: int

        Local(value=1).value = 2
        PodSample(value=Milli(1), timestamp=0.0).value = Milli(2)
    """))
    out, _, status = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir=/dev/null", str(source)])
    assert status == 1, out
    assert out.count("is read-only") == 1, out  # a record: a frozen dataclass to mypy
    assert out.count('Cannot assign to final attribute "value"') == 1, out  # a native value
    assert out.count("error:") == 2, out
