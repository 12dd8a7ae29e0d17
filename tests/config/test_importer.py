"""import-hpa: real-looking HPA manifests round-trip into a config with the same specs."""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.algorithm import MetricSpec, ScalingRules, parse_milli
from autoscaler.algorithm.quantity import parse_quantity
from autoscaler.config import ConfigError, TargetConfig, load_config, parse_config
from autoscaler.config.importer import command, convert_files

MANIFESTS = Path(__file__).parent / "manifests"
FILES = ["v2-full.yaml", "v1.yaml", "kubectl-list.yaml", "hpa-list.json", "no-namespace.yaml"]
_TODO = re.compile(r'^(\w+)\.query = "TODO[^"]*"$', re.MULTILINE)


def fill_todos(text: str) -> str:
    """What the user does after importing: write a query where each TODO is."""
    return _TODO.sub(lambda m: f"{m[1]}.query = 'sum by (pod) (x{{${{pod_selector}}}})'", text)


def manifest_hpas(name: str) -> list[Mapping[str, Any]]:
    """The HPAs of a manifest file, read independently of the importer."""
    hpas = []
    for document in yaml.safe_load_all((MANIFESTS / name).read_text()):
        for item in document.get("items", [document]):
            if item.get("kind", "HorizontalPodAutoscaler") == "HorizontalPodAutoscaler":
                hpas.append({"apiVersion": document["apiVersion"], **item})
    return hpas


def assert_metric(spec: MetricSpec, manifest: Mapping[str, Any]) -> None:
    source = manifest[manifest["type"][0].lower() + manifest["type"][1:]]
    target = source["target"]
    assert spec.type == manifest["type"]
    assert spec.name == source.get("name", source.get("metric", {}).get("name"))
    assert spec.container == source.get("container")
    assert spec.target.type == target["type"]
    assert spec.target.average_utilization == target.get("averageUtilization")
    for ours, theirs in ((spec.target.value, "value"), (spec.target.average_value,
                                                        "averageValue")):
        assert ours == (parse_milli(str(target[theirs])) if theirs in target else None)
    described = source.get("describedObject")
    assert spec.described_object_kind == (described["kind"] if described else None)


def assert_rules(rules: ScalingRules | None, manifest: Mapping[str, Any] | None) -> None:
    if manifest is None:
        assert rules is None
        return
    assert rules is not None
    assert rules.stabilization_window_seconds == manifest.get("stabilizationWindowSeconds")
    assert rules.select_policy == manifest.get("selectPolicy")
    policies = [(p.type, p.value, p.period_seconds) for p in rules.policies or ()]
    assert policies == [(p["type"], p["value"], p["periodSeconds"])
                        for p in manifest.get("policies", ())]
    tolerance = manifest.get("tolerance")
    assert rules.tolerance == (None if tolerance is None else float(parse_quantity(tolerance)))


def assert_same(target: TargetConfig, hpa: Mapping[str, Any]) -> None:
    """Our target says exactly what the HPA manifest says, field by field."""
    spec, ref = hpa["spec"], hpa["spec"]["scaleTargetRef"]
    assert target.namespace == hpa["metadata"].get("namespace", "default")
    assert (target.scale_target_ref.api_version, target.scale_target_ref.kind,
            target.scale_target_ref.name) == (ref["apiVersion"], ref["kind"], ref["name"])
    assert target.spec.min_replicas == spec.get("minReplicas", 1)
    assert target.spec.max_replicas == spec["maxReplicas"]
    if hpa["apiVersion"] == "autoscaling/v1" or not spec.get("metrics"):
        cpu = spec.get("targetCPUUtilizationPercentage", 80)
        metrics = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}}}]
    else:
        metrics = spec["metrics"]
    assert len(target.spec.metrics) == len(metrics)
    for ours, theirs in zip(target.spec.metrics, metrics, strict=True):
        assert_metric(ours, theirs)
    behavior = spec.get("behavior")
    if behavior is None:
        assert target.spec.behavior is None
    else:
        assert target.spec.behavior is not None
        assert_rules(target.spec.behavior.scale_up, behavior.get("scaleUp"))
        assert_rules(target.spec.behavior.scale_down, behavior.get("scaleDown"))


