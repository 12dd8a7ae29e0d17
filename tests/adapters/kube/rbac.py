"""deploy/rbac.yaml as data: which (verb, group, resource, namespace) its rules allow."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

RBAC_FILE = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"


@dataclass(frozen=True, slots=True)
class Permission:
    verb: str
    group: str
    resource: str
    """``plural`` or ``plural/subresource``."""
    namespace: str | None
    """None: cluster-wide (ClusterRole bound by a ClusterRoleBinding)."""


def granted(path: Path = RBAC_FILE) -> frozenset[Permission]:
    """Every permission the manifests grant (roles only count if something binds them)."""
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
             for d in documents if d["kind"] in ("ClusterRole", "Role")}
    found = set()
    for binding in (d for d in documents if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        ref = binding["roleRef"]
        bound_ns = binding["metadata"].get("namespace")
        role_ns = bound_ns if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_ns, ref["name"])]
        scope = None if binding["kind"] == "ClusterRoleBinding" else bound_ns
        found.update(_expand(role["rules"], scope))
    return frozenset(found)


def _expand(rules: Iterable[dict[str, list[str]]], namespace: str | None) -> set[Permission]:
    return {Permission(verb, group, resource, namespace)
            for rule in rules for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def custom_resource_template(path: Path = RBAC_FILE) -> dict[str, frozenset[str]]:
    """The verbs of the commented-out rules users copy for a custom resource, by the
    resource's suffix: ``"/scale"`` for its scale subresource, ``""`` for the object."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "#   resources:" in line) - 1
    block = "\n".join(line.replace("#", "", 1) for line in lines[start:start + 6])
    rules = yaml.safe_load(block)
    assert [rule["resources"][0].endswith("/scale") for rule in rules] == [True, False], rules
    return {"/scale": frozenset(rules[0]["verbs"]), "": frozenset(rules[1]["verbs"])}


def allows(permissions: frozenset[Permission], *, verb: str, group: str, resource: str,
           namespace: str | None) -> bool:
    return any(p.verb == verb and p.group == group and p.resource == resource
               and p.namespace in (None, namespace) for p in permissions)
