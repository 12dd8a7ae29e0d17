"""Kubeconfig files pointing at the simulator: CA embedded, bearer token, context "sim"."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from .tls import server_tls


def write_kubeconfig(path: Path, *, url: str, token: str, namespace: str = "default") -> Path:
    ca = base64.b64encode(server_tls().ca_pem()).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "sim", "cluster": {"server": url,
                                                 "certificate-authority-data": ca}}],
        "users": [{"name": "sim-user", "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim-user",
                                                 "namespace": namespace}}],
        "current-context": "sim",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
