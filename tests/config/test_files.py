"""The files around a config: the config file itself, and the files it names, on this host."""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from autoscaler.config import ConfigError, load_config, parse_config
from autoscaler.config.files import MAX_CONFIG_BYTES
from autoscaler.snapshot import Snapshot, encode, pack
from tests.config import hostile
from tests.config.helpers import TARGET


def missing(directory: Path) -> Path:
    return directory / "missing"


def a_directory(directory: Path) -> Path:
    return directory


def a_fifo(directory: Path) -> Path:
    path = directory / "fifo"
    os.mkfifo(path)
    return path


def text_file(directory: Path) -> Path:
    path = directory / "passwd"
    path.write_text("root:x:0:0:root:/root:/bin/bash\n")
    return path


def empty_file(directory: Path) -> Path:
    path = directory / "empty"
    path.touch()
    return path


def in_missing_directory(directory: Path) -> Path:
    return directory / "not-yet" / "state"


def state_file(directory: Path) -> Path:
    path = directory / "state"
    path.write_bytes(encode(Snapshot(targets={})))
    return path


def corrupt_store(directory: Path) -> Path:
    """A store of ours the daemon's decoder rejects: it sets it aside at run time."""
    path = directory / "state"
    path.write_bytes(pack(b"[]"))
    return path


def foreign_gzip(directory: Path) -> Path:
    """Gzip data that is not a store of ours (no mark, does not decode as a state)."""
    path = directory / "state"
    path.write_bytes(gzip.compress(b"[]"))
    return path


def link_to_a_store(directory: Path) -> Path:
    (directory / "real").write_bytes(encode(Snapshot(targets={})))
    path = directory / "state"
    path.symlink_to(directory / "real")
    return path


def under_a_file(directory: Path) -> Path:
    return text_file(directory) / "state"


