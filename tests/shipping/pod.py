"""A pod as a kubelet would start it, in a machine booted by nspawn (nspawn.py).

From the pod object an API server holds and the image's Dockerfile, ``plan_pod`` works out
what a kubelet and a container runtime would do: the process (the container's command and
args, else the image's ENTRYPOINT and CMD), its environment (the image's ENV, the service
variables a kubelet adds, the container's env with each fieldRef read from the pod), its
mounts (configMap volumes in the kubelet's atomic-writer layout of ``..data`` symlinks,
emptyDirs, the service account's token, ca.crt and namespace) and its securityContext, as
the properties of a transient systemd unit: User and Group, fsGroup as a supplementary group,
a read-only root with only the writable mounts writable, no new privileges, no capabilities,
the memory limit, the grace period of a stop.

Anything in the pod spec that would change how the process runs and is not modelled here (a
subPath, a secret or projected volume, an env source other than a value or a fieldRef, init
containers) raises ``UnmodelledError``, so a change to deploy/ that this model does not cover
fails loudly instead of being ignored.

Not modelled: the image itself (this machine's interpreter and checkout stand in for the
image's virtualenv, bound where the Dockerfile copies it), the seccomp profile, CPU limits,
and the kubelet acting on probes (a test calls them itself).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH before the image's ENV (the Debian-based python image's, as docker's default)."""
_ATOMIC_DIR = "..2026_01_01_00_00_00.000000001"


class UnmodelledError(AssertionError):
    """The pod asks for something this model does not do: extend it, never skip it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    """The runtime stage of a Dockerfile, as far as it decides how the process runs."""

    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]
    user: str | None
    workdir: str
    copies: dict[str, str]
    """``COPY --from=<stage> SRC DEST`` of the stage: DEST by SRC."""


def read_dockerfile(path: Path) -> Image:
    """The last stage's ENTRYPOINT, CMD (exec form), ENV, USER, WORKDIR and stage copies."""
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    stage = lines[max(i for i, line in enumerate(lines) if line.upper().startswith("FROM ")):]
    found: dict[str, Any] = {"entrypoint": [], "cmd": [], "env": {}, "user": None,
                             "workdir": "/", "copies": {}}
    for line in stage[1:]:
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        if instruction in ("ENTRYPOINT", "CMD"):
            if not rest.lstrip().startswith("["):
                raise UnmodelledError(f"{instruction} in shell form: {rest}")
            found[instruction.lower()] = json.loads(rest)
        elif instruction == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                found["env"][key] = value.replace("$PATH", found["env"].get("PATH", BASE_PATH))
        elif instruction == "USER":
            found["user"] = rest.strip()
        elif instruction == "WORKDIR":
            found["workdir"] = rest.strip()
        elif instruction == "COPY" and (copy := re.match(r"--from=\S+\s+(\S+)\s+(\S+)$", rest)):
            found["copies"][copy.group(1)] = copy.group(2)
    return Image(**found)


@dataclass(frozen=True, slots=True)
class Mount:
    source: Path
    target: str
    read_only: bool

    def nspawn_option(self) -> str:
        return f"--bind{'-ro' if self.read_only else ''}={self.source}:{self.target}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodRun:
    """How to start one container of a pod in a machine: ``nspawn_options`` when booting it,
    then ``start_command`` (a shell line) inside."""

    argv: list[str]
    env: dict[str, str]
    workdir: str
    mounts: list[Mount]
    properties: list[str]
    hostname: str
    pod_ip: str
    ports: dict[str, int]

    def nspawn_options(self) -> list[str]:
        return [f"--hostname={self.hostname}", *(m.nspawn_option() for m in self.mounts)]

    def start_command(self, unit: str, *, log: str) -> str:
        """``systemd-run`` of the process as a unit; its output appended to ``log``."""
        options = [f"--unit={unit}", "--service-type=exec", f"--working-directory={self.workdir}",
                   f"--property=StandardOutput=append:{log}",
                   f"--property=StandardError=append:{log}",
                   *(f"--property={p}" for p in self.properties),
                   *(f"--setenv={k}={v}" for k, v in self.env.items())]
        command, *args = self.argv
        if "/" not in command:  # the runtime looks it up on the image's PATH, not systemd's
            command = f"$(PATH={shlex.quote(self.env['PATH'])} command -v {shlex.quote(command)})"
        run = f"{shlex.join(['systemd-run', *options, '--'])} \"{command}\" {shlex.join(args)}"
        return "; ".join([*self._accounts(), run])

    def _accounts(self) -> list[str]:
        """A container runtime runs a numeric user with no passwd entry (HOME=/); systemd
        wants one: the machine's own, throwaway /etc gets it."""
        ids = dict(p.split("=", 1) for p in self.properties if p.startswith(("User=", "Group=")))
        lines = []
        if "User" in ids:
            uid = ids["User"]
            lines.append(f"getent passwd {uid} >/dev/null || echo 'pod:x:{uid}:"
                         f"{ids.get('Group', uid)}::/:/usr/sbin/nologin' >> /etc/passwd")
        if "Group" in ids:
            gid = ids["Group"]
            lines.append(f"getent group {gid} >/dev/null || echo 'pod:x:{gid}:' >> /etc/group")
        return lines

    def port(self, ref: int | str) -> int:
        """A port by number or by the container port's name (probes, a Service's
        targetPort)."""
        if isinstance(ref, int):
            return ref
        if ref not in self.ports:
            raise AssertionError(f"no container port named {ref!r} (ports: {self.ports})")
        return self.ports[ref]


