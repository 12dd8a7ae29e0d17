"""``@record``: an immutable value type that is as cheap to build as a plain dataclass.

A ``dataclass(frozen=True)`` guards its fields at run time by setting each one in
``__init__`` through ``object.__setattr__``, which makes building one 2.5-3x slower than a
plain slotted dataclass (a five-field record: ~700 ns against ~270 ns). A reconcile pass over
1,000 targets builds ~36,000 of the core's records (pod samples, proposals, conditions,
recommendations), so that guard cost 9-16 ms of a pass's ~125 ms of CPU (bench/daemon_scale.py,
two sets of alternating runs; bench/README.md's figures).

A ``@record`` class is a slotted, hashable, keyword-only dataclass whose immutability is
checked where it is cheap: statically. ``dataclass_transform(frozen_default=True)`` makes
mypy (strict, in CI) reject any assignment to a field, exactly as it does for a frozen
dataclass; ``dataclasses.replace`` makes changed copies. Use it for the types built per
target per pass; types built once (configuration) stay ``dataclass(frozen=True)``, whose
run-time check costs nothing there.

In the modules mypyc compiles (setup.py's ``COMPILED``), the types built per pass are native
value types instead, because mypyc makes native only the classes it sees decorated with
``dataclasses.dataclass`` itself. Each is ``@dataclass(init=False, slots=True,
unsafe_hash=True)``, declares its fields ``Final[...]`` and sets them in a keyword-only
``__init__`` of its own. mypyc compiles that ``__init__``, so compiled code builds one with a
direct call: ~60 ns against a record's ~500-800 ns (a keyword dict and a bytecode
``__init__``). ``Final`` makes mypy reject any other assignment, as for a record, and the
compiled class refuses one at run time too. A field that needs ``field(compare=False)`` cannot
be ``Final`` (mypy counts the ``field()`` as its one assignment) and is read-only by convention.
tests/shipping/test_compiled_core.py checks that each type's fields, parameters and
assignments agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, kw_only: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def record(cls: type[T] | None = None, /, *, kw_only: bool = True) -> Any:
    def build(plain: type[T]) -> type[T]:
        # unsafe_hash: hash by fields, as a frozen dataclass does; "unsafe" only if a field
        # is reassigned, which the type checker forbids.
        return dataclasses.dataclass(plain, slots=True, kw_only=kw_only, unsafe_hash=True)

    return build if cls is None else build(cls)
