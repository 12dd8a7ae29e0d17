"""The in-cluster manifests: they parse, they hang together, and they are locked down."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config import parse_config
from autoscaler.observability.addresses import status_address

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


def test_dockerfile_pins_its_base_image_by_digest() -> None:
    """The same Dockerfile builds on the same base, whatever the tag points at later."""
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"(?m)^ARG PYTHON_IMAGE=\S+@sha256:[0-9a-f]{64}$", text)
    assert re.findall(r"(?m)^FROM (\S+)", text) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_the_image_is_named_in_one_place() -> None:
    """The Deployment names the image ``autoscaler``; the images: entry of kustomization.yaml
    (the two lines the README shows) gives its registry and tag to the rendering."""
    (entry,) = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["images"]
    (deployment,) = by_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == entry["name"]
    (rendered,) = [d for d in kustomize(DEPLOY) if d["kind"] == "Deployment"]
    (container,) = rendered["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{entry['newName']}:{entry['newTag']}"


def test_pyproject_names_the_console_script() -> None:
    """Distribution and console script are both called autoscaler."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "autoscaler"
    assert project["scripts"]["autoscaler"] == "autoscaler.cli:main"


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize`` (the real kubectl) of ``directory``."""
    built = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d]


def with_operator_component(tmp_path: Path) -> Path:
    """An overlay of deploy/ that turns the prometheus-operator component on, as a user's."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(DEPLOY, overlay)
    (overlay / "kustomization.yaml").write_text(
        f"resources: [{base}]\ncomponents: [{base}/prometheus-operator]\n")
    return overlay


BASE_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
              "RoleBinding", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget",
              "NetworkPolicy"}


def test_kustomize_builds_the_base_without_operator_kinds() -> None:
    """`kubectl kustomize deploy/` builds every manifest, and nothing that needs the
    prometheus-operator CRDs."""
    built = kustomize(DEPLOY)
    assert {d["kind"] for d in built} == BASE_KINDS
    assert {d["metadata"].get("namespace", "autoscaler") for d in built} == {"autoscaler"}


def test_kustomize_builds_the_operator_component(tmp_path: Path) -> None:
    """With the component on: the same, plus a ServiceMonitor and a PrometheusRule."""
    kinds = [d["kind"] for d in kustomize(with_operator_component(tmp_path))]
    assert sorted(kinds) == sorted([*BASE_KINDS, "ServiceMonitor", "PrometheusRule"])


def test_disruption_budget_keeps_one_of_the_two() -> None:
    """A drain takes one replica at a time; an unhealthy pod never blocks it."""
    (budget,) = by_kind("PodDisruptionBudget")
    (deployment,) = by_kind("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["minAvailable"] == 1 < deployment["spec"]["replicas"]
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_network_policy_admits_only_scrapes_of_the_metrics_port() -> None:
    """Ingress to the daemon's pods: Prometheus's pods alone, on the http port alone."""
    (policy,) = by_kind("NetworkPolicy")
    (deployment,) = by_kind("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"].items() <= labels.items()
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    (source,) = rule["from"]
    assert set(source) == {"namespaceSelector", "podSelector"}  # both: one AND-ed peer
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert [p["name"] for p in container["ports"]] == ["http"]


def test_status_is_off_the_pod_network() -> None:
    """The shipped listen address is the pod's: /status moves to loopback beside it."""
    (configmap,) = by_kind("ConfigMap")
    config = parse_config(configmap["data"]["autoscaler.toml"], source="deploy/configmap.yaml")
    assert status_address(config.daemon.listen_address) == "127.0.0.1:8081"


def test_service_monitor_scrapes_the_service_as_the_rules_expect(tmp_path: Path) -> None:
    """It selects the Service's http port, keeps the targets' namespace label, and names the
    job "autoscaler" (the rules' selector)."""
    built = kustomize(with_operator_component(tmp_path))
    (monitor,) = [d for d in built if d["kind"] == "ServiceMonitor"]
    (service,) = [d for d in built if d["kind"] == "Service"]
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert spec["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = spec["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["path"], endpoint["honorLabels"]) == ("/metrics", True)
    assert service["metadata"]["labels"][spec["jobLabel"]] == "autoscaler"
