"""Fixtures shared with the config tests: a Prometheus with the seeded series."""

from tests.config.conftest import prometheus

__all__ = ["prometheus"]
