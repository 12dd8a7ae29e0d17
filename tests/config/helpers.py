"""Small builders shared by the config tests."""

from __future__ import annotations

from autoscaler.config import ConfigError, ConfigIssue, parse_config

TARGET = """\
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = 10
"""
"""A valid target on lines 1-4; tests append keys or whole tables after it."""


def issues_of(text: str) -> tuple[ConfigIssue, ...]:
    """The issues ``parse_config`` raises for ``text`` (fails the test if it raises none)."""
    try:
        parse_config(text, source="test.toml")
    except ConfigError as error:
        return error.issues
    raise AssertionError("the config was accepted")
