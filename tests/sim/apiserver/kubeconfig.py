"""Kubeconfig files pointing at the simulator: CA embedded, bearer token, context "sim"."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from .tls import server_tls


def write_kubeconfig(path: Path, *, url: str, token: str, namespace: str = "default",
                     token_file: str | None = None, insecure: bool = False) -> Path:
    """``token_file`` names a file instead of the token (kept as written: relative paths are
    relative to the kubeconfig); ``insecure`` skips TLS verification instead of a CA."""
    cluster: dict[str, Any] = {"server": url}
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    else:
        cluster["certificate-authority-data"] = base64.b64encode(server_tls().ca_pem()).decode()
    user = {"tokenFile": token_file} if token_file else {"token": token}
    config = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "sim", "cluster": cluster}],
        "users": [{"name": "sim-user", "user": user}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim-user",
                                                 "namespace": namespace}}],
        "current-context": "sim",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