def field(obj: Obj, path: str) -> Any:
    """A fieldRef's ``fieldPath`` (``metadata.name``, ``status.podIP``) read from ``obj``."""
    if "[" in path:
        raise UnmodelledError(f"fieldRef {path!r}")
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        raise AssertionError(f"the pod has no {path}")
    return value


def container_env(pod: Obj, container: Obj) -> dict[str, str]:
    env = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif set(item.get("valueFrom") or {}) == {"fieldRef"}:
            env[item["name"]] = str(field(pod, item["valueFrom"]["fieldRef"]["fieldPath"]))
        else:
            raise UnmodelledError(f"env {item['name']}: {item.get('valueFrom')}")
    if container.get("envFrom"):
        raise UnmodelledError("envFrom")
    return env


def atomic_volume(directory: Path, files: Mapping[str, str | bytes], *, mode: int,
                  group: int | None) -> Path:
    """The kubelet's atomic-writer layout: ``..data`` points at a timestamped directory,
    each file name at ``..data/<name>`` (an updated ConfigMap swaps the ``..data`` link)."""
    payload = directory / _ATOMIC_DIR
    payload.mkdir(parents=True)
    for name, content in files.items():
        path = payload / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        path.chmod(mode)
        if group is not None:
            os.chown(path, 0, group)
    (directory / "..data").symlink_to(_ATOMIC_DIR)
    for name in files:
        (directory / name).symlink_to(f"..data/{name}")
    directory.chmod(0o755)
    return directory


def security_properties(pod_spec: Obj, container: Obj, *, writable: list[str],
                        image_user: str | None = None) -> list[str]:
    """The securityContext (and memory limit, grace period) as systemd unit properties;
    without runAsUser/runAsGroup, the image's numeric ``USER uid[:gid]``."""
    pod_context, context = pod_spec.get("securityContext") or {}, container.get(
        "securityContext") or {}
    uid, _, gid = (image_user or "").partition(":")
    image_ids = {"runAsUser": int(uid)} if uid.isdigit() else {}
    image_ids |= {"runAsGroup": int(gid)} if gid.isdigit() else {}
    merged = {**image_ids, **pod_context, **context}
    user, group = merged.get("runAsUser"), merged.get("runAsGroup")
    if merged.get("runAsNonRoot") and user in (None, 0):
        raise AssertionError("runAsNonRoot without a non-zero runAsUser: the kubelet refuses")
    properties = [f"User={user}"] if user is not None else []
    properties += [f"Group={group}"] if group is not None else []
    if pod_context.get("fsGroup") is not None:
        properties.append(f"SupplementaryGroups={pod_context['fsGroup']}")
    if context.get("readOnlyRootFilesystem"):
        properties += ["ProtectSystem=strict", *(f"ReadWritePaths={p}" for p in writable)]
    if context.get("allowPrivilegeEscalation") is False:
        properties.append("NoNewPrivileges=yes")
    dropped = (context.get("capabilities") or {}).get("drop") or []
    if "ALL" in dropped:
        properties += ["CapabilityBoundingSet=", "AmbientCapabilities="]
    memory = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if memory:
        properties.append(f"MemoryMax={_bytes(memory)}")
    grace = pod_spec.get("terminationGracePeriodSeconds", 30)
    return [*properties, f"TimeoutStopSec={grace}s"]


