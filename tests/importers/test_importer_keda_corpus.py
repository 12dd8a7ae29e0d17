"""import-keda against hostile and absurd input, as a user runs it: a one-line error, in bounds.

The same harness as import-hpa's corpus (``test_importer_corpus``): ``python -m autoscaler
import-keda`` in a child with its address space capped, its exit code, message, time and
peak RSS checked. Run with ``-s`` to see each case's time and peak RSS.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from tests.importers.test_importer_corpus import (
    RSS_MIB,
    SECONDS,
    Input,
    MiB,
    file,
    path,
    run_import,
    sparse,
    stdin,
)

SO = b"""\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {name: web}
  triggers:
  - type: prometheus
    metadata: {serverAddress: "http://prometheus:9090", threshold: "10", query: "sum(up)"}
"""


def with_spec(lines: str) -> bytes:
    return SO + lines.encode()


def many_objects(size: int, *, cron: bool = False) -> bytes:
    """A kubectl-style List of ScaledObjects, just over ``size`` bytes; with ``cron``, each
    has a cron trigger of its own (a different window every time)."""
    items = []
    total, index = 0, 0
    while total <= size:
        trigger = (f"    - type: cron\n      metadata: {{timezone: UTC, start: '{index % 60} "
                   f"{index // 60 % 24} * * *', end: '{index % 60} {(index // 60 + 1) % 24} * "
                   f"* *', desiredReplicas: '2'}}\n") if cron else ""
        item = (f"- apiVersion: keda.sh/v1alpha1\n  kind: ScaledObject\n  metadata: {{name: "
                f"w{index}, namespace: shop}}\n  spec:\n    scaleTargetRef: {{name: w{index}}}\n"
                f"    triggers:\n    - type: prometheus\n      metadata: {{serverAddress: "
                f"'http://prometheus:9090', threshold: '10', query: 'sum(rate(http_requests_"
                f"total{{app=\"w{index}\"}}[2m]))'}}\n{trigger}")
        items.append(item)
        total += len(item)
        index += 1
    return ("apiVersion: v1\nkind: List\nitems:\n" + "".join(items)).encode()


def billion_laughs(levels: int = 9) -> bytes:
    lines = [SO.decode().rstrip("\n"), "  x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines).encode() + b"\n"


CASES = [
    # (id, input, exit code, message fragment, seconds, peak RSS MiB)
    ("billion-laughs", file(billion_laughs()), 1, "in.yaml:10: YAML aliases (*name) are not "
     "supported", SECONDS, RSS_MIB),
    ("over-10MiB", file(many_objects(10 * MiB)), 1,
     "in.yaml: larger than 10 MiB, the most an import reads from one input", SECONDS, RSS_MIB),
    ("sparse-5GiB", path("{tmp}/big.yaml", sparse), 1, "big.yaml: larger than 10 MiB",
     SECONDS, RSS_MIB),
    ("dev-zero", path("/dev/zero"), 1, "/dev/zero: not a regular file or a pipe", SECONDS,
     RSS_MIB),
    ("fifo-without-writer", path("{tmp}/pipe", lambda tmp: os.mkfifo(tmp / "pipe")), 1,
     "no ScaledObject found in", SECONDS, RSS_MIB),
    ("stdin-dev-zero", stdin("/dev/zero"), 1, "-: larger than 10 MiB", SECONDS, RSS_MIB),
    ("latin-1", file(SO.replace(b"web}", b"w\xe9b}", 1)), 1,
     "in.yaml:5: not UTF-8 text (byte 0xe9)", SECONDS, RSS_MIB),
    ("control-character", file(SO.replace(b"sum(up)", b"sum(up)\x07")), 1,
     "in.yaml:8: character U+0007 is not allowed in YAML", SECONDS, RSS_MIB),
    ("duplicate-key", file(with_spec("  minReplicaCount: 1\n  minReplicaCount: 2\n")), 1,
     'in.yaml:10: key "minReplicaCount" is given twice', SECONDS, RSS_MIB),
    ("python-tag", file(with_spec("  x: !!python/name:os.system ''\n")), 1,
     "tag !!python/name:os.system is not supported", SECONDS, RSS_MIB),
    ("name-injection", file(SO.replace(
        b"name: web,", b'name: "web\\n[daemon]\\ndryRun = false\\n#",')), 1,
     "in.yaml:3: document 1, metadata.name: must be a lowercase RFC 1123 subdomain",
     SECONDS, RSS_MIB),
    ("metadata-list", file(SO.replace(b"metadata: {serverAddress", b"metadata: [{serverAddress")
                           .replace(b'"sum(up)"}', b'"sum(up)"}]')), 1,
     "in.yaml:8: document 1, spec.triggers[0].metadata: must be a mapping, got an array",
     SECONDS, RSS_MIB),
    ("5000-digit-threshold", file(SO.replace(b'threshold: "10"', b'threshold: "' + b"9" * 5000
                                             + b'"')), 1,
     "in.yaml:8: document 1, spec.triggers[0].metadata.threshold: must be a quantity", SECONDS,
     RSS_MIB),
    ("utf-16", file("\ufeff".encode("utf-16-le") + SO.decode().encode("utf-16-le")), 0, "",
     SECONDS, RSS_MIB),
    ("unquoted-numbers", file(SO.replace(b'threshold: "10"', b"threshold: 10.5")), 0, "",
     SECONDS, RSS_MIB),
    ("output-dev-null", file(SO, "--out", "/dev/null"), 0, "", SECONDS, RSS_MIB),
    ("no-arguments", Input(lambda tmp: ([], None)), 2, "usage: autoscaler import-keda", SECONDS,
     RSS_MIB),
    ("1000-distinct-cron-windows", file(many_objects(400_000, cron=True)), 0,
     "already converted 100 different cron windows", 30.0, 120),
    ("just-under-10MiB", file(many_objects(10 * MiB - 300_000)), 0, "", 60.0, 400),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_hostile_input(tmp_path: Path, case: tuple[str, Input, int, str, float, int]) -> None:
    """A clear message and the right exit code, within bounded time and memory."""
    name, given, code, fragment, seconds, rss_mib = case
    args, stdin_path = given.make(tmp_path)
    result = run_import(args, stdin_path, timeout=seconds + 5, command="import-keda")
    print(f"\n{name}: exit {result.code}, {result.seconds:.2f} s, "
          f"peak RSS {result.rss_mib:.0f} MiB")
    assert "Traceback" not in result.stderr
    assert result.code == code, result.stderr
    assert fragment in result.stderr
    if code == 1:
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stdout == b""
    if code == 0 and "--out" not in args:
        assert set(tomllib.loads(result.stdout.decode())) <= {"autoscaler", "prometheus"}
    assert result.seconds < seconds
    assert result.rss_mib < rss_mib
