"""import-hpa against hostile and absurd input, as a user runs it: a one-line error, in bounds.

Each case runs ``python -m autoscaler import-hpa`` in a child process and checks its exit
code, a fragment of its message, that stderr holds no traceback and (for errors) exactly one
line, and that the child stayed under a time and a peak-RSS bound (its own VmHWM).
The child's address space is capped at 2 GiB so that a regression fails the case instead of
exhausting the machine. Run with ``-s`` to see each case's time and peak RSS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
MANIFESTS = Path(__file__).parent / "manifests"
MiB = 2**20
SECONDS = 10.0
"""Bound on a small case: Python starting and importing the config package is ~0.4 s."""
RSS_MIB = 60
"""Bound on a small case's peak RSS: the interpreter and its imports take ~36 MiB."""
ADDRESS_SPACE = 2 * 2**30

HPA = b"""\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 3
"""


def billion_laughs(levels: int = 9) -> bytes:
    """9 anchors of 9 aliases each: 9^9 (387 million) strings from 2 kB of YAML."""
    lines = [HPA.decode(), "  x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    lines += ["  metrics:", "  - type: External", "    external:",
              f"      metric: {{name: q, selector: {{matchExpressions: *a{levels - 1}}}}}",
              "      target: {type: Value, value: 1}"]
    return "\n".join(lines).encode() + b"\n"


def many_hpas(size: int) -> bytes:
    """A kubectl-style List of HPAs, just over ``size`` bytes."""
    item = (MANIFESTS / "kubectl-list.yaml").read_text().split("items:\n")[1].split("kind: List")[0]
    count = size // len(item) + 1
    return ("apiVersion: v1\nitems:\n" + item * count + "kind: List\n").encode()


def hpa_with(spec_lines: str) -> bytes:
    return HPA + spec_lines.encode()


@dataclass(frozen=True, slots=True)
class Input:
    """How a case hands its input to the child: arguments and stdin, made in a temp dir."""

    make: Callable[[Path], tuple[list[str], str | None]]


def file(content: bytes, *args: str) -> Input:
    def make(tmp: Path) -> tuple[list[str], str | None]:
        (tmp / "in.yaml").write_bytes(content)
        return [str(tmp / "in.yaml"), *[a.replace("{tmp}", str(tmp)) for a in args]], None
    return Input(make)


def path(name: str, prepare: Callable[[Path], None] = lambda _: None) -> Input:
    def make(tmp: Path) -> tuple[list[str], str | None]:
        prepare(tmp)
        return [name.replace("{tmp}", str(tmp))], None
    return Input(make)


def stdin(source: str) -> Input:
    return Input(lambda tmp: (["-"], source))


def sparse(tmp: Path) -> None:
    with (tmp / "big.yaml").open("wb") as stream:
        stream.truncate(5 * 2**30)


