"""The session: kubeconfig or in-cluster, an explicit configuration, a timeout on every call."""

import asyncio
import time
import tracemalloc
from asyncio import sslproto
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
from kubernetes_asyncio.client import Configuration

from autoscaler.adapters.kube.discovery import Discovery
from autoscaler.adapters.kube.pod_cache import PodCache
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import (
    TLS_READ_BUFFER,
    InClusterFiles,
    KubeSession,
    pod_namespace,
    wants_in_cluster,
)
from autoscaler.errors import AccessDeniedError, InvalidConfigError, TransientError
from tests.adapters.kube.conftest import Ref, Settings, assert_rbac_covers
from tests.adapters.kube.waiting import eventually
from tests.sim.apiserver.tls import server_tls
from tests.sim.kube import SimApiServer


async def can_discover(session: KubeSession) -> bool:
    info = await Discovery(session.api_client).resolve("apps/v1", "Deployment")
    return info.scalable


async def test_kubeconfig_with_context(apiserver: SimApiServer) -> None:
    """A named context of a kubeconfig file connects; the global default stays untouched."""
    default_host = Configuration.get_default_copy().host
    settings = Settings(kubeconfig=apiserver.kubeconfig, context="sim")
    async with KubeSession.connect(settings) as session:
        assert await can_discover(session)
        assert session.api_client.configuration.host == apiserver.url
    assert Configuration.get_default_copy().host == default_host
    assert_rbac_covers(apiserver)


@pytest.mark.parametrize(
    ("context", "kubeconfig", "message"),
    [("nope", None, "context 'nope'"), (None, "/nonexistent/kubeconfig", "nonexistent"),
     (None, "garbage", "cannot load the kubeconfig")],
    ids=["unknown-context", "missing-file", "garbage-file"],
)
async def test_bad_kubeconfig(apiserver: SimApiServer, tmp_path: Path, context: str | None,
                              kubeconfig: str | None, message: str) -> None:
    """An unusable kubeconfig is an InvalidConfigError naming the file or context."""
    path = Path(kubeconfig) if kubeconfig else apiserver.kubeconfig
    if kubeconfig == "garbage":
        path = tmp_path / "kubeconfig"
        path.write_text("clusters: [unclosed\n")
    settings = Settings(kubeconfig=path, context=context)
    with pytest.raises(InvalidConfigError, match=message):
        async with KubeSession.connect(settings):
            pass


async def test_in_cluster(apiserver: SimApiServer, tmp_path: Path) -> None:
    """The service-account token and CA files plus KUBERNETES_SERVICE_* connect in a pod."""
    (tmp_path / "token").write_text(apiserver.token)
    (tmp_path / "ca.crt").write_bytes(server_tls().ca_pem())
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
               "KUBERNETES_SERVICE_PORT": str(apiserver.port)}
    files = InClusterFiles(token=tmp_path / "token", ca=tmp_path / "ca.crt")
    async with KubeSession.connect(Settings(in_cluster=None), environ=environ,
                                   files=files) as session:
        assert await can_discover(session)
    assert apiserver.log.records
    assert all(r.user and r.status == 200 for r in apiserver.log.records)


IN_POD = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}


@pytest.mark.parametrize(
    ("in_cluster", "environ", "token", "expected"),
    [(None, IN_POD, True, True), (None, IN_POD, False, False), (None, {}, True, False),
     (False, IN_POD, True, False), (True, {}, False, True)],
    ids=["auto-in-pod", "auto-no-token", "auto-outside", "forced-off", "forced-on"],
)
def test_in_cluster_detection(tmp_path: Path, in_cluster: bool | None,
                              environ: dict[str, str], token: bool, expected: bool) -> None:
    """in_cluster=None: in a pod when KUBERNETES_SERVICE_HOST is set and a token is mounted."""
    files = InClusterFiles(token=tmp_path / "token", ca=tmp_path / "ca.crt")
    if token:
        files.token.write_text("t")
    assert wants_in_cluster(Settings(in_cluster=in_cluster), environ, files) is expected


