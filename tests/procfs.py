"""A process's memory as the kernel counts it (``/proc/PID/status``): a leaf module, so a
measured process that imports it loads nothing else."""

from __future__ import annotations


def memory_kib(pid: int, field: str = "VmRSS") -> int:
    """``VmRSS`` (now) or ``VmHWM`` (the peak so far) of process ``pid``, in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(f"{field} not in /proc/{pid}/status")
