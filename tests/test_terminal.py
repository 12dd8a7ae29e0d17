"""Text for a terminal: rows as aligned columns."""

from __future__ import annotations

import pytest

from autoscaler.terminal import columns


@pytest.mark.parametrize(
    ("gap", "text"),
    [("   ", "NAME    MIN\nweb     1\nbatch   10"), ("  ", "NAME   MIN\nweb    1\nbatch  10")],
    ids=["kubectl", "two-spaces"],
)
def test_columns_align_left_without_trailing_blanks(gap: str, text: str) -> None:
    """Each column as wide as its widest cell, ``gap`` apart; the last column not padded."""
    assert columns([("NAME", "MIN"), ("web", "1"), ("batch", "10")], gap=gap) == text
