"""The one error the simulator raises on purpose: bad input, said plainly.

A bad trace, workload or flag is the user's to fix, so the command prints the message (with
the file, line or flag it came from) and exits 2 instead of showing a traceback.
"""

from __future__ import annotations

from autoscaler.errors import AutoscalerError


class SimulationError(AutoscalerError):
    """The simulation cannot run on this input; the message says which input and why."""
