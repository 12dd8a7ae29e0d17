"""The errors the simulator raises on purpose, said plainly.

As for every command: a flag that cannot work, alone or with another, is a usage error
(``FlagError``: the message and the usage, exit 2); anything about what the inputs hold or
what the run meets (a trace or workload file that cannot be read or has no data, a
Prometheus that answers nothing, an output the system refuses) is a failure: one line naming
the file, line or query, exit 1. Never a traceback.
"""

from __future__ import annotations

from autoscaler.errors import AutoscalerError


class SimulationError(AutoscalerError):
    """The simulation cannot run on this input; the message says which input and why."""


class OutputError(SimulationError):
    """An output could not be written; the message names the file and the system's reason."""


class FlagError(SimulationError):
    """A flag's value, or flags together, that cannot work: a usage error."""
