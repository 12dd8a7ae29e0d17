"""Every path a command writes, wherever it comes from, as a user (or an attacker) names it:
a file that is not recognisably ours is refused with one line and exit 1, and left byte for
byte as it was; nothing is set aside, replaced, or written through a link. Throwaway copies
in tmp_path only, never a system file.

Each case runs ``python -m autoscaler`` in a child process; the daemon's cases refuse before
connecting anywhere (the kubeconfig and Prometheus point at ports nobody listens on).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from autoscaler.snapshot import encode
from tests.commands.test_failures import config, kubeconfig
from tests.test_snapshot import SNAPSHOT

ROOT = Path(__file__).parents[2]
PASSWD = (b"root:x:0:0:root:/root:/bin/bash\n"
          b"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
HPA = b"""\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
"""
SO = b"""\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {name: web}
  triggers:
  - type: cpu
    metricType: Utilization
    metadata: {value: "50"}
"""


def cli(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoscaler", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "NO_COLOR": "1"}, check=False)


def tree(directory: Path) -> dict[str, tuple[int, bytes | str | None]]:
    """Every entry under ``directory``: its mode and content (a link's target, a file's
    bytes), to compare before and after."""
    found: dict[str, tuple[int, bytes | str | None]] = {}
    for entry in sorted(directory.rglob("*")):
        info = entry.lstat()
        content: bytes | str | None = None
        if stat.S_ISLNK(info.st_mode):
            content = os.readlink(entry)
        elif stat.S_ISREG(info.st_mode):
            content = entry.read_bytes()
        found[str(entry.relative_to(directory))] = (info.st_mode, content)
    return found


def refused(done: subprocess.CompletedProcess[str], fragment: str) -> None:
    """Exit 1, one line naming the path and why, no traceback."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert fragment in done.stderr, done.stderr


# --- the daemon's state file ------------------------------------------------------------------


def daemon_config(tmp: Path, state: Path | None = None) -> Path:
    path = config(tmp, kube=kubeconfig(tmp, "https://127.0.0.1:9"))
    if state is not None:
        path.write_text(path.read_text().replace(
            "[daemon]\n", f'[daemon]\nstateFile = "{state}"\n'))
    return path


def a_passwd_copy(work: Path) -> Path:
    path = work / "passwd"
    path.write_bytes(PASSWD)
    return path


def a_link_to_a_passwd_copy(work: Path) -> Path:
    path = work / "state"
    path.symlink_to(a_passwd_copy(work))
    return path


def a_link_to_a_store(work: Path) -> Path:
    (work / "real-state").write_bytes(encode(SNAPSHOT))
    path = work / "state"
    path.symlink_to(work / "real-state")
    return path


RUN_CASES: list[tuple[str, Callable[[Path], Path], str, tuple[str, ...]]] = [
    ("flag", a_passwd_copy, "flag", ()),
    ("flag-dry-run", a_passwd_copy, "flag", ("--dry-run",)),
    ("config", a_passwd_copy, "config", ()),
    ("config-dry-run", a_passwd_copy, "config", ("--dry-run",)),
    ("link-to-a-foreign-file", a_link_to_a_passwd_copy, "flag", ()),
    ("link-to-a-store", a_link_to_a_store, "config", ()),
]


@pytest.mark.parametrize(("make", "where", "extra"), [case[1:] for case in RUN_CASES],
                         ids=[case[0] for case in RUN_CASES])
def test_run_refuses_a_state_path_that_is_not_ours(
    tmp_path: Path, make: Callable[[Path], Path], where: str, extra: tuple[str, ...],
) -> None:
    """``run --state-file`` or the config's ``stateFile`` at a passwd-like file (or a link to
    one, or a link to a store): refused before anything starts, exit 1, one line; the
    directory is exactly as it was (no ``.unreadable-`` copy, no state written)."""
    work = tmp_path / "work"
    work.mkdir()
    state = make(work)
    if where == "flag":
        args: tuple[str | Path, ...] = ("--config", daemon_config(tmp_path),
                                        "--state-file", state)
    else:
        args = ("--config", daemon_config(tmp_path, state))
    before = tree(work)
    started = time.monotonic()
    done = cli("run", *args, *extra)
    if where == "flag":
        refused(done, f"not starting: cannot use {state} as the state file: ")
    else:  # the config's own check: the same rule, with the file's line and field
        assert done.returncode == 1, done.stderr
        assert "daemon.stateFile: cannot use" in done.stderr
    assert "it is left as it is" in done.stderr
    assert tree(work) == before
    assert time.monotonic() - started < 15


# --- --out of the commands that write files ----------------------------------------------------


@pytest.mark.parametrize(("command", "manifest"), [("import-hpa", HPA), ("import-keda", SO)])
def test_an_import_replaces_only_its_own_output(
    tmp_path: Path, command: str, manifest: bytes,
) -> None:
    """``--out`` at someone else's file or at a link: refused, exit 1, one line, left byte
    for byte; at nothing yet, or at an importer's earlier output, written (twice in a row
    works); ``/dev/null`` is written in place."""
    source = tmp_path / "in.yaml"
    source.write_bytes(manifest)
    work = tmp_path / "work"
    work.mkdir()
    theirs = a_passwd_copy(work)
    link = work / "link.toml"
    link.symlink_to(theirs)
    before = tree(work)
    refused(cli(command, source, "--out", theirs), f"cannot write {theirs}: it is not a file "
            "this command wrote; it is left as it is")
    refused(cli(command, source, "--out", link), f"cannot write {link}: it is a symbolic link")
    assert tree(work) == before
    out = work / "out.toml"
    for _ in range(2):
        done = cli(command, source, "--out", out)
        assert done.returncode == 0, done.stderr
    assert out.read_text().startswith(f"# Written by `autoscaler {command}`")
    assert cli(command, source, "--out", "/dev/null").returncode == 0


SIMULATE = ("simulate", "--config", ROOT / "config/examples/simulate/web.toml", "--workload",
            ROOT / "config/examples/simulate/workload.toml", "--trace",
            ROOT / "config/examples/simulate/day.csv", "--no-plot")


@pytest.mark.parametrize("name", ["timeline.csv", "timeline.json", "summary.json"])
def test_simulate_refuses_an_output_it_did_not_write_before_it_runs(
    tmp_path: Path, name: str,
) -> None:
    """An --out directory holding someone else's file (or a link) under one of the names
    simulate writes: refused before the run, one line, and no file in it changes; an earlier
    run's own files are replaced."""
    out = tmp_path / "out"
    done = cli(*SIMULATE, "--out", out)
    assert done.returncode == 0, done.stderr
    assert cli(*SIMULATE, "--out", out).returncode == 0  # its own files: replaced
    (out / name).write_bytes(PASSWD)
    before = tree(out)
    refused(cli(*SIMULATE, "--out", out), f"cannot write {out / name}: it is not a file this "
            "command wrote")
    assert tree(out) == before
    (out / name).unlink()
    (out / name).symlink_to(a_passwd_copy(tmp_path))
    before = tree(out)
    refused(cli(*SIMULATE, "--out", out), f"cannot write {out / name}: it is a symbolic link")
    assert tree(out) == before
    assert (tmp_path / "passwd").read_bytes() == PASSWD