def _bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """What a kubelet gets from the cluster for a pod: objects, the account's token, the
    CA, and where the API server's Service answers."""

    config_map: Callable[[str, str], Obj | None]
    token: str
    ca: bytes
    service_host: str
    service_port: int


def plan_pod(pod: Obj, *, image: Image, image_root: Mapping[str, Path], cluster: Cluster,
             workdir: Path) -> PodRun:
    """How the pod's one container runs; volumes are laid out under ``workdir``.
    ``image_root`` binds host paths where the image has its files (its virtualenv)."""
    spec = pod["spec"]
    (container,) = spec["containers"]
    if spec.get("initContainers"):
        raise UnmodelledError("initContainers")
    fs_group = (spec.get("securityContext") or {}).get("fsGroup")
    mounts = [Mount(source, target, True) for target, source in image_root.items()]
    mounts += _volume_mounts(pod, container, cluster=cluster, workdir=workdir, group=fs_group)
    if _automount(spec):
        mounts.append(Mount(atomic_volume(workdir / "serviceaccount", {
            "token": cluster.token, "ca.crt": cluster.ca,
            "namespace": pod["metadata"]["namespace"]}, mode=0o640 if fs_group else 0o644,
            group=fs_group), SERVICE_ACCOUNT_DIR, True))
    env = {"PATH": BASE_PATH, **image.env, "HOSTNAME": pod["metadata"]["name"],
           "KUBERNETES_SERVICE_HOST": cluster.service_host,
           "KUBERNETES_SERVICE_PORT": str(cluster.service_port),
           "KUBERNETES_SERVICE_PORT_HTTPS": str(cluster.service_port),
           **container_env(pod, container)}
    writable = [m.target for m in mounts if not m.read_only]
    return PodRun(
        argv=container_argv(container, image), env=env,
        workdir=container.get("workingDir") or image.workdir, mounts=mounts,
        properties=security_properties(spec, container, writable=writable,
                                       image_user=image.user),
        hostname=pod["metadata"]["name"], pod_ip=field(pod, "status.podIP"),
        ports={p["name"]: p["containerPort"] for p in container.get("ports") or []
               if "name" in p})


def container_argv(container: Obj, image: Image) -> list[str]:
    """A container's command replaces the image's ENTRYPOINT and drops its CMD; its args
    replace the CMD."""
    if "command" in container:
        return [*container["command"], *container.get("args", [])]
    return [*image.entrypoint, *container.get("args", image.cmd)]


def _automount(spec: Obj) -> bool:
    """The pod's automountServiceAccountToken (the ServiceAccount's own is not read)."""
    return bool(spec.get("automountServiceAccountToken", True))


def _volume_mounts(pod: Obj, container: Obj, *, cluster: Cluster, workdir: Path,
                   group: int | None) -> list[Mount]:
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        if mount.get("subPath") or mount.get("subPathExpr"):
            raise UnmodelledError(f"subPath on {mount['mountPath']}")
        volume = volumes[mount["name"]]
        source = workdir / "volumes" / mount["name"]
        if "configMap" in volume:
            _config_map_volume(source, volume["configMap"], pod, cluster=cluster, group=group)
        elif "emptyDir" in volume:
            source.mkdir(parents=True)
            source.chmod(0o777)  # as the kubelet makes an emptyDir
        else:
            raise UnmodelledError(f"volume {mount['name']}: {sorted(volume)}")
        mounts.append(Mount(source, mount["mountPath"], bool(mount.get("readOnly"))))
    return mounts


def _config_map_volume(source: Path, volume: Obj, pod: Obj, *, cluster: Cluster,
                       group: int | None) -> None:
    found = cluster.config_map(pod["metadata"]["namespace"], volume["name"])
    if found is None:
        raise AssertionError(f"ConfigMap {volume['name']} is missing: the pod would never "
                             "start (ContainerCreating)")
    data: dict[str, str] = found.get("data") or {}
    if volume.get("items"):
        data = {item["path"]: data[item["key"]] for item in volume["items"]}
    atomic_volume(source, data, mode=volume.get("defaultMode", 0o644), group=group)
