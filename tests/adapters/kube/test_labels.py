"""Label-selector strings as a scale's status.selector carries them, both ways."""

import pytest

from autoscaler.adapters.kube.labels import format_label_selector, parse_selector
from autoscaler.errors import BadDataError

LABELS = {"app": "web", "tier": "front", "track": "stable"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=api", False),
        ("app!=api", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app in (web,api)", True),
        ("app in (api, db)", False),
        ("app notin (api,db)", True),
        ("missing notin (x)", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!tier", False),
        ("app=web,tier in (front, back),!canary", True),
        ("app=web,track=canary", False),
        ("example.com/part-of!=x", True),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else str(v),
)
def test_selector_matches(selector: str, matches: bool) -> None:
    """Each operator matches as upstream's labels.Requirement does."""
    assert parse_selector(selector).matches(LABELS) is matches


def test_empty_value() -> None:
    """``app=`` is legal and matches only an empty value."""
    selector = parse_selector("app=")
    assert selector.matches({"app": ""})
    assert not selector.matches({"app": "web"})


@pytest.mark.parametrize("selector", ["app in web", "=web", "a b", "app>3"],
                         ids=["set-without-parens", "no-key", "space", "gt"])
def test_malformed_selector(selector: str) -> None:
    """A selector the grammar does not cover is a BadDataError naming the selector."""
    with pytest.raises(BadDataError, match="label selector"):
        parse_selector(selector)


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (None, ""),
        ({}, ""),
        ({"matchLabels": {"tier": "front", "app": "web"}}, "app=web,tier=front"),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]}]},
         "zone in (a,b)"),
        ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]},
                               {"key": "canary", "operator": "DoesNotExist"},
                               {"key": "app", "operator": "Exists"}]},
         "app,!canary,env notin (dev)"),
        ({"matchLabels": {"app": "web"},
          "matchExpressions": [{"key": "app", "operator": "Exists"}]}, "app=web,app"),
    ],
    ids=["null", "empty", "labels-sorted", "in-values-sorted", "by-key", "label-first-on-tie"],
)
def test_format_label_selector(selector: dict[str, object] | None, text: str) -> None:
    """A spec.selector prints as upstream's scale does: sorted by key, values sorted."""
    assert format_label_selector(selector) == text
    assert parse_selector(text).text == text


def test_format_unknown_operator() -> None:
    """An operator upstream does not know is a BadDataError naming it."""
    with pytest.raises(BadDataError, match="'Near'"):
        format_label_selector({"matchExpressions": [{"key": "a", "operator": "Near"}]})
