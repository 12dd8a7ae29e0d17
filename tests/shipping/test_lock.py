"""The lock (requirements/*.txt) holds what pyproject.toml asks for, pinned and hash-checked,
and the image installs nothing else."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOCKS = {"daemon": (), "plot": ("plot",), "test": ("test", "plot")}
"""Each lock file and the extras it installs on top of the dependencies."""
PLOT_ONLY = ("matplotlib", "numpy", "pillow", "fonttools", "kiwisolver", "contourpy")


def entries(lock: str) -> dict[str, list[tuple[Version, list[str]]]]:
    """Package name -> its pinned versions (one per marker) and their hashes."""
    text = (ROOT / "requirements" / f"{lock}.txt").read_text().replace("\\\n", " ")
    found: dict[str, list[tuple[Version, list[str]]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pin = re.match(r"([A-Za-z0-9._-]+)==(\S+)", line)
        assert pin, f"requirements/{lock}.txt: not a pin: {line[:80]}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        found.setdefault(canonicalize_name(pin[1]), []).append((Version(pin[2]), hashes))
    return found


def wanted(extras: tuple[str, ...]) -> list[Requirement]:
    project = PROJECT["project"]
    texts = [*project["dependencies"], *PROJECT["build-system"]["requires"]]
    for extra in extras:
        texts += project["optional-dependencies"][extra]
    return [r for r in map(Requirement, texts) if r.name != project["name"]]


@pytest.mark.parametrize("lock", LOCKS)
def test_every_requirement_is_pinned_within_its_range(lock: str) -> None:
    """Each dependency (and the build backend) is in the lock at a version pyproject allows."""
    pinned = entries(lock)
    for requirement in wanted(LOCKS[lock]):
        versions = pinned.get(canonicalize_name(requirement.name))
        assert versions, f"requirements/{lock}.txt lacks {requirement}: run scripts/lock.sh"
        for version, _ in versions:
            assert version in requirement.specifier, f"{requirement.name} {version}"


@pytest.mark.parametrize("lock", LOCKS)
def test_every_pin_carries_hashes(lock: str) -> None:
    """pip --require-hashes installs only files whose sha256 the lock names."""
    for name, versions in entries(lock).items():
        for version, hashes in versions:
            assert hashes, f"requirements/{lock}.txt: {name}=={version} has no hash"


def test_the_daemon_set_leaves_out_the_plot() -> None:
    """matplotlib and what it pulls in are the plot extra's, not the daemon's."""
    assert not set(PLOT_ONLY) & set(entries("daemon"))
    assert set(PLOT_ONLY) <= set(entries("plot"))


def test_the_image_installs_the_lock_on_a_pinned_base() -> None:
    """Both stages start from one base pinned by digest; packages come from the lock only."""
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim-bookworm@sha256:", text, re.M)
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    installs = re.findall(r"pip install ([^\n\\]*)", text)
    assert installs == ["--require-hashes -r requirements/daemon.txt",
                        "--no-deps --no-build-isolation . "]
