"""Query templates: placeholders substituted, PromQL braces untouched, mistakes caught early."""

from __future__ import annotations

import pytest

from autoscaler.config import PLACEHOLDERS, render_query
from autoscaler.config.query import template_problems

TARGET = {"namespace": "shop", "name": "web", "kind": "Deployment",
          "pod_selector": 'namespace="shop",pod=~"web-1|web-2"', "pod_regex": "web-1|web-2"}


@pytest.mark.parametrize(("template", "rendered"), [
    ("sum by (pod) (rate(x{${pod_selector}}[2m]))",
     'sum by (pod) (rate(x{namespace="shop",pod=~"web-1|web-2"}[2m]))'),
    ('x{namespace="$namespace",deployment="${name}",kind="${kind}"}',
     'x{namespace="shop",deployment="web",kind="Deployment"}'),
    ('x{pod=~"${pod_regex}",container="${container}"}', 'x{pod=~"web-1|web-2",container="app"}'),
    ('x{le=~"1$$"}', 'x{le=~"1$"}'),
    ("sum(x)", "sum(x)"),
], ids=["selector", "names", "regex-container", "escaped-dollar", "no-placeholder"])
def test_render(template: str, rendered: str) -> None:
    """string.Template substitution; `$$` is a literal `$`."""
    assert render_query(template, container="app", **TARGET) == rendered


def test_documented_placeholders() -> None:
    """The module docstring names every placeholder."""
    import autoscaler.config.query as module

    assert module.__doc__ is not None
    assert all(f"${{{name}}}" in module.__doc__ for name in PLACEHOLDERS)


@pytest.mark.parametrize(("template", "problem"), [
    ("x{${pod_selektor}}", "unknown placeholder ${pod_selektor}"),
    ('x{name=~"web$"}', "write '$$' for a literal '$'"),
    ("  ", "must not be empty"),
    ("TODO: fill in", "is still the TODO placeholder an importer wrote"),
], ids=["unknown", "stray-dollar", "blank", "todo"])
def test_template_problems(template: str, problem: str) -> None:
    """Each mistake gets a message that says what to change."""
    (found,) = template_problems(template)
    assert problem in found


def test_valid_template_has_no_problems() -> None:
    """Every placeholder together is fine."""
    assert template_problems(" ".join(f"${{{p}}}" for p in PLACEHOLDERS)) == []
