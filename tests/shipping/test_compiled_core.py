"""setup.py compiles the algorithm core and the simulator with mypyc: the compiled modules
must be the ones running where a compiler was there to build them, must simulate exactly
what the pure-Python sources do, and a build without a compiler must install the pure core
rather than fail or ship half of the extensions."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "config" / "examples" / "simulate"


def compiled_paths() -> list[str]:
    """setup.py's COMPILED list, read from its source (running it would build)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILED":
            return [element.value for element in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError("setup.py has no COMPILED list")


def compiled_modules() -> list[str]:
    names = []
    for path in compiled_paths():
        found = ROOT / path
        files = sorted(found.rglob("*.py")) if found.is_dir() else [found]
        for file in files:
            parts = file.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def pure_copy(directory: Path) -> Path:
    """The package's sources alone (no built extension), with what a build reads."""
    shutil.copytree(ROOT / "autoscaler", directory / "autoscaler",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(ROOT / name, directory / name)
    return directory


PURE_BY_CHOICE = pytest.mark.skipif(
    os.environ.get("AUTOSCALER_PURE_PYTHON", "") not in ("", "0"),
    reason="AUTOSCALER_PURE_PYTHON is set: this install chose the pure core")
NO_COMPILER = pytest.mark.skipif(
    shutil.which("cc") is None or not Path(sysconfig.get_paths()["include"], "Python.h").exists(),
    reason="no C compiler or no Python headers: the pure core is the expected install here")


def native_values() -> list[tuple[str, ast.ClassDef]]:
    """(module, class) of every value type the compiled modules declare as a native class:
    ``@dataclass(init=False, ...)`` with its own ``__init__``."""
    found = []
    for name in compiled_modules():
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = path.with_suffix("") / "__init__.py"
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(d).startswith("dataclass(init=False") for d in node.decorator_list):
                found.append((name, node))
    return found


NATIVE_VALUES = native_values()


@pytest.mark.parametrize(("module", "cls"), NATIVE_VALUES,
                         ids=[f"{m}.{c.name}" for m, c in NATIVE_VALUES])
def test_a_native_value_takes_and_sets_exactly_its_fields(module: str, cls: ast.ClassDef) -> None:
    """A native value type spells its fields three times (declared, taken, set): all three
    agree, in order, so its repr, equality and ``dataclasses.replace`` see what it holds.
    Each field is Final (assigned only here) unless it needs ``field(compare=False)``."""
    decorator = next(d for d in cls.decorator_list if ast.unparse(d).startswith("dataclass"))
    assert ast.unparse(decorator) == "dataclass(init=False, slots=True, unsafe_hash=True)"
    fields = [s for s in cls.body if isinstance(s, ast.AnnAssign)]
    names = [f.target.id for f in fields]  # type: ignore[union-attr]
    init = next(s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__")
    assert [a.arg for a in init.args.args] == ["self"]
    assert init.args.vararg is None
    assert [a.arg for a in init.args.kwonlyargs] == names
    assert [ast.unparse(s) for s in init.body] == [f"self.{n} = {n}" for n in names]
    for declared, taken in zip(fields, init.args.kwonlyargs, strict=True):
        annotation = ast.unparse(declared.annotation)
        if declared.value is None:
            assert annotation == f"Final[{ast.unparse(taken.annotation)}]", declared.target
        else:
            assert ast.unparse(declared.value) == "field(compare=False)", declared.target
            assert annotation == ast.unparse(taken.annotation), declared.target


@PURE_BY_CHOICE
@NO_COMPILER
def test_native_values_are_native_in_the_compiled_build() -> None:
    """Compiled code builds a native class through its compiled ``__init__`` (no keyword
    dict, no bytecode): an added decorator mypyc does not know would quietly make one a
    Python class again, a quarter of the predictive week's run (docs/architecture.md)."""
    names = {f"{module}.{cls.name}" for module, cls in NATIVE_VALUES}
    assert {"autoscaler.algorithm.decision.Decision", "autoscaler.simulate.engine.Row"} <= names
    interpreted = [name for name in sorted(names) if inspect.isfunction(
        getattr(importlib.import_module(name.rpartition(".")[0]), name.rpartition(".")[2]).__init__)]
    assert not interpreted


@PURE_BY_CHOICE
@NO_COMPILER
def test_every_module_setup_compiles_is_the_compiled_one() -> None:
    """A build that quietly fell back to pure Python would pass every other test, twice slower
    (issue #27's 5 s for the predictive week needs the compiled core)."""
    modules = compiled_modules()
    assert "autoscaler.algorithm.decision" in modules
    assert "autoscaler.simulate.engine" in modules
    interpreted = [name for name in modules
                   if not str(importlib.import_module(name).__file__).endswith(".so")]
    assert not interpreted, f"not compiled: {interpreted}"


SIMULATE = """\
import sys
sys.path.insert(0, sys.argv[1])
import autoscaler.algorithm.decision, autoscaler.simulate.engine
print(autoscaler.algorithm.decision.__file__, autoscaler.simulate.engine.__file__)
from autoscaler.cli import main
sys.argv = ["autoscaler", "simulate", "--no-plot", "--config", sys.argv[2], "--workload",
            sys.argv[3], "--trace", sys.argv[4], "--out", sys.argv[5]]
main()
"""


def test_compiled_and_pure_simulate_the_same_three_days(tmp_path: Path) -> None:
    """Three days of the shipped week with prediction acting (a day of history, then the
    forecasts): the two builds write the same timeline and summary, byte for byte."""
    week = (EXAMPLES / "week.csv").read_text().splitlines(keepends=True)
    trace = tmp_path / "three-days.csv"
    trace.write_text("".join(week[:1 + 3 * 24 * 60]))
    pure = pure_copy(tmp_path / "pure")
    outputs = {}
    for label, source in (("checkout", ROOT), ("pure", pure)):
        out = tmp_path / f"out-{label}"
        ran = subprocess.run(
            [sys.executable, "-c", SIMULATE, str(source), str(EXAMPLES / "web-predictive.toml"),
             str(EXAMPLES / "workload.toml"), str(trace), str(out)],
            capture_output=True, text=True, timeout=90, cwd=tmp_path, check=False)
        assert ran.returncode == 0, ran.stderr
        modules = ran.stdout.splitlines()[0].split()
        assert all(Path(module).is_relative_to(source) for module in modules), modules
        if label == "pure":
            assert all(module.endswith(".py") for module in modules), modules
        outputs[label] = {name: (out / name).read_bytes()
                          for name in ("timeline.csv", "timeline.json", "summary.json")}
    assert b"forecast" in outputs["pure"]["timeline.csv"].split(b"\n")[0]
    for name, pure_bytes in outputs["pure"].items():
        assert outputs["checkout"][name] == pure_bytes, f"{name} differs"


def build_wheel(source: Path, out: Path, **environment: str) -> tuple[list[str], str]:
    """The wheel's file names and the build's output, built as scripts/install.sh builds."""
    ran = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, **environment})
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist(), ran.stdout + ran.stderr