CASES = [
    # (id, input, exit code, message fragment, seconds, peak RSS MiB)
    ("billion-laughs", file(billion_laughs()), 1,
     "in.yaml:9: YAML aliases (*name) are not supported", SECONDS, RSS_MIB),
    ("alias-to-scalar", file(hpa_with("  minReplicas: &one 1\n  x: *one\n")), 1,
     "in.yaml:8: YAML aliases", SECONDS, RSS_MIB),
    ("deep-flow-nesting", file(hpa_with("  x: " + "[" * 100_000 + "]" * 100_000 + "\n")), 1,
     "in.yaml:7: invalid YAML: exceeded maximum nesting depth", SECONDS, RSS_MIB),
    ("deep-block-nesting", file(hpa_with("".join(
        f"{'  ' * (i + 1)}k{i}:\n" for i in range(200)))), 1,
     "nested deeper than 64 levels", SECONDS, RSS_MIB),
    ("over-10MiB", file(many_hpas(10 * MiB)), 1,
     "in.yaml: larger than 10 MiB, the most an import reads from one input", SECONDS, RSS_MIB),
    ("sparse-5GiB", path("{tmp}/big.yaml", sparse), 1, "big.yaml: larger than 10 MiB",
     SECONDS, RSS_MIB),
    ("dev-zero", path("/dev/zero"), 1, "/dev/zero: not a regular file or a pipe", SECONDS,
     RSS_MIB),
    ("fifo-without-writer", path("{tmp}/pipe", lambda tmp: os.mkfifo(tmp / "pipe")), 1,
     "no HorizontalPodAutoscaler found in", SECONDS, RSS_MIB),
    ("directory", path("{tmp}"), 1, ": is a directory", SECONDS, RSS_MIB),
    ("missing-file", path("{tmp}/nothing.yaml"), 1, "nothing.yaml: No such file or directory",
     SECONDS, RSS_MIB),
    ("stdin-dev-zero", stdin("/dev/zero"), 1, "-: larger than 10 MiB", SECONDS, RSS_MIB),
    ("latin-1", file(HPA.replace(b"web}", b"w\xe9b}")), 1,
     "in.yaml:5: not UTF-8 text (byte 0xe9)", SECONDS, RSS_MIB),
    ("control-character", file(HPA.replace(b"name: web}", b"name: w\x07b}")), 1,
     "in.yaml:5: character U+0007 is not allowed in YAML", SECONDS, RSS_MIB),
    ("bad-yaml", file(hpa_with("  metrics: [1\n")), 1,
     "in.yaml:8: invalid YAML: did not find expected ',' or ']'", SECONDS, RSS_MIB),
    ("surrogate-escape", file(hpa_with('  x: "\\ud800"\n')), 1,
     "in.yaml:7: invalid YAML: found invalid Unicode character escape code", SECONDS, RSS_MIB),
    ("collection-key", file(hpa_with("  ? [a]\n  : b\n")), 1,
     "in.yaml:7: a mapping key must be a string", SECONDS, RSS_MIB),
    ("infinity", file(hpa_with("  minReplicas: .inf\n")), 1,
     "in.yaml:7: document 1, spec.minReplicas: must be a whole number from 0 to 2147483647, "
     "got inf", SECONDS,
     RSS_MIB),
    ("nan-in-a-metric", file(hpa_with("  metrics:\n  - type: Resource\n    resource: {name: cpu, "
                                      "target: {type: Utilization, averageUtilization: .nan}}\n")),
     1, "spec.metrics[0].resource.target.averageUtilization: must be a finite number, got nan",
     SECONDS, RSS_MIB),
    ("duplicate-key", file(hpa_with("  maxReplicas: 300\n")), 1,
     'in.yaml:7: key "maxReplicas" is given twice', SECONDS, RSS_MIB),
    ("binary-spec", file(HPA.split(b"spec:")[0] + b"spec: !!binary aGVsbG8=\n"), 1,
     "in.yaml:4: tag !!binary is not supported", SECONDS, RSS_MIB),
    ("python-tag", file(hpa_with("  x: !!python/name:os.system ''\n")), 1,
     "tag !!python/name:os.system is not supported", SECONDS, RSS_MIB),
    ("spec-array", file(HPA.split(b"spec:")[0] + b"spec: [1, 2]\n"), 1,
     "in.yaml:4: document 1, spec: must be a mapping, got an array", SECONDS, RSS_MIB),
    ("metadata-string", file(HPA.replace(b"metadata: {name: web, namespace: shop}",
                                         b"metadata: web")), 1,
     'in.yaml:3: document 1, metadata: must be a mapping, got "web"', SECONDS, RSS_MIB),
    ("metrics-string", file(hpa_with("  metrics: cpu\n")), 1,
     'in.yaml:7: document 1, spec.metrics: must be an array, got "cpu"', SECONDS, RSS_MIB),
    ("metric-number", file(hpa_with("  metrics: [5]\n")), 1,
     "in.yaml:7: document 1, spec.metrics[0]: must be a mapping, got 5", SECONDS, RSS_MIB),
    ("kind-array", file(HPA.replace(b"kind: HorizontalPodAutoscaler", b"kind: [a]")), 1,
     "in.yaml:2: document 1, kind: must be a string, got an array", SECONDS, RSS_MIB),
    ("items-number", file(b"apiVersion: v1\nkind: List\nitems: 5\n"), 1,
     "in.yaml:3: document 1, items: must be an array, got 5", SECONDS, RSS_MIB),
    # Each field the API types as a number: refused as import-keda refuses its counts,
    # never written into the TOML for `check` to find later (exit 0 before).
    ("min-replicas-a-word", file(hpa_with("  minReplicas: lots\n")), 1,
     'in.yaml:7: document 1, spec.minReplicas: must be a whole number from 0 to 2147483647, '
     'got "lots"', SECONDS, RSS_MIB),
    ("utilization-a-percent-string", file(hpa_with(
        "  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, "
        "averageUtilization: '50%'}}\n")), 1,
     "spec.metrics[0].resource.target.averageUtilization: must be a whole number from 0 to "
     '2147483647, got "50%"', SECONDS, RSS_MIB),
    ("average-value-a-mapping", file(hpa_with(
        "  metrics:\n  - type: Pods\n    pods: {metric: {name: rps}, target: {type: AverageValue, "
        "averageValue: {a: 1}}}\n")), 1,
     "spec.metrics[0].pods.target.averageValue: must be a quantity (such as 500m or 2), got a "
     "mapping", SECONDS, RSS_MIB),
    ("window-a-duration", file(hpa_with(
        "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 5m\n")), 1,
     "in.yaml:9: document 1, spec.behavior.scaleDown.stabilizationWindowSeconds: must be a whole "
     'number from 0 to 2147483647, got "5m"', SECONDS, RSS_MIB),
    ("policy-value-negative", file(hpa_with(
        "  behavior:\n    scaleUp:\n      policies: [{type: Pods, value: -1, periodSeconds: 60}]"
        "\n")), 1,
     "spec.behavior.scaleUp.policies[0].value: must be a whole number from 0 to 2147483647, "
     "got -1", SECONDS, RSS_MIB),
    ("null-policy", file(hpa_with("  behavior:\n    scaleUp:\n      policies: [null]\n")), 1,
     "in.yaml:9: document 1, spec.behavior.scaleUp.policies[0]: null is not allowed",
     SECONDS, RSS_MIB),
    ("5000-digits", file(hpa_with("  minReplicas: " + "1" * 5000 + "\n")), 1,
     'in.yaml:7: "1111111111', SECONDS, RSS_MIB),  # int() refuses over 4300 digits
    ("bad-explicit-bool", file(hpa_with("  x: !!bool maybe\n")), 1,
     'in.yaml:7: "maybe" is not a valid !!bool', SECONDS, RSS_MIB),
    ("beyond-int64", file(hpa_with(f"  minReplicas: {2**70}\n")), 1,
     "in.yaml:7: \"1180591620717411303424\" is beyond the 64-bit integers", SECONDS, RSS_MIB),
    ("name-injection", file(HPA.replace(
        b"name: web,", b'name: "web\\n[prometheus]\\nurl = \\"http://attacker.example\\"\\n#",')),
     1, "in.yaml:3: document 1, metadata.name: must be a lowercase RFC 1123 subdomain",
     SECONDS, RSS_MIB),
    ("name-in-list-item", file(b"apiVersion: v1\nkind: List\nitems:\n- " + HPA.replace(
        b"\n", b"\n  ").replace(b"name: web,", b"name: Web,").rstrip() + b"\n"), 1,
     "in.yaml:6: document 1, items[0].metadata.name: must be a lowercase RFC 1123", SECONDS,
     RSS_MIB),
    ("ref-name-slash", file(HPA.replace(b"name: web}", b"name: a/b}")), 1,
     "spec.scaleTargetRef.name: may not contain '/'", SECONDS, RSS_MIB),
    ("output-directory", file(HPA, "--out", "{tmp}"), 1, ": Is a directory", SECONDS, RSS_MIB),
    ("output-missing-directory", file(HPA, "--out", "{tmp}/no/such/out.toml"), 1,
     "out.toml: No such file or directory", SECONDS, RSS_MIB),
    ("bad-namespace-option", file(HPA, "-n", "Shop\n[x]"), 2,
     "argument -n/--namespace: must be a lowercase RFC 1123 label", SECONDS, RSS_MIB),
    ("no-arguments", Input(lambda tmp: ([], None)), 2, "usage: autoscaler import-hpa", SECONDS,
     RSS_MIB),
    ("utf-16", file("\ufeff".encode("utf-16-le") + HPA.decode().encode("utf-16-le")), 0, "",
     SECONDS, RSS_MIB),
    ("unquoted-date", file(hpa_with("  metrics:\n  - type: External\n    external:\n"
                                    "      metric: {name: q}\n"
                                    "      target: {type: Value, value: 2024-01-01}\n")), 0,
     "", SECONDS, RSS_MIB),
    ("integer-keys", file(hpa_with("  metrics:\n  - type: External\n    external:\n"
                                   "      metric: {name: q, selector: {matchLabels: {1: a}}}\n"
                                   "      target: {type: Value, value: 1}\n")), 0,
     "", SECONDS, RSS_MIB),
    ("metric-type-array", file(hpa_with("  metrics: [{type: [Pods]}]\n")), 0, "", SECONDS,
     RSS_MIB),
    ("output-dev-null", file(HPA, "--out", "/dev/null"), 0, "", SECONDS, RSS_MIB),
    ("just-under-10MiB", file(many_hpas(10 * MiB - 300_000)), 0, "", 30.0, 250),
]