async def test_missing_in_cluster_files(tmp_path: Path) -> None:
    """In-cluster without a token file is an InvalidConfigError, not a crash later."""
    files = InClusterFiles(token=tmp_path / "token", ca=tmp_path / "ca.crt")
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"}
    with pytest.raises(InvalidConfigError, match="in-cluster service account"):
        async with KubeSession.connect(Settings(in_cluster=True), environ=environ, files=files):
            pass


async def test_bad_token_is_a_permission_error(apiserver: SimApiServer, tmp_path: Path) -> None:
    """A token the server does not know gives 401, reported as AccessDeniedError."""
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig", token="stolen")
    async with KubeSession.connect(Settings(kubeconfig=kubeconfig)) as session:
        with pytest.raises(AccessDeniedError, match="HTTP 401"):
            await can_discover(session)


async def test_request_timeout_is_applied(apiserver: SimApiServer) -> None:
    """A stalled server is a TransientError after request_timeout, not a hang."""
    apiserver.create_deployment("default", "web")
    apiserver.delay_next(1, seconds=5, resource="deployments/scale")
    settings = Settings(kubeconfig=apiserver.kubeconfig, request_timeout=0.5)
    async with KubeSession.connect(settings) as session:
        scales = ScaleClient(session.api_client, Discovery(session.api_client))
        started = time.monotonic()
        with pytest.raises(TransientError, match="timed out"):
            await scales.get_scale("default", Ref())
        assert 0.4 < time.monotonic() - started < 2.0
        assert (await scales.get_scale("default", Ref())).spec_replicas == 1


async def test_server_error_is_transient(kube: KubeSession, apiserver: SimApiServer) -> None:
    """A 500 is a TransientError carrying the server's message."""
    apiserver.create_deployment("default", "web")
    apiserver.fail_next(1, status=500, resource="deployments/scale")
    scales = ScaleClient(kube.api_client, Discovery(kube.api_client))
    with pytest.raises(TransientError, match="HTTP 500"):
        await scales.get_scale("default", Ref())
    assert (await scales.get_scale("default", Ref())).spec_replicas == 1


async def test_many_open_watches_never_starve_requests(apiserver: SimApiServer) -> None:
    """Each watch holds one HTTP/1.1 connection for its whole life: with more watches open than
    the client library's default pool (100), a GET must still go through, not queue forever."""
    namespaces = [f"team-{i:03d}" for i in range(120)]
    for namespace in namespaces:
        apiserver.create_namespace(namespace)
    apiserver.create_deployment("team-000", "web")
    settings = Settings(kubeconfig=apiserver.kubeconfig, request_timeout=3.0)
    async with (KubeSession.connect(settings) as session,
                PodCache(session.api_client, scope="namespaces") as pods):
        await pods.set_namespaces(namespaces)
        async with asyncio.timeout(20):
            await asyncio.gather(*(pods.wait_synced(ns) for ns in namespaces))
        scales = ScaleClient(session.api_client, Discovery(session.api_client))
        assert (await scales.get_scale("team-000", Ref())).spec_replicas == 1


async def test_open_connections_keep_small_tls_read_buffers(
        apiserver: SimApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio keeps a TLS read buffer of 256 KiB for each connection's life unless told
    otherwise; a session's connections read ``TLS_READ_BUFFER`` at a time. 40 open watches
    (40 connections, both ends in this process: the simulator serves TLS here) hold their
    buffers in asyncio's sslproto; on the code before, 40 x 2 x 256 KiB = 20 MB."""
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", sslproto.SSLProtocol.max_size)
    namespaces = [f"team-{i:02d}" for i in range(40)]
    for namespace in namespaces:
        apiserver.create_namespace(namespace)
    settings = Settings(kubeconfig=apiserver.kubeconfig, request_timeout=3.0)
    tracemalloc.start()
    try:
        async with (KubeSession.connect(settings) as session,
                    PodCache(session.api_client, scope="namespaces") as pods):
            await pods.set_namespaces(namespaces)
            async with asyncio.timeout(20):
                await asyncio.gather(*(pods.wait_synced(ns) for ns in namespaces))
            in_sslproto = tracemalloc.Filter(True, sslproto.__file__)
            held = sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(
                [in_sslproto]).statistics("filename"))
    finally:
        tracemalloc.stop()
    assert 40 * 2 * TLS_READ_BUFFER <= held <= 40 * 2 * 2 * TLS_READ_BUFFER, held
    assert sslproto.SSLProtocol.max_size == TLS_READ_BUFFER


