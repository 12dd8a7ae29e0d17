"""Pausing a target: by config, or by annotation on the target as KEDA users expect."""

from __future__ import annotations

import pytest

from autoscaler.config import TargetConfig, parse_config
from autoscaler.runtime.pause import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION, Pause, pause_of


def target(extra: str = "") -> TargetConfig:
    (found,) = parse_config(f"""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
maxReplicas = 10
{extra}
""").targets
    return found


@pytest.mark.parametrize(
    ("extra", "annotations", "expected"),
    [
        ("", {}, None),
        ("paused = true", {}, Pause(replicas=None, source="config paused")),
        ("pausedReplicas = 3", {PAUSED_ANNOTATION: "true"},
         Pause(replicas=3, source="config pausedReplicas")),
        ("", {PAUSED_ANNOTATION: "true"},
         Pause(replicas=None, source=f"annotation {PAUSED_ANNOTATION}")),
        ("", {PAUSED_ANNOTATION: "false"}, None),
        ("", {PAUSED_REPLICAS_ANNOTATION: "4"},
         Pause(replicas=4, source=f"annotation {PAUSED_REPLICAS_ANNOTATION}")),
        ("", {PAUSED_REPLICAS_ANNOTATION: "four"},
         Pause(replicas=None, source=f"annotation {PAUSED_REPLICAS_ANNOTATION}='four' is not "
               "a replica count: paused without holding")),
    ],
    ids=["none", "config", "config-wins", "annotation", "annotation-false", "hold-annotation",
         "unreadable-hold"],
)
def test_pause_of(extra: str, annotations: dict[str, str], expected: Pause | None) -> None:
    """Config first, then annotations; a mistyped count pauses rather than scales."""
    assert pause_of(target(extra), annotations) == expected