@dataclass(frozen=True, slots=True)
class Run:
    code: int
    stdout: bytes
    stderr: str
    seconds: float
    rss_mib: float


IMPORT = f"""
import atexit, os, resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}))
def report_peak_rss():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    os.write(int(os.environ["PEAK_RSS_FD"]), peak.encode())
atexit.register(report_peak_rss)
sys.argv = ["autoscaler", *sys.argv[1:]]
runpy.run_module("autoscaler", run_name="__main__", alter_sys=True)
"""
"""``python -m autoscaler COMMAND ARGS`` with its address space capped, reporting its peak
RSS at exit. The peak is the process's own (VmHWM, since exec): wait4's ru_maxrss would count
the RSS of pytest, which the child is forked from."""


def run_import(args: list[str], stdin_path: str | None, timeout: float,
               command: str = "import-hpa") -> Run:
    """Run an import command in a child; its exit code, output, wall time and peak RSS."""
    peak_read, peak_write = os.pipe()
    with (open(stdin_path or os.devnull, "rb") as stdin_file,
          tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err):
        started = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-c", IMPORT, command, *args], cwd=REPO, stdin=stdin_file,
            stdout=out, stderr=err, pass_fds=(peak_write,),
            env={**os.environ, "PEAK_RSS_FD": str(peak_write)})
        os.close(peak_write)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        seconds = time.monotonic() - started
        with os.fdopen(peak_read, "rb") as peak:
            reported = peak.read()  # nothing if the child was killed
        peak_kib = int(reported) if reported else float("inf")
        out.seek(0)
        err.seek(0)
        return Run(code=child.returncode, stdout=out.read(),
                   stderr=err.read().decode("utf-8", "replace"), seconds=seconds,
                   rss_mib=peak_kib / 1024)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_hostile_input(tmp_path: Path, case: tuple[str, Input, int, str, float, int]) -> None:
    """A clear message and the right exit code, within bounded time and memory."""
    name, given, code, fragment, seconds, rss_mib = case
    args, stdin_path = given.make(tmp_path)
    result = run_import(args, stdin_path, timeout=seconds + 5)
    print(f"\n{name}: exit {result.code}, {result.seconds:.2f} s, "
          f"peak RSS {result.rss_mib:.0f} MiB")
    assert "Traceback" not in result.stderr
    assert result.code == code, result.stderr
    assert fragment in result.stderr
    if code == 1:
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stdout == b""
    if code == 0 and "--out" not in args:
        assert set(tomllib.loads(result.stdout.decode())) == {"autoscaler"}
    assert result.seconds < seconds
    assert result.rss_mib < rss_mib
