"""A target's generation: it moves when a value of its merged table does, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.config import parse_config

EXAMPLES = Path(__file__).parents[2] / "config" / "examples"
TARGET = """
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "{name}" }}
maxReplicas = {max}
"""


def generations(text: str) -> dict[str, str]:
    return {t.key: t.generation for t in parse_config(text).targets}


def two(web_max: int = 5, api_max: int = 5, head: str = "") -> dict[str, str]:
    return generations(head + TARGET.format(name="web", max=web_max)
                       + TARGET.format(name="api", max=api_max))


def test_a_target_has_a_generation_that_names_its_table() -> None:
    """Twelve hex digits, one per table: two targets differ."""
    found = two()
    assert all(len(g) == 12 and int(g, 16) >= 0 for g in found.values())
    assert found["shop/Deployment/web"] != found["shop/Deployment/api"]


def test_an_edit_moves_only_the_edited_target_s_generation() -> None:
    """maxReplicas 5 -> 6 on web: web's generation moves, api's stays."""
    before, after = two(), two(web_max=6)
    assert after["shop/Deployment/web"] != before["shop/Deployment/web"]
    assert after["shop/Deployment/api"] == before["shop/Deployment/api"]


@pytest.mark.parametrize("rewritten", [
    "# a comment\n" + TARGET.format(name="web", max=5).replace("maxReplicas = 5",
                                                                "maxReplicas   =   5  # ok"),
    "\n[[autoscaler]]\nmaxReplicas = 5\nnamespace = \"shop\"\nscaleTargetRef = { name = \"web\", "
    "kind = \"Deployment\", apiVersion = \"apps/v1\" }\n",
], ids=["comments-and-spacing", "keys-reordered"])
def test_the_same_values_written_otherwise_keep_the_generation(rewritten: str) -> None:
    """A reformatted file is not a change: no pass is due for it, nothing is stale."""
    assert generations(rewritten) == generations(TARGET.format(name="web", max=5))


def test_a_defaults_change_moves_the_generation_of_the_targets_it_reaches() -> None:
    """[defaults] minReplicas 1 -> 2: both targets read it, both move; a default that a
    target overrides does not move that target's."""
    base = two(head="[defaults]\nminReplicas = 1\n")
    raised = two(head="[defaults]\nminReplicas = 2\n")
    assert all(raised[k] != base[k] for k in base)
    own = TARGET.format(name="web", max=5) + "minReplicas = 3\n"
    assert generations("[defaults]\nminReplicas = 1\n" + own) == generations(
        "[defaults]\nminReplicas = 2\n" + own)


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.stem)
def test_the_same_file_read_twice_is_the_same_targets(example: Path) -> None:
    """A reload of an unchanged file changes no target (so the scheduler runs none early):
    every part of a TargetConfig compares by value, schedules and servers included."""
    first, second = (parse_config(example.read_bytes()).targets for _ in range(2))
    assert first == second
    assert [t.generation for t in first] == [t.generation for t in second]