@asynccontextmanager
async def token_file_session(api: SimApiServer, tmp_path: Path,
                             source: str) -> AsyncIterator[tuple[KubeSession, Path]]:
    """A session whose token lives in a file: a kubeconfig's ``tokenFile`` (named relative to
    the kubeconfig, as kubectl resolves it) or the in-cluster service-account token."""
    token = tmp_path / "token"
    token.write_text(api.token + "\n")  # as `echo $TOKEN > token` writes it; client-go trims
    if source == "kubeconfig":
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", token_file="token")
        async with KubeSession.connect(Settings(kubeconfig=kubeconfig)) as session:
            yield session, token
        return
    (tmp_path / "ca.crt").write_bytes(server_tls().ca_pem())
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
               "KUBERNETES_SERVICE_PORT": str(api.port)}
    files = InClusterFiles(token=token, ca=tmp_path / "ca.crt")
    async with KubeSession.connect(Settings(in_cluster=True), environ=environ,
                                   files=files) as session:
        yield session, token


def rotate(api: SimApiServer, token_file: Path, new: str) -> None:
    """The file is replaced atomically (as kubelet swaps a projected volume) with a token of a
    new identity, and the old token is revoked at once: its next use is a 401."""
    api.add_token(new, user="rotated")
    staged = token_file.with_name("token.new")
    staged.write_text(new)
    staged.replace(token_file)
    api.revoke_token(api.token)


TOKEN_SOURCES = pytest.mark.parametrize("source", ["kubeconfig", "in-cluster"],
                                        ids=["kubeconfig-tokenFile", "in-cluster"])


@TOKEN_SOURCES
async def test_rotated_token_file_is_used_at_once(apiserver: SimApiServer, tmp_path: Path,
                                                  source: str) -> None:
    """After the token file is rewritten and the old token revoked, the next request succeeds
    with the new token: its 401 makes the session re-read the file and retry once."""
    async with token_file_session(apiserver, tmp_path, source) as (session, token):
        assert await can_discover(session)
        rotate(apiserver, token, "rotated-token")
        seen = len(apiserver.log.records)
        started = time.monotonic()
        assert await can_discover(session)
        elapsed = time.monotonic() - started
        assert await can_discover(session)
    after = apiserver.log.records[seen:]
    assert [r.status for r in after][:2] == [401, 200]
    assert all(r.user == "rotated" for r in after if r.status == 200)
    assert [r.status for r in after].count(401) == 1
    assert elapsed < 1.0
    print(f"rotation to first success ({source}): {elapsed * 1000:.1f} ms")


@TOKEN_SOURCES
async def test_watch_reconnects_with_rotated_token(apiserver: SimApiServer, tmp_path: Path,
                                                   source: str) -> None:
    """A watch reopened after the rotation carries the new token: the cache keeps following."""
    apiserver.create_deployment("default", "web", replicas=1)
    async with token_file_session(apiserver, tmp_path, source) as (session, token), \
            PodCache(session.api_client, watch_timeout=30) as pods:
        pods.add_namespace("default")
        async with asyncio.timeout(5):
            await pods.wait_synced("default")
        rotate(apiserver, token, "rotated-token")
        apiserver.expire_watches()
        apiserver.set_replicas("Deployment", "default", "web", 3)
        apiserver.settle()
        await eventually(lambda: len(pods.pods_for("default", "app=web")) == 3)
    watches = [r for r in apiserver.log.records if r.verb == "watch"]
    assert watches[-1].status == 200
    assert watches[-1].user == "rotated"


