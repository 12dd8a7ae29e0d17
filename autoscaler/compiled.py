"""Which build of the core runs: the mypyc-compiled modules, only if built from these sources.

Compiling the algorithm core and the simulator's loop with mypyc is opt-in
(``AUTOSCALER_COMPILE=1`` at install; setup.py, docs/architecture.md). A compiled module is a
C extension beside its ``.py`` source, and Python imports the extension first. So an
extension left behind by an earlier build (an editable install whose sources were edited
since, a site-packages file patched by hand) would run code that is no longer the source,
silently. ``choose_core``, run once when the package is first imported, prevents that: the
build writes the SHA-256 of every source it compiled into ``COMPILED_MANIFEST``, and the
extensions are used only if every one of them is listed there and every listed source still
has its hash. Otherwise every compiled module is imported from its source instead (all of
them: the compiled ones call each other's native classes directly, so a mix would not work),
and one line on stderr says so.

No third-party import here: setup.py loads this file on its own, before anything is installed.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

COMPILED = (
    "autoscaler/algorithm",
    "autoscaler/simulate/engine.py",
    "autoscaler/simulate/load.py",
    "autoscaler/simulate/rows.py",
    "autoscaler/simulate/trace.py",
    "autoscaler/simulate/workload.py",
)
"""What mypyc compiles, relative to the project root: the pure core and the simulator's loop
over it. The rest of the package waits on the network, not on the CPU."""

COMPILED_MANIFEST = "compiled-sources.json"
"""Written by the build beside this file: ``{"modules": {module: sha256 of its source}}``."""

PACKAGE = Path(__file__).parent


def module_name(source: Path, root: Path) -> str:
    """``autoscaler/algorithm/__init__.py`` -> ``autoscaler.algorithm``."""
    parts = source.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def compiled_sources(root: Path) -> list[Path]:
    """Every source file ``COMPILED`` names, under the project (or site-packages) ``root``."""
    sources: list[Path] = []
    for entry in COMPILED:
        path = root / entry
        sources.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return sources


def source_hash(source: Path) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


def manifest(root: Path) -> dict[str, dict[str, str]]:
    """The manifest a build writes after compiling the sources under ``root``."""
    return {"modules": {module_name(source, root): source_hash(source)
                        for source in compiled_sources(root)}}


@dataclass(frozen=True, slots=True)
class CoreBuild:
    """What ``choose_core`` found."""

    compiled: bool
    """The compiled modules are the ones imported."""
    stale: tuple[str, ...] = ()
    """Compiled modules that were found but not used, because they do not match their sources."""
    reason: str = ""

    def describe(self) -> str:
        if self.compiled:
            return "compiled (mypyc)"
        if self.stale:
            return f"pure Python (compiled modules set aside: {self.reason})"
        return "pure Python"


def extension_files(root: Path) -> dict[str, Path]:
    """Module name -> the extension file found for it, where ``COMPILED`` says to look."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    found: dict[str, Path] = {}
    for entry in COMPILED:
        path = root / entry
        if path.is_dir():
            candidates = [file for suffix in suffixes for file in path.rglob(f"*{suffix}")]
        else:
            candidates = [path.with_name(path.stem + suffix) for suffix in suffixes]
        for candidate in candidates:
            if candidate.exists():
                stem = candidate.name.split(".", 1)[0]
                found[module_name(candidate.with_name(stem + ".py"), root)] = candidate
    return found


def _stale_reason(root: Path, extensions: dict[str, Path]) -> str | None:
    """Why the extensions under ``root`` must not run, or None if they match their sources."""
    try:
        recorded = json.loads((root / "autoscaler" / COMPILED_MANIFEST).read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError):
        return "no record of the sources they were built from"
    unlisted = sorted(set(extensions) - set(recorded))
    if unlisted:
        return f"{unlisted[0]} was not built with the others"
    for module, digest in recorded.items():
        source = root / (module.replace(".", "/") + ".py")
        if not source.exists():
            source = source.with_suffix("") / "__init__.py"
        try:
            current = source_hash(source)
        except OSError:
            return f"{module}'s source is missing"
        if current != digest:
            return f"{source.relative_to(root)} changed since they were built"
    return None


class _SourcesFirst:
    """A meta path finder that imports the named modules from their ``.py`` sources."""

    def __init__(self, modules: Sequence[str]) -> None:
        self.modules = frozenset(modules)

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name not in self.modules:
            return None
        loaders = [(importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)]
        for entry in path if path is not None else sys.path:
            spec = importlib.machinery.FileFinder(entry, *loaders).find_spec(name, target)
            if spec is not None:
                return spec
        return None


def choose_core(root: Path = PACKAGE.parent) -> CoreBuild:
    """Use the compiled modules under ``root`` only if they match their sources (see above)."""
    extensions = extension_files(root)
    if not extensions:
        return CoreBuild(compiled=False)
    reason = _stale_reason(root, extensions)
    if reason is None:
        return CoreBuild(compiled=True)
    stale = tuple(sorted(extensions))
    sys.meta_path.insert(0, _SourcesFirst(stale))
    print(f"autoscaler: running the pure-Python core: the compiled modules in "
          f"{root / 'autoscaler'} do not match their sources ({reason}); rebuild with "
          f"AUTOSCALER_COMPILE=1, or reinstall without it to remove them", file=sys.stderr)
    return CoreBuild(compiled=False, stale=stale, reason=reason)
