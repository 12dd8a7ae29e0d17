"""Thin adapters between the pure core and the outside world (Prometheus, Kubernetes)."""