async def test_insecure_kubeconfig_warns_once(apiserver: SimApiServer, tmp_path: Path) -> None:
    """insecure-skip-tls-verify connects, and says so in one structured warning at start."""
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig", insecure=True)
    with structlog.testing.capture_logs() as logs:
        async with KubeSession.connect(Settings(kubeconfig=kubeconfig)) as session:
            assert await can_discover(session)
            assert await can_discover(session)
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(warnings) == 1
    assert "insecure-skip-tls-verify" in warnings[0]["event"]
    assert warnings[0]["kubeconfig"] == str(kubeconfig)
    assert warnings[0]["server"] == apiserver.url


async def test_refused_token_file_is_retried_only_when_it_changed(apiserver: SimApiServer,
                                                                   tmp_path: Path) -> None:
    """A 401 while the file still holds the refused token is an AccessDeniedError after one
    request: the retry is for a rotated token, not a loop."""
    async with token_file_session(apiserver, tmp_path, "kubeconfig") as (session, _):
        apiserver.revoke_token(apiserver.token)
        with pytest.raises(AccessDeniedError, match="HTTP 401"):
            await can_discover(session)
    assert [r.status for r in apiserver.log.records] == [401]


async def test_token_file_wins_over_token(apiserver: SimApiServer, tmp_path: Path) -> None:
    """A kubeconfig user with both a token and a tokenFile authenticates with the file, as
    kubectl does."""
    apiserver.add_token("from-file", user="file-user")
    (tmp_path / "token").write_text("from-file")
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig", token_file="token")
    kubeconfig.write_text(kubeconfig.read_text().replace(
        "tokenFile: token", f"tokenFile: token\n    token: {apiserver.token}"))
    async with KubeSession.connect(Settings(kubeconfig=kubeconfig)) as session:
        assert await can_discover(session)
    assert {r.user for r in apiserver.log.records} == {"file-user"}


@pytest.mark.parametrize(
    ("environ", "file_text", "namespace"),
    [({"POD_NAMESPACE": "ops"}, "kube-system\n", "ops"), ({}, "kube-system\n", "kube-system"),
     ({}, None, "default"), ({}, "  \n", "default")],
    ids=["downward-api", "service-account", "outside-a-pod", "empty-file"],
)
def test_pod_namespace(tmp_path: Path, environ: dict[str, str], file_text: str | None,
                       namespace: str) -> None:
    """POD_NAMESPACE first, then the service account's namespace file, else default."""
    path = tmp_path / "namespace"
    if file_text is not None:
        path.write_text(file_text)
    assert pod_namespace(environ, InClusterFiles(namespace=path)) == namespace


async def test_every_answer_tells_the_api_servers_clock(apiserver: SimApiServer) -> None:
    """A success and an error both carry the server's Date, with the monotonic times the
    request was sent and answered: the server's clock, within them, is the machine's."""
    from email.utils import parsedate_to_datetime

    from kubernetes_asyncio.client import AppsV1Api

    apiserver.create_deployment("default", "web", replicas=2, labels={"app": "web"})
    seen: list[tuple[str | None, float, float]] = []
    settings = Settings(kubeconfig=apiserver.kubeconfig)
    async with KubeSession.connect(settings, on_date=lambda *d: seen.append(d)) as session:
        apps = AppsV1Api(session.api_client)
        await apps.read_namespaced_deployment("web", "default")
        with pytest.raises(Exception, match="404"):
            await apps.read_namespaced_deployment("absent", "default")
    assert len(seen) == 2
    offset = time.time() - time.monotonic()
    for date, sent, answered in seen:
        assert date is not None
        assert sent <= answered
        stamp = parsedate_to_datetime(date).timestamp()
        assert stamp - 1 <= answered + offset
        assert sent + offset <= stamp + 1