@pytest.mark.timeout(300)
def test_a_build_without_a_compiler_installs_the_pure_core(tmp_path: Path) -> None:
    names, output = build_wheel(pure_copy(tmp_path / "source"), tmp_path / "wheel",
                                CC="false")
    assert "the mypyc-compiled core could not be built" in output
    assert not [name for name in names if name.endswith(".so")], names
    assert "autoscaler/algorithm/decision.py" in names
    assert "autoscaler/simulate/engine.py" in names


def test_autoscaler_pure_python_skips_the_compile(tmp_path: Path) -> None:
    names, _ = build_wheel(pure_copy(tmp_path / "source"), tmp_path / "wheel",
                           AUTOSCALER_PURE_PYTHON="1")
    assert not [name for name in names if name.endswith(".so")], names
    assert "autoscaler/algorithm/decision.py" in names


def test_the_suite_refuses_an_extension_older_than_its_source(tmp_path: Path) -> None:
    """tests/conftest.py stops the session before a test runs an old build of edited code."""
    from tests.conftest import stale_extensions

    package = tmp_path / "autoscaler"
    (package / "algorithm").mkdir(parents=True)
    fresh, edited = package / "algorithm" / "fresh.py", package / "algorithm" / "edited.py"
    for source in (fresh, edited):
        source.write_text("")
        built = source.with_name(f"{source.stem}.cpython-311-x86_64-linux-gnu.so")
        built.write_bytes(b"")
        os.utime(built, (1_000_000, 1_000_000) if source is edited else None)
    (package / "removed.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert stale_extensions(package) == [
        "autoscaler/algorithm/edited.cpython-311-x86_64-linux-gnu.so",
        "autoscaler/removed.cpython-311-x86_64-linux-gnu.so"]
