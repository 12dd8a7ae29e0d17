"""The package's build backend: setuptools', and mypy too when the core is to be compiled.

``AUTOSCALER_COMPILE=1`` in the environment of an install or build asks setup.py to compile
the algorithm core and the simulator's loop with mypyc (docs/architecture.md, "Compiled or
pure"). Only then does the build need mypy, so only then is it a build requirement: every
other build, isolated or not, needs setuptools alone and nothing else to download.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403  (the rest of the PEP 517 and 660 hooks)

COMPILE_REQUIREMENTS = ["mypy>=2.4"]


def compile_requested() -> bool:
    """Whether this build was asked to compile the core (``AUTOSCALER_COMPILE=1``)."""
    return os.environ.get("AUTOSCALER_COMPILE", "").strip().lower() in ("1", "true", "yes")


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    requires: list[str] = build_meta.get_requires_for_build_wheel(config_settings)
    return requires + (COMPILE_REQUIREMENTS if compile_requested() else [])


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    requires: list[str] = build_meta.get_requires_for_build_editable(config_settings)
    return requires + (COMPILE_REQUIREMENTS if compile_requested() else [])