@pytest.mark.parametrize("name", FILES, ids=FILES)
def test_round_trip(name: str) -> None:
    """Import, fill the TODO queries, load: every HPA comes back field for field."""
    text, _ = convert_files([str(MANIFESTS / name)], default_namespace="default")
    config = parse_config(fill_todos(text))
    hpas = manifest_hpas(name)
    assert [t.key for t in config.targets] == [
        f"{h['metadata'].get('namespace', 'default')}/{h['spec']['scaleTargetRef']['kind']}/"
        f"{h['spec']['scaleTargetRef']['name']}" for h in hpas]
    for target, hpa in zip(config.targets, hpas, strict=True):
        assert_same(target, hpa)


def test_todo_queries_are_rejected_until_filled() -> None:
    """Every Pods, Object and External metric has a TODO query that loading rejects."""
    text, notes = convert_files([str(MANIFESTS / "v2-full.yaml")], default_namespace="default")
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert [i.path for i in caught.value.issues] == [
        "autoscaler[0].metrics[3].pods.query", "autoscaler[0].metrics[4].object.query",
        "autoscaler[0].metrics[5].external.query"]
    assert all("import-hpa" in i.message for i in caught.value.issues)
    assert "3 queries to write: search for TODO" in notes
    assert "skipped Service web" in notes


def test_todo_comment_explains_the_query() -> None:
    """Above each TODO: the answer's shape and a starting point built from the selector."""
    text, _ = convert_files([str(MANIFESTS / "kubectl-list.yaml")], default_namespace="default")
    assert "one or more series (their values are summed)" in text
    assert "#   For example: sum(kafka_consumergroup_lag{topic=\"orders\"})" in text
    assert "one series per pod, with a `pod` label" in text


def test_missing_namespace_uses_the_option(tmp_path: Path) -> None:
    """-n names the namespace of an HPA whose manifest has none, and a note says so."""
    out = tmp_path / "out.toml"
    assert command([str(MANIFESTS / "no-namespace.yaml"), "-n", "tools", "-o", str(out)]) == 0
    assert load_config(out).targets[0].key == "tools/Deployment/tool"


def test_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """'-' reads the manifests from standard input and the TOML goes to stdout."""
    monkeypatch.setattr(sys, "stdin", io.StringIO((MANIFESTS / "v1.yaml").read_text()))
    assert command(["-"]) == 0
    keys = [t.key for t in parse_config(capsys.readouterr().out).targets]
    assert keys == ["billing/Deployment/legacy", "billing/StatefulSet/bare"]


@pytest.mark.parametrize(("content", "message"), [
    ("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", "no HorizontalPodAutoscaler found"),
    ("a: [1\n", "invalid YAML"),
    ("apiVersion: autoscaling/v2beta1\nkind: HorizontalPodAutoscaler\nmetadata: {name: old}\n"
     "spec: {maxReplicas: 2}\n", "'autoscaling/v2beta1' is not supported"),
], ids=["no-hpa", "bad-yaml", "v2beta1"])
def test_unusable_input_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    """Input without a usable HPA is exit code 1 with a message saying why."""
    path = tmp_path / "in.yaml"
    path.write_text(content)
    assert command([str(path)]) == 1
    assert message in capsys.readouterr().err


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No file given is a usage error."""
    assert command([]) == 2
    assert "usage: autoscaler import-hpa" in capsys.readouterr().err


def test_quantities_survive_exactly() -> None:
    """"2500m" and "1.5Gi" are written as given, so no precision is lost."""
    text, _ = convert_files([str(MANIFESTS / "kubectl-list.yaml"),
                             str(MANIFESTS / "v2-full.yaml")], default_namespace="default")
    assert 'averageValue = "2500m"' in text
    assert 'averageValue = "1.5Gi"' in text
