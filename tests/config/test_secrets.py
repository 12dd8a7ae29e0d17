"""Secrets in the configuration never reach a repr (and so never a log line)."""

from __future__ import annotations

from autoscaler.config.validated import PrometheusServer


def test_prometheus_server_repr_hides_url_credentials_and_header_values() -> None:
    """user:password@ in the URL and header values are not printed; header names are."""
    server = PrometheusServer(name="a", url="https://user:s3cret@prom.example:9090/api?x=1",
                              headers={"Authorization": "Bearer t0ken"})
    text = repr(server)
    assert "s3cret" not in text
    assert "user" not in text
    assert "t0ken" not in text
    assert "prom.example:9090" in text
    assert "Authorization" in text
