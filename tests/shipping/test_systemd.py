"""The systemd unit: it parses, and its hardening does not regress."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autoscaler.observability.listener import MAX_CONNECTIONS

UNIT = Path(__file__).parents[2] / "systemd" / "autoscaler.service"
SYSUSERS = UNIT.with_suffix(".sysusers")
ANALYZE = shutil.which("systemd-analyze")
pytestmark = pytest.mark.skipif(  # loud: the reason is printed with -ra, and CI installs it
    ANALYZE is None, reason="systemd-analyze is not installed (Debian package 'systemd')")


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run([ANALYZE, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_unit_verifies() -> None:
    """systemd-analyze verify finds nothing wrong but the binary not being installed here."""
    result = analyze("verify", str(UNIT))
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if line.strip() and "is not executable" not in line
                and "No such file or directory" not in line]
    assert problems == []


def test_hardening_exposure_stays_low() -> None:
    """The offline security score stays at or below 2.0 ("OK"); it was 1.2 when written."""
    result = analyze("security", "--offline=true", "--threshold=20", str(UNIT))
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, result.stdout[-500:]
    assert float(match.group(1)) <= 2.0


def test_notify_watchdog_and_restart() -> None:
    """Type=notify with a watchdog, restarted on failure, reload by SIGHUP, its own account."""
    text = UNIT.read_text()
    for line in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "User=autoscaler",
                 "Group=autoscaler", "ExecReload=/bin/kill -HUP $MAINPID",
                 "ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes"):
        assert line in text


def test_files_are_read_in_place() -> None:
    """No credential copies (a snapshot taken at start would defeat reload and rotation), and
    no dynamic account (no file could be given to its group)."""
    settings = [line.split("=", 1)[0] for line in UNIT.read_text().splitlines()]
    assert "LoadCredential" not in settings
    assert "DynamicUser" not in settings


def test_sysusers_creates_the_account(tmp_path: Path) -> None:
    """systemd-sysusers makes the unit's user and group from the shipped file."""
    sysusers = shutil.which("systemd-sysusers")
    assert sysusers is not None
    (tmp_path / "etc").mkdir()
    lines = [line for line in SYSUSERS.read_text().splitlines() if not line.startswith("#")]
    subprocess.run([sysusers, f"--root={tmp_path}", "--inline", *lines], check=True,
                   capture_output=True, timeout=60)
    passwd = (tmp_path / "etc" / "passwd").read_text()
    assert re.search(r"^autoscaler:x:\d+:\d+:.*:/var/lib/autoscaler:", passwd, re.M), passwd
    assert (tmp_path / "etc" / "group").read_text().startswith("autoscaler:x:")


def test_the_descriptor_limit_leaves_the_scaling_path_its_share() -> None:
    """LimitNOFILE is set (systemd's default soft limit is 1,024), and the HTTP listener's
    share of it leaves thousands of descriptors to the scaling path."""
    (line,) = [line for line in UNIT.read_text().splitlines()
               if line.startswith("LimitNOFILE=")]
    limit = int(line.partition("=")[2])
    assert limit - min(MAX_CONNECTIONS, limit // 4) >= 4096
