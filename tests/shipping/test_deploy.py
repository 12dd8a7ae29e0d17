"""The in-cluster manifests: they parse, they hang together, and they are locked down."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config import parse_config

DEPLOY = Path(__file__).parents[2] / "deploy"
ROOT = Path(__file__).parents[2]


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in documents() if d["kind"] == kind]


def test_every_manifest_parses_and_is_listed_in_kustomization() -> None:
    """Each YAML file parses, names apiVersion/kind/metadata, and kustomize includes it."""
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    files = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    for doc in documents():
        if doc["kind"] != "Kustomization":
            assert doc["apiVersion"]
            assert doc["metadata"]["name"]


def test_deployment_is_ha_and_locked_down() -> None:
    """Two replicas with leader election, probes, resources, non-root, read-only root fs."""
    (deployment,) = by_kind("Deployment")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert spec["serviceAccountName"] == by_kind("ServiceAccount")[0]["metadata"]["name"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]}}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/tmp", "/etc/autoscaler"}


def test_configmap_holds_a_valid_config_with_leader_election() -> None:
    """The shipped TOML passes validation and turns leader election on."""
    (configmap,) = by_kind("ConfigMap")
    text = configmap["data"]["autoscaler.toml"]
    config = parse_config(text, source="deploy/configmap.yaml")
    assert config.daemon.leader_election.enabled
    assert config.kubernetes.in_cluster is True
    assert config.daemon.listen_address.endswith(":8080")


def test_service_exposes_the_metrics_port() -> None:
    """The Service selects the Deployment's pods and targets its http port."""
    (service,) = by_kind("Service")
    (deployment,) = by_kind("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_dockerfile_is_two_stage_and_non_root() -> None:
    """The image builds in one stage, runs slim as a numeric non-root user."""
    text = (ROOT / "Dockerfile").read_text()
    assert text.count("FROM ") == 2
    assert "USER 65532:65532" in text
    assert "PYTHONDONTWRITEBYTECODE=1" in text  # read-only root filesystem


def test_pyproject_names_the_console_script() -> None:
    """Distribution and console script are both called autoscaler."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "autoscaler"
    assert project["scripts"]["autoscaler"] == "autoscaler.cli:main"
