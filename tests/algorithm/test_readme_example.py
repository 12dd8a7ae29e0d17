"""The README's "algorithm core as a library" example, run as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

README = Path(__file__).parents[2] / "README.md"


def test_the_library_example_decides_what_its_comments_say() -> None:
    """The block runs verbatim and decides 6 replicas (90 % of request against a 50 % target);
    the history it keeps holds that recommendation (without ``behavior`` upstream records no
    scale events)."""
    section = README.read_text().split("## The algorithm core as a library", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["decision"].desired_replicas == 6
    # Upstream records the current count at its first sight of a target, then the proposal.
    assert [r.replicas for r in namespace["history"].recommendations] == [3, 6]
