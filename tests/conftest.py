"""The suite tests the code in this checkout. setup.py compiles the core with mypyc into
extension modules beside the sources (an editable install builds them in place), and Python
imports an extension before its .py: a source edited after the build would go untested."""

from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "autoscaler"


def stale_extensions(package: Path = PACKAGE) -> list[str]:
    """Each compiled module whose source is newer than it, or gone."""
    stale = []
    for built in sorted(package.rglob("*.so")):
        source = built.with_name(built.name.split(".", 1)[0] + ".py")
        if not source.exists() or source.stat().st_mtime > built.stat().st_mtime:
            stale.append(str(built.relative_to(package.parent)))
    return stale


def pytest_sessionstart(session: pytest.Session) -> None:
    stale = stale_extensions()
    if stale:
        pytest.exit(f"{len(stale)} compiled module(s) older than their source, e.g. {stale[0]}: "
                    "rebuild them (bash scripts/install.sh .venv test --editable) or delete "
                    "autoscaler/**/*.so to test the pure-Python core", returncode=4)
