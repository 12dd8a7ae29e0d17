"""Expected failures of every command, as a user meets them: one line, the right exit code,
no traceback, in bounded time.

Each case runs ``python -m autoscaler`` in a child process against what the case sets up on
127.0.0.1 (a port nobody listens on, a port taken, a server that never answers, one that
answers 404 or nothing) and checks the exit code (1 a failure, 2 a usage error), a fragment
of the message, that stderr holds no "Traceback", that a failure is exactly one line, and
the wall time.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.commands.fake_http import EMPTY_VECTOR, serving
from tests.sim.prometheus import free_port

ROOT = Path(__file__).parents[2]
SECONDS = 10.0
"""Bound on a case: Python and the imports take ~1 s; every case must fail fast."""

Setup = Callable[[Path, contextlib.ExitStack], tuple[list[str], dict[str, str]]]


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    setup: Setup
    code: int
    fragment: str
    seconds: float = SECONDS
    one_line: bool = True


def kubeconfig(tmp: Path, server: str) -> Path:
    path = tmp / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return path


def config(tmp: Path, *, prometheus: str = "http://127.0.0.1:9", kube: Path | None = None,
           listen: int = 0, metrics: int = 1, query: str = "app_load{${pod_selector}}") -> Path:
    kubernetes = f'[kubernetes]\nkubeconfig = "{kube}"\n' if kube else ""
    one = (f"[[autoscaler.metrics]]\ntype = \"Pods\"\npods = {{ metric = {{ name = \"m{{i}}\" }}, "
           f"target = {{ type = \"AverageValue\", averageValue = \"1\" }}, query = '{query}' }}\n")
    path = tmp / "autoscaler.toml"
    path.write_text(f"""[daemon]
