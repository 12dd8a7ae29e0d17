"""The install tests' offline package source: a wheelhouse of the locked packages that
scripts/test.sh downloads (bench/install_matrix.py says how), so no test needs a network."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import install_matrix

__all__ = ["install_matrix", "wheelhouse_or_skip"]


def wheelhouse_or_skip() -> Path:
    """The wheelhouse; without one, a failure in CI and a loud skip elsewhere."""
    wheelhouse = install_matrix.WHEELHOUSE
    if not any(wheelhouse.glob("setuptools-*.whl")):
        message = (f"no wheelhouse of the locked packages at {wheelhouse}: scripts/test.sh "
                   "downloads it (the install tests run offline)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return wheelhouse
