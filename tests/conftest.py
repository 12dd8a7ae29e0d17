"""The suite tests the code in this checkout, in the build of the core that runs here.

Importing ``autoscaler`` decides whether the mypyc-compiled modules run (only if they were
built from these very sources: ``autoscaler/compiled.py``). The session's header says which
build it tests; scripts/test.sh sets ``AUTOSCALER_EXPECT_CORE`` for its run against the
compiled build, so that a build that quietly fell back to pure Python fails at once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import autoscaler

CHECKOUT = Path(__file__).parents[1]


def pytest_report_header() -> str:
    return f"autoscaler core: {autoscaler.CORE.describe()}, from {Path(autoscaler.__file__).parent}"


def pytest_sessionstart(session: pytest.Session) -> None:
    if Path(autoscaler.__file__).parent != CHECKOUT / "autoscaler":
        pytest.exit(f"the suite imported autoscaler from {autoscaler.__file__}, not from this "
                    f"checkout ({CHECKOUT})", returncode=4)
    expected = os.environ.get("AUTOSCALER_EXPECT_CORE", "")
    if expected and expected != ("compiled" if autoscaler.CORE.compiled else "pure"):
        pytest.exit(f"AUTOSCALER_EXPECT_CORE={expected}, but the core here is "
                    f"{autoscaler.CORE.describe()}", returncode=4)
