"""A throwaway certificate authority and server certificate for the simulated API server.

Made once per test process with the ``openssl`` command (the ``cryptography`` package is not
installed) and cached: real clients refuse to send a bearer token over plain HTTP, so the
simulator must speak HTTPS with a CA that the generated kubeconfig embeds.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerTls:
    """PEM files of the CA and of a server certificate for 127.0.0.1, ::1 and localhost."""

    ca_cert: Path
    server_cert: Path
    server_key: Path

    def server_context(self) -> ssl.SSLContext:
        """An SSL context for the server side of the listening socket."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_cert, self.server_key)
        return context

    def ca_pem(self) -> bytes:
        return self.ca_cert.read_bytes()



_SERVER_EXT = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost
"""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _make(directory: Path) -> ServerTls:
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=simulated-apiserver-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _openssl("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=kube-apiserver", cwd=directory)
    (directory / "server.ext").write_text(_SERVER_EXT)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext",
             cwd=directory)
    return ServerTls(ca_cert=directory / "ca.crt", server_cert=directory / "server.crt",
                     server_key=directory / "server.key")


@functools.cache
def server_tls() -> ServerTls:
    """The process-wide CA and server certificate, made on first use (about 50 ms)."""
    directory = Path(tempfile.mkdtemp(prefix="sim-apiserver-tls-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return _make(directory)
