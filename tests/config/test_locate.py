"""Finding the line that defines a field path, in every way TOML can spell it."""

from __future__ import annotations

import time

import pytest

from autoscaler.config.locate import LineFinder

TEXT = """\
[daemon]
syncPeriod = 5
leaderElection.enabled = true

[[autoscaler]]
namespace = "a"
metrics = [
  { type = "Pods", pods = { query = "x" } },
  { type = "External" },
]

[[autoscaler]]
namespace = "b"
[autoscaler.behavior.scaleDown]
policies = [
  { type = "Pods", value = 1, periodSeconds = 15 },
  { type = "Pods", value = 2, periodSeconds = 15 },
]
[[autoscaler.metrics]]
type = "Resource"
description = '''
a multi-line
string'''
resource.name = "cpu"
"""


@pytest.mark.parametrize(("loc", "line"), [
    (("daemon",), 1),
    (("daemon", "syncPeriod"), 2),
    (("daemon", "leaderElection", "enabled"), 3),
    (("autoscaler", 0), 5),
    (("autoscaler", 0, "namespace"), 6),
    (("autoscaler", 0, "metrics"), 7),
    (("autoscaler", 0, "metrics", 1, "type"), 9),
    (("autoscaler", 0, "metrics", 0, "pods", "query"), 8),
    (("autoscaler", 1, "namespace"), 13),
    (("autoscaler", 1, "behavior", "scaleDown", "policies", 1, "value"), 17),
    (("autoscaler", 1, "metrics", 0, "type"), 20),
    (("autoscaler", 1, "metrics", 0, "resource", "name"), 24),
    (("autoscaler", 1, "maxReplicas"), 12),
    (("autoscaler", 0, "metrics", 1, "external", "query"), 9),
    (("kubernetes", "context"), None),
], ids=["table", "key", "dotted", "array-table", "target-key", "inline-array", "element",
        "nested-inline", "second-target", "multiline-element", "array-of-tables",
        "after-multiline-string", "missing-key-parent", "missing-nested", "missing-table"])
def test_line_of(loc: tuple[str | int, ...], line: int | None) -> None:
    """The first line whose prefix of the file defines the path (or its deepest parent)."""
    assert LineFinder(TEXT).line_of(loc) == line


def test_header_inside_a_string_falls_back_to_the_whole_file() -> None:
    """A `[[autoscaler]]` line inside a multi-line string does not shift the blocks."""
    text = 'note = """\n[[autoscaler]]\n"""\n[[autoscaler]]\nnamespace = "a"\n'
    assert LineFinder(text).line_of(("autoscaler", 0, "namespace")) == 5


def test_many_broken_targets_are_located_fast() -> None:
    """500 targets with a problem each: every line found, in well under the test's budget."""
    block = ('[[autoscaler]]\nnamespace = "n{i}"\nmaxReplicas = 10\nminReplicas = 20\n'
             '[[autoscaler.metrics]]\ntype = "Pods"\n')
    text = "".join(block.format(i=i) for i in range(500))
    finder = LineFinder(text)
    started = time.perf_counter()
    lines = [finder.line_of(("autoscaler", i, "minReplicas")) for i in range(500)]
    assert lines == [6 * i + 4 for i in range(500)]
    assert time.perf_counter() - started < 5.0
