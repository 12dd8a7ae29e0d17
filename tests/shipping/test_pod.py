"""The pod model of the in-cluster test follows the kubelet's and the runtime's rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.shipping.pod import (
    Image,
    UnmodelledError,
    atomic_volume,
    container_argv,
    container_env,
    read_dockerfile,
    security_properties,
)

ROOT = Path(__file__).parents[2]
IMAGE = Image(entrypoint=["autoscaler"], cmd=["run", "--config", "/etc/a.toml"], env={},
              user=None, workdir="/", copies={})


@pytest.mark.parametrize(("container", "argv"), [
    ({}, ["autoscaler", "run", "--config", "/etc/a.toml"]),
    ({"args": ["check", "x"]}, ["autoscaler", "check", "x"]),
    ({"command": ["python3"]}, ["python3"]),
    ({"command": ["python3"], "args": ["-V"]}, ["python3", "-V"]),
], ids=["image-only", "args-replace-cmd", "command-drops-cmd", "command-and-args"])
def test_argv_follows_the_runtime(container: dict[str, Any], argv: list[str]) -> None:
    """command replaces ENTRYPOINT and drops CMD; args replace CMD."""
    assert container_argv(container, IMAGE) == argv


def test_env_reads_field_refs_from_the_pod() -> None:
    """Values as given; a fieldRef is the pod's field; any other source is refused."""
    pod = {"metadata": {"name": "p-1", "namespace": "ns"}, "status": {"podIP": "10.0.0.1"}}
    env = [{"name": "A", "value": "1"},
           {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    assert container_env(pod, {"env": env}) == {"A": "1", "N": "p-1", "IP": "10.0.0.1"}
    secret = {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    with pytest.raises(UnmodelledError):
        container_env(pod, {"env": [secret]})


def test_the_dockerfile_runtime_stage_is_read() -> None:
    """The shipped Dockerfile: its entrypoint, default command, PATH and virtualenv."""
    image = read_dockerfile(ROOT / "Dockerfile")
    assert image.entrypoint == ["autoscaler"]
    assert image.cmd[0] == "run"
    assert image.env["PATH"].startswith("/opt/autoscaler/bin:")
    assert image.copies == {"/opt/autoscaler": "/opt/autoscaler"}
    assert image.user == "65532:65532"


def test_config_map_volume_has_the_kubelets_layout(tmp_path: Path) -> None:
    """Each key is a link through ..data into a timestamped directory."""
    volume = atomic_volume(tmp_path / "v", {"a.toml": "x = 1\n"}, mode=0o644, group=None)
    assert (volume / "a.toml").read_text() == "x = 1\n"
    assert (volume / "a.toml").readlink() == Path("..data/a.toml")
    assert (volume / "..data").is_symlink()


def test_security_context_becomes_unit_properties() -> None:
    """User, group, fsGroup, read-only root with the writable mounts, no privileges."""
    spec = {"securityContext": {"runAsNonRoot": True, "runAsUser": 7, "runAsGroup": 8,
                                "fsGroup": 9}, "terminationGracePeriodSeconds": 5}
    container = {"securityContext": {"readOnlyRootFilesystem": True,
                                     "allowPrivilegeEscalation": False,
                                     "capabilities": {"drop": ["ALL"]}},
                 "resources": {"limits": {"memory": "64Mi"}}}
    assert security_properties(spec, container, writable=["/tmp"]) == [
        "User=7", "Group=8", "SupplementaryGroups=9", "ProtectSystem=strict",
        "ReadWritePaths=/tmp", "NoNewPrivileges=yes", "CapabilityBoundingSet=",
        "AmbientCapabilities=", f"MemoryMax={64 * 2**20}", "TimeoutStopSec=5s"]


def test_the_images_user_runs_without_run_as_user() -> None:
    """No runAsUser or runAsGroup anywhere: the image's USER uid:gid."""
    assert security_properties({}, {}, writable=[], image_user="65532:65533")[:2] == [
        "User=65532", "Group=65533"]
