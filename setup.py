"""Build the package: pure Python, or with ``AUTOSCALER_COMPILE=1`` its core compiled by mypyc.

Everything else about the package is in pyproject.toml. Compiling is opt-in (as for mypy
and black, which also compile themselves with mypyc): it takes minutes on two cores and
needs a C compiler and the Python headers, while the pure-Python modules behave the same
(docs/architecture.md, "Compiled or pure", gives what each costs).

Asked to compile, the build tries, and any failure on the way (mypy missing, its type check,
no compiler, a missing header, a failed link) ends in the pure-Python install, with one line
on stderr saying why, and no extension left behind. A compiled build writes the hash of each
source it compiled beside the modules (``autoscaler/compiled.py`` uses only extensions that
match their sources).

Nothing here runs while a frontend only asks for the build requirements or the metadata:
mypyc runs inside ``build_ext``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _load(name: str, path: Path) -> ModuleType:
    """A module of this project by its path: the package itself cannot be imported here
    (its dependencies are not installed in a build environment)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


backend = _load("autoscaler_backend", ROOT / "build_backend" / "autoscaler_backend.py")
compiled = _load("autoscaler_compiled", ROOT / "autoscaler" / "compiled.py")


def say(message: str) -> None:
    print(f"autoscaler: {message}", file=sys.stderr, flush=True)


def first_line(error: BaseException, limit: int = 200) -> str:
    """An error as one short line (a compiler's error carries its whole command line)."""
    text = (str(error).splitlines() or [""])[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CompilingDistribution(Distribution):
    """A distribution with extension modules exactly when asked to compile, so that only
    then is the wheel tagged for this platform and build_ext run at all."""

    def has_ext_modules(self) -> bool:
        return backend.compile_requested() or super().has_ext_modules()


class BuildPurePython(build_py):
    """build_py that, in a build not asked to compile, first removes what an earlier compiled
    build left where this one puts the package: the build directory (a build in the checkout
    keeps it), or for an editable install the checkout itself. So a pure build never ships,
    nor leaves in place, an extension."""

    def run(self) -> None:
        if not backend.compile_requested():
            remove_compiled(ROOT if self.editable_mode else Path(self.build_lib))
        super().run()


def remove_compiled(root: Path) -> None:
    """Every extension module, manifest and group library a compiled build left under root."""
    leftovers = [*compiled.extension_files(root).values(),
                 root / "autoscaler" / compiled.COMPILED_MANIFEST,
                 *root.glob("autoscaler_core__mypyc*")]
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)


class BuildCore(build_ext):
    """build_ext that compiles the core with mypyc, and on any failure builds nothing."""

    def _mypyc_extensions(self) -> list[Extension]:
        try:
            from mypyc.build import mypycify
        except ImportError:
            self._fall_back("mypy (which brings mypyc) is not installed where the build runs")
            return []
        try:
            return list(mypycify(list(compiled.COMPILED), opt_level="3", debug_level="1",
                                 group_name="autoscaler_core"))
        except SystemExit as error:  # mypyc exits on a type error, printed above
            self._fall_back(f"mypyc stopped (exit status {error.code}): see its errors above")
        except Exception as error:
            self._fall_back(f"mypyc failed: {type(error).__name__}: {first_line(error)}")
        return []

    # Options a frontend sets on build_ext, carried to the command that compiles.
    CARRIED = ("inplace", "editable_mode", "build_lib", "build_temp", "plat_name", "force",
               "debug", "parallel", "compiler")

    def run(self) -> None:
        if not self.extensions:
            if backend.compile_requested():
                self._compile()
            return
        try:
            super().run()
        except Exception as error:  # no compiler (OSError, DistutilsExecError), a header...
            self._remove_built()
            self._fall_back(f"compiling failed: {type(error).__name__}: {first_line(error)}")
            return
        self._write_manifest()
        say(f"compiled the core with mypyc ({len(self.extensions)} extension modules)")

    def _compile(self) -> None:
        """mypyc runs here, when the build runs, not while the command's options are set:
        a frontend finalizes build_ext when it only asks for the requirements or metadata
        (egg_info lists the extensions' sources). The extensions it makes are built by a
        fresh build_ext, finalized with them as setuptools expects."""
        extensions = self._mypyc_extensions()
        if not extensions:
            return
        self.distribution.ext_modules = extensions
        builder = type(self)(self.distribution)
        for option in self.CARRIED:
            setattr(builder, option, getattr(self, option))
        builder.ensure_finalized()
        builder.run()

    def _package_dir(self) -> Path:
        return ROOT if self.inplace else Path(self.build_lib)

    def _write_manifest(self) -> None:
        path = self._package_dir() / "autoscaler" / compiled.COMPILED_MANIFEST
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(compiled.manifest(ROOT), indent=1, sort_keys=True) + "\n")

    def get_outputs(self) -> list[str]:
        outputs: list[str] = super().get_outputs()
        if self.extensions:
            outputs.append(str(self._package_dir() / "autoscaler" / compiled.COMPILED_MANIFEST))
        return outputs

    def _remove_built(self) -> None:
        """A module whose shared library is missing would not import: leave none of them."""
        for extension in self.extensions:
            for inplace in (False, True):
                saved, self.inplace = self.inplace, inplace
                try:
                    Path(self.get_ext_fullpath(extension.name)).unlink(missing_ok=True)
                finally:
                    self.inplace = saved
        self.extensions = []
        self.distribution.ext_modules = []

    def _fall_back(self, why: str) -> None:
        say(f"the compiled core could not be built ({why}); installing the pure-Python "
            "core instead (same behaviour, slower decisions and simulations)")


setup(distclass=CompilingDistribution,
      cmdclass={"build_py": BuildPurePython, "build_ext": BuildCore})