NAMED = [
    # (id, TOML with {path}, line, field path, path maker, message or None when accepted)
    ("ca-missing", '[prometheus]\ncaFile = "{path}"\n', 2, "prometheus.caFile", missing,
     'cannot read "{path}": No such file or directory'),
    ("ca-directory", '[prometheus]\ncaFile = "{path}"\n', 2, "prometheus.caFile", a_directory,
     'cannot read "{path}": not a regular file: a directory'),
    ("ca-fifo", '[prometheus]\ncaFile = "{path}"\n', 2, "prometheus.caFile", a_fifo,
     'cannot read "{path}": not a regular file: a FIFO'),
    ("ca-device", '[prometheus]\ncaFile = "{path}"\n', 2, "prometheus.caFile",
     lambda _: Path("/dev/zero"), 'cannot read "{path}": not a regular file: a character device'),
    ("token-missing", '[prometheus.servers.t]\nurl = "http://t"\nbearerTokenFile = "{path}"\n', 3,
     "prometheus.servers.t.bearerTokenFile", missing,
     'cannot read "{path}": No such file or directory'),
    ("password-missing", '[prometheus]\nbasicAuth = {{ username = "u", passwordFile = "{path}" }}'
     "\n", 2, "prometheus.basicAuth.passwordFile", missing,
     'cannot read "{path}": No such file or directory'),
    ("password-under-a-file", '[prometheus]\nbasicAuth = {{ username = "u", passwordFile = '
     '"{path}" }}\n', 2, "prometheus.basicAuth.passwordFile", under_a_file,
     'cannot read "{path}": Not a directory'),
    ("kubeconfig-missing", '[kubernetes]\nkubeconfig = "{path}"\n', 2, "kubernetes.kubeconfig",
     missing, 'cannot read "{path}": No such file or directory'),
    ("kubeconfig-directory", '[kubernetes]\nkubeconfig = "{path}"\n', 2, "kubernetes.kubeconfig",
     a_directory, 'cannot read "{path}": not a regular file: a directory'),
    ("kubeconfig-second-of-two", '[kubernetes]\nkubeconfig = "' + "{path}.ok:{path}" + '"\n', 2,
     "kubernetes.kubeconfig", missing, 'cannot read "{path}": No such file or directory'),
    ("state-not-a-state-file", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile",
     text_file, 'cannot use "{path}" as the state file: it is not a state file of this daemon '
     "(it neither starts with the state file's mark nor decodes as a state an earlier "
     "version wrote); it is left as it is: point stateFile elsewhere"),
    ("state-empty", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile", empty_file,
     'cannot use "{path}" as the state file: it is not a state file of this daemon (it is '
     "empty)"),
    ("state-foreign-gzip", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile",
     foreign_gzip, 'cannot use "{path}" as the state file: it is not a state file of this '
     "daemon"),
    ("state-link", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile",
     link_to_a_store, 'cannot use "{path}" as the state file: it is a symbolic link'),
    ("state-directory", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile", a_directory,
     'cannot use "{path}" as the state file: it is a directory, not a state file'),
    ("state-fifo", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile", a_fifo,
     'cannot use "{path}" as the state file: it is a FIFO, not a state file'),
    ("state-under-a-file", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile",
     under_a_file, 'cannot use "{path}" as the state file: Not a directory'),
    ("state-missing", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile", missing, None),
    ("state-in-missing-directory", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile",
     in_missing_directory, None),
    ("state-valid", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile", state_file, None),
    ("state-corrupt-store", '[daemon]\nstateFile = "{path}"\n', 2, "daemon.stateFile",
     corrupt_store, None),
    ("ca-readable", '[prometheus]\ncaFile = "{path}"\n', 2, "prometheus.caFile", text_file, None),
]


@pytest.mark.parametrize(("text", "line", "field", "make", "message"),
                         [case[1:] for case in NAMED], ids=[case[0] for case in NAMED])
def test_named_file_is_checked_at_load(
    tmp_path: Path, *, text: str, line: int, field: str, make: Callable[[Path], Path],
    message: str | None,
) -> None:
    """A file the config names is refused at load with its field, line and the OS's reason."""
    path = make(tmp_path)
    if "{path}.ok" in text:
        Path(f"{path}.ok").write_text("apiVersion: v1\n")
    config = tmp_path / "autoscaler.toml"
    config.write_text(text.format(path=path))
    if message is None:
        load_config(config)
        return
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.path) == (str(config), line, field)
    assert issue.message.startswith(message.format(path=path)), issue.message


def test_every_named_file_is_reported_at_once(tmp_path: Path) -> None:
    """Missing files and other problems come back from one load, in file order."""
    config = tmp_path / "autoscaler.toml"
    config.write_text('[daemon]\nconcurrency = 0\nstateFile = "/etc/passwd"\n[prometheus]\n'
                      'caFile = "nope.pem"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert [(i.line, i.path) for i in caught.value.issues] == [
        (2, "daemon.concurrency"), (3, "daemon.stateFile"), (5, "prometheus.caFile")]


def test_relative_paths_resolve_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the daemon reads them: a relative caFile is found from the working directory."""
    (tmp_path / "ca.pem").write_text("pem\n")
    config = tmp_path / "conf" / "autoscaler.toml"
    config.parent.mkdir()
    config.write_text('[prometheus]\ncaFile = "ca.pem"\n')
    monkeypatch.chdir(tmp_path)
    assert load_config(config).prometheus.ca_file == Path("ca.pem")
    monkeypatch.chdir(config.parent)
    with pytest.raises(ConfigError, match=re.escape('cannot read "ca.pem"')):
        load_config(config)


def test_kubeconfig_expands_home_as_the_client_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``~/.kube/config`` is looked up under $HOME, as kubernetes-asyncio's loader does."""
    (tmp_path / "kc").write_text("apiVersion: v1\n")
    config = tmp_path / "autoscaler.toml"
    config.write_text('[kubernetes]\nkubeconfig = "~/kc"\n')
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_config(config).kubernetes.kubeconfig == Path("~/kc")


def test_files_are_not_checked_when_told_not_to(tmp_path: Path) -> None:
    """check --syntax-only and parse_config look at the text alone."""
    text = '[prometheus]\ncaFile = "/nonexistent/ca.pem"\n[daemon]\nstateFile = "/etc/passwd"\n'
    config = tmp_path / "autoscaler.toml"
    config.write_text(text)
    load_config(config, check_files=False)
    parse_config(text)
    with pytest.raises(ConfigError):
        parse_config(text, check_files=True)


# --- the config file itself -----------------------------------------------------------------

CONFIG_FILES = [
    # (id, maker, line, message)
    ("missing", missing, None, "cannot read the config: No such file or directory"),
    ("directory", a_directory, None, "cannot read the config: not a regular file: a directory"),
    ("fifo", hostile.fifo, None, "cannot read the config: not a regular file: a FIFO"),
    ("dev-zero", hostile.dev_zero, None,
     "cannot read the config: not a regular file: a character device"),
    ("too-large", hostile.big, None, "cannot read the config: too large for a config: 95.4 MiB "
     "(at most 8 MiB)"),
    ("nested", hostile.nested, None, "invalid TOML: arrays or tables nested too deeply"),
    ("huge-integer", hostile.huge_integer, None,
     "invalid TOML: an integer has more than 4300 digits"),
    ("binary", hostile.binary, 2, "not UTF-8 text: byte 0x89 at column 1"),
]


@pytest.mark.parametrize(("make", "line", "message"), [case[1:] for case in CONFIG_FILES],
                         ids=[case[0] for case in CONFIG_FILES])
def test_config_file_that_is_not_a_config_is_one_issue(
    tmp_path: Path, make: Callable[[Path], Path], line: int | None, message: str
) -> None:
    """Whatever the path holds, loading it ends in one ConfigError issue with no field path."""
    path = make(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.path, issue.message) == (str(path), line, "", message)


def test_config_at_the_size_limit_is_read(tmp_path: Path) -> None:
    """Exactly MAX_CONFIG_BYTES is still a config (a comment pads it)."""
    path = tmp_path / "autoscaler.toml"
    path.write_text(TARGET + "#" * (MAX_CONFIG_BYTES - len(TARGET) - 1) + "\n")
    assert path.stat().st_size == MAX_CONFIG_BYTES
    assert len(load_config(path).targets) == 1


def test_nested_tables_are_one_issue() -> None:
    """Inline tables nested past the parser's recursion: one issue, not a RecursionError."""
    text = "a = " + "{ b = " * 2000 + "1" + " }" * 2000 + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source="x.toml")
    assert str(caught.value) == "x.toml: invalid TOML: arrays or tables nested too deeply"
