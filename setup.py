"""Compile the algorithm core and the simulator's engine with mypyc, where a build can.

The compiled modules are the same typed sources, built into C extensions by mypyc (part of
mypy, a build requirement in pyproject.toml): decisions and simulations run ~2x faster (the
predictive week of issue #27: bench/predict_week.py). Everything else in pyproject.toml.

A build without a C compiler, or with AUTOSCALER_PURE_PYTHON=1, installs the pure-Python
modules instead: same behaviour, slower. A failed compile leaves no half of the extensions
behind (a module whose shared library is missing would not import).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

# What mypyc compiles: the pure core and the simulator's loop over it. The rest of the
# package (I/O, the daemon, commands) waits on the network, not on the CPU.
COMPILED = [
    "autoscaler/algorithm",
    "autoscaler/simulate/engine.py",
    "autoscaler/simulate/load.py",
    "autoscaler/simulate/trace.py",
    "autoscaler/simulate/workload.py",
]


class BuildOrFallBack(build_ext):
    """build_ext that, when any compiled module fails to build, removes every one it built
    and lets the install go on with the pure-Python sources."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # a missing compiler is an OSError or a DistutilsError
            for extension in self.extensions:
                for built in {self.get_ext_fullpath(extension.name),
                              self._inplace_path(extension.name)}:
                    Path(built).unlink(missing_ok=True)
            print(f"autoscaler: the mypyc-compiled core could not be built ({error}); "
                  "installing the pure-Python modules (same behaviour, ~2x slower "
                  "decisions and simulations)", file=sys.stderr)

    def _inplace_path(self, name: str) -> str:
        inplace, self.inplace = self.inplace, True
        try:
            return str(self.get_ext_fullpath(name))
        finally:
            self.inplace = inplace


def compiled_extensions() -> list[object]:
    if os.environ.get("AUTOSCALER_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("autoscaler: mypyc is not installed; installing the pure-Python modules",
              file=sys.stderr)
        return []
    return list(mypycify(COMPILED, opt_level="3", debug_level="1"))


setup(ext_modules=compiled_extensions(), cmdclass={"build_ext": BuildOrFallBack})
