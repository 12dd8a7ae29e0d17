"""The ``autoscaler`` console script (``autoscaler.cli:main``) and ``python -m autoscaler``.

Every command lives in ``autoscaler.commands``; this module only names the entry point.
"""

from autoscaler.commands import main

__all__ = ["main"]
