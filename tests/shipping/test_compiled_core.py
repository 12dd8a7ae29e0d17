"""One behaviour, whatever the build: the core and the simulator run as pure Python by default
and compiled by mypyc on request (``AUTOSCALER_COMPILE=1``). These tests hold in both builds;
scripts/test.sh runs them, with the core's and the simulator's suites, against each (the
compiled build where a C compiler is). The tests marked ``compiled_only`` check what only a
compiled build has, and say so when skipped."""

from __future__ import annotations

import ast
import collections.abc
import dataclasses
import enum
import importlib
import inspect
import os
import pkgutil
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

import autoscaler
import autoscaler.config
from autoscaler.compiled import COMPILED, compiled_sources, module_name
from autoscaler.record import is_native_value

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "config" / "examples" / "simulate"

COMPILED_ONLY = pytest.mark.skipif(
    not autoscaler.CORE.compiled,
    reason="this run tests the pure-Python build; scripts/test.sh runs these tests again "
           "against the compiled build where a C compiler is (AUTOSCALER_COMPILE=1)")


def compiled_modules() -> list[str]:
    return [module_name(source, ROOT) for source in compiled_sources(ROOT)]


def native_values() -> list[tuple[str, ast.ClassDef]]:
    """(module, class) of every value type the compiled modules declare as a native class:
    ``@dataclass(init=False, ...)`` with its own ``__init__``."""
    found = []
    for source in compiled_sources(ROOT):
        for node in ast.parse(source.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(d).startswith("dataclass(init=False") for d in node.decorator_list):
                found.append((module_name(source, ROOT), node))
    return found


NATIVE_VALUES = native_values()


