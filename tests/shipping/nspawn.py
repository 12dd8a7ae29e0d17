"""A throwaway machine booted by systemd, for tests of what the README tells an operator to do.

``systemd-nspawn --volatile=yes`` boots this machine's own systemd and ``/usr`` on a tmpfs
root: ``/etc`` and ``/var`` start empty and vanish at exit, so the host is left as it was. The
host's network namespace is shared: a daemon inside reaches the servers a test runs on
127.0.0.1, and the test reaches the daemon's endpoints. One unit, named on the kernel command
line instead of a default target, runs the test's script as root; it reports through files in
a directory bound from the host (``Machine.out``) and waits for the host's word to shut down.

Needs root (namespaces, bind mounts, file owners inside) and ``systemd-nspawn`` (Debian's
``systemd-container``); ``unavailable()`` says why not, for a loud skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

NSPAWN = shutil.which("systemd-nspawn")
OUT = Path("/e2e-out")
"""Where the machine sees ``Machine.out``."""

_DRIVER_UNIT = """\
[Unit]
Description=the test's script
[Service]
Type=oneshot
ExecStart=/bin/bash /e2e/driver.sh
"""

_DRIVER_SCRIPT = """\
#!/bin/bash
exec >>{out}/driver.log 2>&1
set -x
{script}
systemctl poweroff --no-block
"""


def unavailable() -> str | None:
    """Why no machine can be booted here, or None."""
    if os.geteuid() != 0:
        return "booting a systemd container needs root (CI runs as root)"
    if NSPAWN is None:
        return "systemd-nspawn is not installed (Debian package 'systemd-container')"
    return None


@dataclass(frozen=True, slots=True)
class Machine:
    out: Path
    process: asyncio.subprocess.Process
    console: Path

    async def wait_for(self, name: str, *, timeout: float) -> str:
        """The text of the report ``name`` once the script wrote it (reports are written to a
        temporary name and renamed, so they are never read half-written)."""
        path = self.out / name
        async with asyncio.timeout(timeout):
            while not path.exists():
                if self.process.returncode is not None:
                    raise AssertionError(f"the machine stopped before {name!r}\n"
                                         + self.diagnostics())
                await asyncio.sleep(0.1)
        return path.read_text()

    def stop(self) -> None:
        """Let the script go past ``WAIT_FOR_STOP``."""
        (self.out / "stop").touch()

    def diagnostics(self) -> str:
        """The script's trace, the unit's journal and the container's console, last lines."""
        parts = []
        for path in (self.out / "driver.log", self.out / "journal", self.console):
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-60:]
                parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)


def report(name: str, command: str) -> str:
    """A script line writing ``command``'s output as the report ``name``, atomically (its
    errors go to the trace)."""
    return f"{{ {command} ; }} > {OUT}/{name}.tmp; mv {OUT}/{name}.tmp {OUT}/{name}"


WAIT_FOR_STOP = (f"for _ in $(seq 600); do [ -e {OUT}/stop ] && break; sleep 0.2; done")
"""A script line waiting (at most 2 minutes) until the host says ``stop``: ``Machine.stop()``,
or the end of ``booted``'s block, whatever happened in it."""


@contextlib.asynccontextmanager
async def booted(script: str, *, workdir: Path, read_only: Sequence[str] = (),
                 options: Sequence[str] = ()) -> AsyncIterator[Machine]:
    """Boot a machine that runs ``script`` (bash, as root) then powers off. ``read_only`` are
    nspawn ``--bind-ro`` arguments (``PATH`` or ``HOST:MACHINE``); ``options`` more of
    nspawn's (``--private-network``, ``--bind=...``, ``--hostname=...``)."""
    assert NSPAWN is not None
    # One name per test process: two runs side by side must not share nspawn's state.
    name = f"autoscaler-e2e-{os.getpid()}"
    arguments = _stage(script, workdir=workdir, read_only=read_only, options=options,
                       name=name)
    console = workdir / "console.log"
    with console.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            NSPAWN, *arguments, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
    machine = Machine(out=workdir / "out", process=process, console=console)
    try:
        yield machine
    finally:
        machine.stop()
        await _halt(process)


def _stage(script: str, *, workdir: Path, read_only: Sequence[str], options: Sequence[str],
           name: str) -> list[str]:
    """Write the driver unit and script; nspawn's arguments to boot them."""
    staged, out = workdir / "machine", workdir / "out"
    staged.mkdir()
    out.mkdir()
    (staged / "driver.sh").write_text(_DRIVER_SCRIPT.format(out=OUT, script=script))
    (staged / "driver.service").write_text(_DRIVER_UNIT)
    nsswitch = Path("/etc/nsswitch.conf")
    return [
        "--quiet", "--directory=/", "--volatile=yes", "--register=no", "--keep-unit",
        f"--machine={name}", "--console=passive",
        f"--bind-ro={staged}:/e2e", f"--bind={out}:{OUT}",
        f"--bind-ro={staged}/driver.service:/etc/systemd/system/driver.service",
        # Users resolve as on the host (Debian: files, then systemd's dynamic users).
        *([f"--bind-ro={nsswitch}"] if nsswitch.exists() else []),
        *(f"--bind-ro={spec}" for spec in read_only), *options,
        # The first boot of an empty /etc would stop at systemd-firstboot's questions.
        "--boot", "systemd.unit=driver.service", "systemd.firstboot=off",
    ]


async def _halt(process: asyncio.subprocess.Process) -> None:
    """Let the script power the machine off; else ask nspawn to halt it (SIGTERM); else kill
    the machine's init, which ends every process inside, then nspawn."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), 30)
        return
    process.send_signal(signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), 15)
        return
    for child in _children(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    process.kill()
    await process.wait()


def _children(pid: int) -> list[int]:
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    return children