listenAddress = "127.0.0.1:{listen or free_port()}"
[prometheus]
url = "{prometheus}"
timeout = "1s"
{kubernetes}
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
maxReplicas = 5
""" + "".join(one.replace("{i}", str(i)) for i in range(metrics)))
    return path


def listening(stack: contextlib.ExitStack) -> int:
    """A port something listens on (and accepts), held for the case."""
    sock = stack.enter_context(socket.socket())
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return int(sock.getsockname()[1])


def no_home(tmp: Path) -> dict[str, str]:
    """An environment with no kubeconfig anywhere and not in a pod."""
    (tmp / "home").mkdir(exist_ok=True)
    return {"HOME": str(tmp / "home"), "KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": ""}


def run_without_kubeconfig(tmp: Path, _: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
    return ["run", "--config", str(config(tmp))], no_home(tmp)


def run_port_taken(tmp: Path, stack: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
    taken = listening(stack)
    path = config(tmp, kube=kubeconfig(tmp, f"https://127.0.0.1:{free_port()}"), listen=taken)
    return ["run", "--config", str(path)], {}


def plan_api_down(tmp: Path, _: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
    port = free_port()
    path = config(tmp, kube=kubeconfig(tmp, f"https://127.0.0.1:{port}"))
    return ["plan", "--config", str(path)], {"CASE_PORT": str(port)}


def plan_prometheus_down(tmp: Path, stack: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
    api = listening(stack)
    port = free_port()
    path = config(tmp, kube=kubeconfig(tmp, f"https://127.0.0.1:{api}"),
                  prometheus=f"http://127.0.0.1:{port}")
    return ["plan", "--config", str(path)], {}


def check_with(server: Callable[[contextlib.ExitStack], str], *extra: str,
               metrics: int = 4) -> Setup:
    def setup(tmp: Path, stack: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
        url = server(stack)
        return ["check", str(config(tmp, prometheus=url, metrics=metrics)), "--prometheus",
                *extra], {}
    return setup


def refused(_: contextlib.ExitStack) -> str:
    return f"http://127.0.0.1:{free_port()}"


def hanging(stack: contextlib.ExitStack) -> str:
    return stack.enter_context(serving(hang=True))


def not_found(stack: contextlib.ExitStack) -> str:
    return stack.enter_context(serving(status=404)) + "/prometheus"


def empty(stack: contextlib.ExitStack) -> str:
    return stack.enter_context(serving(body=EMPTY_VECTOR))


STATUS = {"targets": {"default/Deployment/web": {"conditions": []},
                      "shop/Deployment/web": {"conditions": []},
                      "default/Deployment/api": {"conditions": []}}}


def status_of(target: str) -> Setup:
    def setup(tmp: Path, stack: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
        url = stack.enter_context(serving(body=STATUS))
        return ["status", "--url", url, target], {}
    return setup


def args(*given: str, make_config: bool = False) -> Setup:
    def setup(tmp: Path, _: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
        path = str(config(tmp)) if make_config else ""
        return [a.replace("{config}", path).replace("{tmp}", str(tmp)) for a in given], {}
    return setup


CASES = [
    Case("run-without-kubeconfig", run_without_kubeconfig, 1,
         "autoscaler run: kubernetes: no kubeconfig: "),
    Case("run-listen-port-taken", run_port_taken, 1,
         "the address is in use (another daemon?); set daemon.listenAddress or --listen"),
    Case("run-invalid-config", args("run", "--config", "{tmp}/none.toml"), 1,
         "autoscaler run: invalid config, not starting:", one_line=False),
    Case("run-shard-without-total", args("run", "--config", "{config}", "--shard", "0",
                                         make_config=True), 2,
         "autoscaler run: error: --shard and --total-shards go together", one_line=False),
    # Every override meets the rule of the config key it overrides (a usage error).
    Case("run-listen-port-out-of-range", args("run", "--config", "{config}", "--listen",
                                              "127.0.0.1:99999", make_config=True), 2,
         'autoscaler run: error: argument --listen: must have a port from 1 to 65535, got '
         '"127.0.0.1:99999"', one_line=False),
    Case("run-listen-no-port", args("run", "--config", "{config}", "--listen", "localhost",
                                    make_config=True), 2,
         'autoscaler run: error: argument --listen: must be HOST:PORT, got "localhost"',
         one_line=False),
    Case("run-kubeconfig-missing", args("run", "--config", "{config}", "--kubeconfig",
                                        "{tmp}/nope", make_config=True), 2,
         "autoscaler run: error: argument --kubeconfig: cannot read {tmp}/nope: No such file or "
         "directory", one_line=False),
    Case("plan-api-server-down", plan_api_down, 1,
         "autoscaler plan: cannot reach the API server at https://127.0.0.1:"),
    Case("plan-prometheus-down", plan_prometheus_down, 1,
         "cannot reach Prometheus server 'default' at http://127.0.0.1:"),
    Case("plan-without-config", args("plan"), 2,
         "the following arguments are required: -c/--config", one_line=False),
    Case("plan-unknown-target", args("plan", "--config", "{config}", "--target", "shop/web",
                                     make_config=True), 1,
         "no target 'shop/web' in "),
    # check --prometheus says what it is doing first (a progress line), then the problem once.
    Case("check-prometheus-refuses", check_with(refused), 1,
         "connection refused; check its url in the [prometheus] table (4 queries not checked)",
         one_line=False),
    Case("check-prometheus-never-answers", check_with(hanging, "--timeout", "1"), 1,
         "running the queries of 4 metrics against 1 Prometheus server...", one_line=False),
    Case("check-prometheus-404", check_with(not_found), 1,
         "answered HTTP 404 to every query: is that the Prometheus base URL?", one_line=False),
    Case("check-empty-answer-warns", check_with(empty, metrics=1), 0, ""),
    Case("check-empty-answer-strict", check_with(empty, "--strict", metrics=1), 1, "",
         one_line=False),
    Case("check-config-twice", args("check", "{config}", "--config", "{tmp}/other.toml",
                                    make_config=True), 2,
         "give the config once", one_line=False),
    Case("status-unknown-target", status_of("default/Deployment/wbe"), 1,
         "the daemon has no target 'default/Deployment/wbe'; did you mean "
         "default/Deployment/web"),
    Case("status-ambiguous-target", status_of("web"), 1,
         "'web' names several targets: default/Deployment/web, shop/Deployment/web"),
    Case("status-daemon-down", args("status", "--url", "127.0.0.1:9"), 1,
         "cannot reach the daemon at http://127.0.0.1:9/status"),
    Case("unknown-command", args("scale"), 2, "invalid choice: 'scale'", one_line=False),
    Case("import-hpa-old-output-flag", args("import-hpa", "x.yaml", "-o", "out.toml"), 2,
         "autoscaler import-hpa: error: unrecognized arguments: -o", one_line=False),
    Case("simulate-missing-config", args("simulate", "--config", "{tmp}/none.toml", "--trace",
                                         "x.csv"), 1, "cannot read the config",
         one_line=False),
]


@dataclass(frozen=True, slots=True)
class Result:
    code: int
    stdout: str
    stderr: str
    seconds: float


def run_cli(argv: list[str], env: dict[str, str], timeout: float) -> Result:
    environment = {**os.environ, "NO_COLOR": "1"}
    environment.pop("KUBECONFIG", None)
    for name, value in env.items():
        if value:
            environment[name] = value
        else:
            environment.pop(name, None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "autoscaler", *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=environment, check=False)
    return Result(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


@contextlib.contextmanager
def prepared(case: Case, tmp: Path) -> Iterator[tuple[list[str], dict[str, str]]]:
    with contextlib.ExitStack() as stack:
        yield case.setup(tmp, stack)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_expected_failure(tmp_path: Path, case: Case) -> None:
    """The exit code, a message naming what failed and what to check, no traceback, fast."""
    with prepared(case, tmp_path) as (argv, env):
        result = run_cli(argv, env, timeout=case.seconds + 20)
    print(f"\n{case.id}: exit {result.code}, {result.seconds:.2f} s\n{result.stderr}")
    assert "Traceback" not in result.stderr
    assert result.code == case.code, result.stderr
    fragment = case.fragment.replace("{tmp}", str(tmp_path))
    assert fragment in result.stderr
    assert not fragment or result.stderr.count(fragment) == 1  # said once
    if case.one_line and case.code == 1:
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.seconds < case.seconds