def value_types() -> list[type]:
    """Every native value type and every ``@record`` of the package, imported."""
    found: list[type] = []
    for info in pkgutil.walk_packages(autoscaler.__path__, "autoscaler."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for candidate in vars(module).values():
            if not isinstance(candidate, type) or candidate.__module__ != info.name:
                continue
            if is_native_value(candidate, info.name) or (
                    dataclasses.is_dataclass(candidate)
                    and vars(candidate).get("__setattr__") is not None
                    and vars(candidate)["__setattr__"].__name__ == "_refuse_setattr"):
                found.append(candidate)
    return found


VALUE_TYPES = value_types()


@pytest.mark.parametrize(("module", "cls"), NATIVE_VALUES,
                         ids=[f"{m}.{c.name}" for m, c in NATIVE_VALUES])
def test_a_native_value_takes_and_sets_exactly_its_fields(module: str, cls: ast.ClassDef) -> None:
    """A native value type spells its fields three times (declared, taken, set): all three
    agree, in order, so its repr, equality and ``dataclasses.replace`` see what it holds.
    Each field is Final (assigned only here) unless it needs ``field(compare=False)``, and a
    class with such a field refuses assignment in its own ``__setattr__`` and ``__delattr__``
    (what makes the compiled class refuse it too)."""
    decorator = next(d for d in cls.decorator_list if ast.unparse(d).startswith("dataclass"))
    assert ast.unparse(decorator) == "dataclass(init=False, slots=True, unsafe_hash=True)"
    fields = [s for s in cls.body if isinstance(s, ast.AnnAssign)]
    names = [f.target.id for f in fields]  # type: ignore[union-attr]
    methods = {s.name: s for s in cls.body if isinstance(s, ast.FunctionDef)}
    init = methods["__init__"]
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
    not_final = any(declared.value is not None for declared in fields)
    for refusal in ("__setattr__", "__delattr__"):
        assert (refusal in methods) == not_final, refusal
        if not_final:
            assert ast.unparse(methods[refusal].body[0]) == "refuse_assignment(self, name)"


def test_every_module_with_native_values_seals_them() -> None:
    """Pure Python, a native value type is immutable only once ``seal_values(globals())``,
    the last statement of its module, has run."""
    modules = {module for module, _ in NATIVE_VALUES}
    assert {"autoscaler.algorithm.decision_values", "autoscaler.simulate.rows"} <= modules
    for module in modules:
        source = ROOT / (module.replace(".", "/") + ".py")
        last = ast.parse(source.read_text()).body[-1]
        assert ast.unparse(last) == "seal_values(globals())", module


def test_every_value_type_is_found() -> None:
    """The next test covers every native value type and the ``@record`` types."""
    found = {f"{cls.__module__}.{cls.__qualname__}" for cls in VALUE_TYPES}
    assert {f"{module}.{cls.name}" for module, cls in NATIVE_VALUES} <= found
    assert "autoscaler.algorithm.model.AlgorithmSettings" in found  # a @record
    assert "autoscaler.runtime.ports.MetricsWanted" in found  # a @record outside the core


def annotations_of(cls: type) -> dict[str, object]:
    """Each field's annotation as written in the class's source, evaluated there (a compiled
    class keeps only crude ones at run time)."""
    module = sys.modules[cls.__module__]
    source = ROOT / (cls.__module__.replace(".", "/") + ".py")
    if not source.exists():
        source = source.with_suffix("") / "__init__.py"
    tree = ast.parse(source.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    namespace = {**vars(typing), **vars(autoscaler.config),
                 **{value.__name__: value for value in VALUE_TYPES}, **vars(module)}
    return {statement.target.id: eval(ast.unparse(statement.annotation), namespace)
            for statement in node.body if isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)}


def sample(annotation: object) -> object:  # noqa: PLR0911
    """Some value of the type ``annotation`` (a compiled class checks its arguments' types)."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Final:
        return sample(arguments[0])
    if origin in (types.UnionType, typing.Union):
        return None if type(None) in arguments else sample(arguments[0])
    if origin is typing.Literal:
        return arguments[0]
    plain = origin or annotation
    if hasattr(plain, "__supertype__"):  # a NewType
        return sample(plain.__supertype__)
    if isinstance(plain, type) and issubclass(plain, enum.Enum):
        return next(iter(plain))
    if isinstance(plain, type) and dataclasses.is_dataclass(plain):
        return build(plain)
    empty = {tuple: (), collections.abc.Sequence: (), frozenset: frozenset(), list: [],
             dict: {}, collections.abc.Mapping: {}, int: 0, float: 0.0, str: "", bool: False}
    return empty.get(plain, object())  # type: ignore[call-overload]


def build(cls: type) -> object:
    """An instance of the value type ``cls`` built through its own ``__init__``."""
    annotations = annotations_of(cls)
    return cls(**{field.name: sample(annotations[field.name])
                  for field in dataclasses.fields(cls) if field.init or not field.default})


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_field_of_a_value_type_refuses_assignment(cls: type) -> None:
    """The same in both builds: assigning or deleting any field of a value type raises
    (compiled, the class refuses it by itself; pure, ``record``'s ``seal`` makes it refuse)."""
    value = build(cls)
    for field in dataclasses.fields(cls):
        with pytest.raises(AttributeError):
            setattr(value, field.name, None)
        with pytest.raises(AttributeError):
            delattr(value, field.name)


def test_a_value_refuses_assignment_and_replace_makes_a_changed_copy() -> None:
    from autoscaler.algorithm import Decision

    decision = Decision(current_replicas=2, desired_replicas=3, proposed_by="pods metric rps")
    for name in ("desired_replicas", "proposed_by"):  # a Final field, and one that is not
        with pytest.raises(AttributeError):
            setattr(decision, name, 4)
    assert (decision.desired_replicas, decision.proposed_by) == (3, "pods metric rps")
    changed = dataclasses.replace(decision, desired_replicas=4)
    assert (changed.desired_replicas, changed.proposed_by) == (4, "pods metric rps")
    assert changed != decision
    assert dataclasses.replace(decision, proposed_by="other") == decision  # compare=False


@COMPILED_ONLY
def test_native_values_are_native_in_the_compiled_build() -> None:
    """Compiled code builds a native class through its compiled ``__init__`` (no keyword
    dict, no bytecode): an added decorator mypyc does not know would quietly make one a
    Python class again, a quarter of the predictive week's run (docs/architecture.md)."""
    names = {f"{module}.{cls.name}" for module, cls in NATIVE_VALUES}
    interpreted = [name for name in sorted(names) if inspect.isfunction(
        getattr(importlib.import_module(name.rpartition(".")[0]), name.rpartition(".")[2]).__init__)]
    assert not interpreted


@COMPILED_ONLY
def test_every_module_the_build_compiles_is_the_compiled_one() -> None:
    """A build that quietly fell back to pure Python would pass every other test, slower."""
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


def pure_copy(directory: Path) -> Path:
    """The package's sources alone (no built extension)."""
    shutil.copytree(ROOT / "autoscaler", directory / "autoscaler",
                    ignore=shutil.ignore_patterns("*.so", "compiled-sources.json", "__pycache__"))
    return directory


@COMPILED_ONLY
def test_compiled_and_pure_simulate_the_same_three_days(tmp_path: Path) -> None:
    """Three days of the shipped week with prediction acting (a day of history, then the
    forecasts): the two builds write the same timeline and summary, byte for byte."""
    week = (EXAMPLES / "week.csv").read_text().splitlines(keepends=True)
    trace = tmp_path / "three-days.csv"
    trace.write_text("".join(week[:1 + 3 * 24 * 60]))
    pure = pure_copy(tmp_path / "pure")
    outputs = {}
    for label, source in (("compiled", ROOT), ("pure", pure)):
        out = tmp_path / f"out-{label}"
        ran = subprocess.run(
            [sys.executable, "-c", SIMULATE, str(source), str(EXAMPLES / "web-predictive.toml"),
             str(EXAMPLES / "workload.toml"), str(trace), str(out)],
            capture_output=True, text=True, timeout=90, cwd=tmp_path, check=False)
        assert ran.returncode == 0, ran.stderr
        modules = ran.stdout.splitlines()[0].split()
        assert all(Path(module).is_relative_to(source) for module in modules), modules
        assert all(module.endswith(".py" if label == "pure" else ".so") for module in modules)
        outputs[label] = {name: (out / name).read_bytes()
                          for name in ("timeline.csv", "timeline.json", "summary.json")}
    assert b"forecast" in outputs["pure"]["timeline.csv"].split(b"\n")[0]
    for name, pure_bytes in outputs["pure"].items():
        assert outputs["compiled"][name] == pure_bytes, f"{name} differs"


WHICH = "import autoscaler.algorithm.decision as d, autoscaler; print(d.__file__, autoscaler.CORE.compiled)"


@COMPILED_ONLY
def test_a_compiled_module_never_runs_after_its_source_changed(tmp_path: Path) -> None:
    """An editable install's extensions, built before a source was edited: the package imports
    every compiled module from its source instead, and says so in one line."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "autoscaler", copy / "autoscaler",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for group_library in ROOT.glob("autoscaler_core__mypyc*"):
        shutil.copy(group_library, copy)

    def which() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", WHICH], capture_output=True, text=True,
                              timeout=60, cwd=copy, check=False,
                              env={**os.environ, "PYTHONPATH": str(copy)})

    before = which()
    assert before.returncode == 0, before.stderr
    assert before.stdout.split()[1] == "True"
    assert before.stderr == ""
    edited = copy / "autoscaler" / "algorithm" / "behavior.py"
    edited.write_text(edited.read_text() + "\n# an edit after the build\n")
    after = which()
    assert after.returncode == 0, after.stderr
    module, is_compiled = after.stdout.split()
    assert (module.endswith("decision.py"), is_compiled) == (True, "False")
    (line,) = after.stderr.splitlines()
    assert line.startswith("autoscaler: running the pure-Python core"), line
    assert "autoscaler/algorithm/behavior.py changed since they were built" in line


def test_the_compiled_list_names_existing_sources() -> None:
    """``COMPILED`` (what setup.py hands mypyc) names files and packages that exist."""
    for entry in COMPILED:
        assert (ROOT / entry).exists(), entry
    assert len(compiled_modules()) > 20
