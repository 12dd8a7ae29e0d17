"""The errors the simulator raises on purpose, said plainly.

A bad trace, workload or flag is the user's to fix, so the command prints the message (with
the file, line or flag it came from) and exits 2 instead of showing a traceback. An output
the system refuses (a full disk, no permission) is a failure, not a usage error: one line,
exit 1.
"""

from __future__ import annotations

from autoscaler.errors import AutoscalerError


class SimulationError(AutoscalerError):
    """The simulation cannot run on this input; the message says which input and why."""


class OutputError(SimulationError):
    """An output could not be written; the message names the file and the system's reason."""
