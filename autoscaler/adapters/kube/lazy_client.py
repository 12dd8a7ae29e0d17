"""Import kubernetes-asyncio's packages without importing every API and model it generates.

``import kubernetes_asyncio`` (or any module under it) runs the package ``__init__`` files,
which import all 66 API classes and 768 generated models: ~27 MB of RSS and ~0.3 s in every
process, of which the daemon uses a handful (``ApiClient``, four APIs, the few models a
Lease or a discovery answer is read into). :func:`install` registers those four packages
(``kubernetes_asyncio``, ``.client``, ``.client.api``, ``.client.models``) as modules whose
names resolve on first use: a name the package's ``__init__`` imports (``from M import N``)
imports only ``M``; a subpackage is imported as usual. Any other name (``__all__``,
``__version__``, a name a later release adds in another form) runs the package's real
``__init__`` into the same module, so the worst case is today's full import, never a
missing name. The library's own lookups (``getattr(kubernetes_asyncio.client.models,
"V1Lease")`` when an answer is deserialized) go through the same path.

Nothing happens if the library is already imported (the process then has it whole) or
cannot be found (its import fails as it would have).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
from collections.abc import Callable
from importlib.abc import Loader
from types import ModuleType

PACKAGES = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)

# The generated __init__ files import one name a line: ``from M import N`` or ``import M as N``.
_FROM_IMPORT = re.compile(r"^from\s+([\w.]+)\s+import\s+(\w+)\s*$", re.MULTILINE)
_IMPORT_AS = re.compile(r"^import\s+([\w.]+)\s+as\s+(\w+)\s*$", re.MULTILINE)

_lock = threading.RLock()


def install() -> bool:
    """Register the packages as lazy modules; False if the library was imported already."""
    with _lock:
        if PACKAGES[0] in sys.modules:
            return False
        for name in PACKAGES:
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None or spec.loader is None:
                _undo()
                return False
            module = importlib.util.module_from_spec(spec)
            module.__getattr__ = _resolver(module, spec.origin, spec.loader)  # type: ignore[method-assign]
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
        return True


def _undo() -> None:
    for name in PACKAGES:
        sys.modules.pop(name, None)


def _resolver(module: ModuleType, origin: str, loader: Loader) -> Callable[[str], object]:
    exports: dict[str, tuple[str, str | None]] = {}
    loaded_whole = False

    def resolve(attribute: str) -> object:
        # No lock on this path: importing a module and setting an attribute are safe to repeat.
        nonlocal exports, loaded_whole
        if not exports:
            exports = _exports(origin)
        if attribute in exports:
            source, member = exports[attribute]
            imported = importlib.import_module(source)
            value = imported if member is None else getattr(imported, member)
        elif (submodule := _submodule(module.__name__, attribute)) is not None:
            value = submodule
        else:
            with _lock:
                if not loaded_whole:
                    # The package's real __init__, into the same module (this resolver stays).
                    loader.exec_module(module)
                    loaded_whole = True
            try:
                return module.__dict__[attribute]
            except KeyError:
                raise AttributeError(
                    f"module {module.__name__!r} has no attribute {attribute!r}") from None
        setattr(module, attribute, value)
        return value

    return resolve


def _exports(origin: str) -> dict[str, tuple[str, str | None]]:
    with open(origin, encoding="utf-8") as source:
        text = source.read()
    names: dict[str, tuple[str, str | None]] = {}
    for source_module, name in _FROM_IMPORT.findall(text):
        if source_module != "__future__":
            names[name] = (source_module, name)
    for source_module, alias in _IMPORT_AS.findall(text):
        names[alias] = (source_module, None)
    return names


def _submodule(package: str, attribute: str) -> ModuleType | None:
    if attribute.startswith("__"):
        return None
    full = f"{package}.{attribute}"
    if importlib.util.find_spec(full) is None:
        return None
    return importlib.import_module(full)
