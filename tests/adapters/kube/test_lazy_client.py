"""kubernetes-asyncio imported by parts (``lazy_client``): each in a fresh interpreter, since
the point is what a process has imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)


def run(*parts: str) -> dict[str, object]:
    """Run the parts (each dedented) in a fresh interpreter; they print one JSON object last."""
    code = "\n".join(textwrap.dedent(part) for part in parts)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


LOADED = """
    def loaded():
        return sorted(m for m in sys.modules if m.startswith("kubernetes_asyncio"))
"""


def test_the_daemon_imports_a_few_modules_of_the_library_not_every_model() -> None:
    # The daemon's own imports (app and wiring name ApiClient, CoordinationV1Api...): the
    # library's 768 models and 66 APIs stay on disk. A module that imports the library
    # before ``autoscaler.adapters.kube`` would undo this; this catches it.
    out = run("""
        import sys, json
        import autoscaler.app, autoscaler.wiring, autoscaler.cli
    """, LOADED, """
        print(json.dumps({"loaded": loaded()}))
    """)
    loaded = out["loaded"]
    assert isinstance(loaded, list)
    assert "kubernetes_asyncio.client.api_client" in loaded
    assert "kubernetes_asyncio.client.api.coordination_v1_api" in loaded
    assert "kubernetes_asyncio.client.models.v1_pod" not in loaded
    assert len(loaded) < 60, loaded


def test_every_name_the_library_exports_resolves_to_the_same_object() -> None:
    # Every name of each package's __init__, through the lazy modules, against the same
    # names after a plain import in another interpreter (by module and qualified name).
    names = """
        import importlib
        def names():
            out = {}
            for package in ("kubernetes_asyncio.client", "kubernetes_asyncio.client.api",
                            "kubernetes_asyncio.client.models"):
                module = importlib.import_module(package)
                for name in real_all(package):
                    value = getattr(module, name)
                    out[package + "." + name] = getattr(value, "__module__", "") + ":" + getattr(
                        value, "__qualname__", getattr(value, "__name__", ""))
            return out
        def real_all(package):
            spec = importlib.util.find_spec(package)
            text = open(spec.origin, encoding="utf-8").read()
            return re.findall(r"^from [\\w.]+ import (\\w+)$", text, re.MULTILINE)
    """
    lazy = run("""
        import sys, json, re, importlib.util
        import autoscaler.adapters.kube
    """, names, """
        assert "__getattr__" in vars(sys.modules["kubernetes_asyncio.client"])
        print(json.dumps(names()))
    """)
    whole = run("""
        import sys, json, re, importlib.util
        import kubernetes_asyncio
        import autoscaler.adapters.kube
    """, names, """
        assert "__getattr__" not in vars(sys.modules["kubernetes_asyncio.client"])
        print(json.dumps(names()))
    """)
    assert len(lazy) > 800
    assert lazy == whole


def test_models_are_found_by_name_when_an_answer_is_deserialized() -> None:
    # ApiClient.deserialize looks models up with getattr on the models package: a Lease
    # answer becomes a V1Lease (and its V1LeaseSpec) with only those modules imported.
    out = run("""
        import sys, json, asyncio, types
        import autoscaler.adapters.kube
        from kubernetes_asyncio.client import ApiClient
    """, LOADED, """
        async def main():
            async with ApiClient() as client:
                answer = types.SimpleNamespace(data=json.dumps({
                    "metadata": {"name": "l", "namespace": "n"},
                    "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}))
                return client.deserialize(answer, "V1Lease")
        lease = asyncio.run(main())
        print(json.dumps({"type": type(lease).__name__, "spec": type(lease.spec).__name__,
                          "holder": lease.spec.holder_identity, "loaded": loaded()}))
    """)
    assert out["type"] == "V1Lease"
    assert out["spec"] == "V1LeaseSpec"
    assert out["holder"] == "me"
    assert "kubernetes_asyncio.client.models.v1_pod" not in out["loaded"]  # type: ignore[operator]


def test_a_name_the_init_does_not_import_by_line_loads_the_whole_package() -> None:
    # __all__ and __version__ are not "from M import N" lines: the package's real __init__
    # runs into the same module, once, and every name is there afterwards.
    out = run("""
        import sys, json
        import autoscaler.adapters.kube
        import kubernetes_asyncio.client as client
    """, LOADED, """
        before = len(loaded())
        version = client.__version__
        exported = len(client.__all__)
        print(json.dumps({"before": before, "after": len(loaded()), "version": version,
                          "exported": exported, "missing": hasattr(client, "NoSuchName")}))
    """)
    assert out["version"]
    assert out["exported"] > 800  # type: ignore[operator]
    assert out["before"] < 60  # type: ignore[operator]
    assert out["after"] > 800  # type: ignore[operator]
    assert out["missing"] is False


def test_nothing_changes_when_the_library_was_imported_first() -> None:
    out = run("""
        import sys, json
        import kubernetes_asyncio
        from autoscaler.adapters.kube import lazy_client
    """, LOADED, """
        print(json.dumps({"installed": lazy_client.install(), "loaded": len(loaded())}))
    """)
    assert out["installed"] is False
    assert out["loaded"] > 800  # type: ignore[operator]
