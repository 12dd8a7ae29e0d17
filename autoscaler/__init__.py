"""A Prometheus-driven autoscaler for Kubernetes that runs the HPA algorithm exactly.

Importing the package first decides which build of the core runs (``autoscaler.compiled``):
the mypyc-compiled modules only if they were built from the sources beside them.
"""

from autoscaler.compiled import choose_core

CORE = choose_core()
