"""Immutable value types that are as cheap to build as plain slotted dataclasses, in both builds.

A ``dataclass(frozen=True)`` guards its fields by setting each one in ``__init__`` through
``object.__setattr__``, which makes building one 2-3x slower than a plain slotted dataclass. A
reconcile pass over 1,000 targets builds ~36,000 of the core's values (pod samples, proposals,
conditions, recommendations), so that guard is a visible part of a pass
(bench/daemon_scale.py). The types here refuse assignment just as surely, at a lower price:
their ``__init__`` sets each slot through the slot's own descriptor, and ``__setattr__`` and
``__delattr__`` refuse everything (``dataclasses.FrozenInstanceError``, as a frozen dataclass
raises). mypy (strict, in CI) rejects an assignment before it runs, as for a frozen dataclass;
``dataclasses.replace`` makes changed copies.

Two kinds, one behaviour:

- ``@record``: a slotted, hashable, keyword-only dataclass, immutable as above. For value
  types in modules that are never compiled, and types built once.
- **Native value types**, for the values the core and the simulator make every pass, in
  modules of values alone (``algorithm.model``, ``decision_values``, ``stage_values``,
  ``zero_values``, ``simulate.rows``), all of which mypyc may compile
  (``autoscaler.compiled``). mypyc makes native only the classes it sees decorated with
  ``dataclasses.dataclass`` itself, and
  compiles their ``__init__`` only if it is written out. So each is ``@dataclass(init=False,
  slots=True, unsafe_hash=True)``, declares its fields ``Final[...]`` and sets them in a
  keyword-only ``__init__`` of its own; a field that needs ``field(compare=False)`` cannot be
  ``Final`` (mypy counts the ``field()`` as its one assignment), so a class with one also
  defines ``__setattr__`` (calling ``refuse_assignment``). Compiled, the class refuses any
  assignment by itself (mypyc's ``__init__`` sets the slots directly, past ``__setattr__``);
  pure Python, ``seal_values(globals())`` at the end of the module gives the class the same
  slot-setting ``__init__`` and refusals as a ``@record``. tests/shipping/test_compiled_core.py
  checks each type's fields, parameters and assignments agree, and that every field of every
  value type refuses assignment, in whichever build runs.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from types import FunctionType
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


def refuse_assignment(value: object, name: str) -> None:
    """What assigning or deleting a field of a value type does."""
    raise dataclasses.FrozenInstanceError(
        f"cannot assign to field {name!r}: {type(value).__name__} is immutable "
        "(make a changed copy with dataclasses.replace)")


def _refuse_setattr(self: object, name: str, value: object) -> None:
    refuse_assignment(self, name)


def _refuse_delattr(self: object, name: str) -> None:
    refuse_assignment(self, name)


_FACTORY = object()
"""The default of a parameter whose field has a ``default_factory``."""


def _slot_init(cls: type, parameters: Sequence[inspect.Parameter],
               factories: Mapping[str, Callable[[], object]]) -> Callable[..., None]:
    """An ``__init__`` with ``parameters`` that sets each slot of ``cls`` through its
    descriptor (so past ``__setattr__``), as dataclasses writes its own ``__init__``."""
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    signature, body, keyword_only = ["self"], [], False
    for parameter in parameters:
        name = parameter.name
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and not keyword_only:
            signature.append("*")
            keyword_only = True
        namespace[f"_set_{name}"] = cls.__dict__[name].__set__
        if name in factories:
            namespace[f"_factory_{name}"] = factories[name]
            signature.append(f"{name}=_FACTORY")
            body.append(f"_set_{name}(self, _factory_{name}() if {name} is _FACTORY else {name})")
        elif parameter.default is not inspect.Parameter.empty:
            namespace[f"_default_{name}"] = parameter.default
            signature.append(f"{name}=_default_{name}")
            body.append(f"_set_{name}(self, {name})")
        else:
            signature.append(name)
            body.append(f"_set_{name}(self, {name})")
    lines = "\n".join(f"    {line}" for line in body) or "    pass"
    exec(f"def __init__({', '.join(signature)}):\n{lines}\n", namespace)  # noqa: S102
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def _seal(cls: type[T], parameters: Sequence[inspect.Parameter],
          factories: Mapping[str, Callable[[], object]]) -> type[T]:
    cls.__init__ = _slot_init(cls, parameters, factories)  # type: ignore[method-assign]
    cls.__setattr__ = _refuse_setattr  # type: ignore[method-assign]
    cls.__delattr__ = _refuse_delattr  # type: ignore[method-assign]
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, kw_only: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def record(cls: type[T] | None = None, /, *, kw_only: bool = True) -> Any:
    def build(plain: type[T]) -> type[T]:
        # unsafe_hash: hash by fields, as a frozen dataclass does; safe, for no field changes.
        built: Any = dataclasses.dataclass(plain, slots=True, kw_only=kw_only, unsafe_hash=True)
        parameters = list(inspect.signature(built.__init__).parameters.values())[1:]
        factories = {f.name: f.default_factory for f in dataclasses.fields(built)
                     if f.default_factory is not dataclasses.MISSING}
        return _seal(built, parameters, factories)

    return build if cls is None else build(cls)


def is_native_value(candidate: object, module: str) -> bool:
    """A native value type of ``module``: declared ``@dataclass(init=False, ...)``."""
    params = getattr(candidate, "__dataclass_params__", None)
    return (isinstance(candidate, type) and candidate.__module__ == module
            and params is not None and not params.init)


def seal_values(namespace: Mapping[str, object]) -> None:
    """Make the native value types a module defines immutable if the module runs as pure
    Python; compiled, they are already (see above), and nothing changes."""
    module = namespace["__name__"]
    assert isinstance(module, str)
    for candidate in list(namespace.values()):
        if not is_native_value(candidate, module):
            continue
        assert isinstance(candidate, type)
        init = vars(candidate)["__init__"]
        if not isinstance(init, FunctionType):
            continue  # compiled by mypyc
        parameters = list(inspect.signature(init).parameters.values())[1:]
        _seal(candidate, parameters, {})
