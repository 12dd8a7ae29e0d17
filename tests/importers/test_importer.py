"""import-hpa: real-looking HPA manifests round-trip into a config with the same specs."""

from __future__ import annotations

import io
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autoscaler.algorithm import MetricSpec, ScalingRules, parse_milli
from autoscaler.algorithm.quantity import parse_quantity
from autoscaler.commands import main
from autoscaler.config import ConfigError, TargetConfig, load_config, parse_config
from autoscaler.importers.import_hpa import convert_files
from autoscaler.importers.manifests import InputError

MANIFESTS = Path(__file__).parent / "manifests"
FILES = ["v2-full.yaml", "v1.yaml", "kubectl-list.yaml", "hpa-list.json", "no-namespace.yaml"]
_TODO = re.compile(r"""^(\w+)\.query = (["'])TODO.*\2$""", re.MULTILINE)



def command(argv: list[str]) -> int:
    return main(["import-hpa", *argv])

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
    assert all("TODO placeholder an importer wrote" in i.message for i in caught.value.issues)
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
    assert command([str(MANIFESTS / "no-namespace.yaml"), "-n", "tools", "--out", str(out)]) == 0
    assert load_config(out).targets[0].key == "tools/Deployment/tool"


def test_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """'-' reads the manifests from standard input and the TOML goes to stdout."""
    stdin = io.TextIOWrapper(io.BytesIO((MANIFESTS / "v1.yaml").read_bytes()))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert command(["-"]) == 0
    keys = [t.key for t in parse_config(capsys.readouterr().out).targets]
    assert keys == ["billing/Deployment/legacy", "billing/StatefulSet/bare"]


@pytest.mark.parametrize(("content", "message"), [
    ("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", "no HorizontalPodAutoscaler found"),
    ("a: [1\n", "invalid YAML"),
    ("apiVersion: autoscaling/v2beta1\nkind: HorizontalPodAutoscaler\nmetadata: {name: old}\n"
     "spec: {maxReplicas: 2}\n", '"autoscaling/v2beta1" is not supported'),
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


ATTACKER = '"\n[prometheus]\nurl = "http:\\u002F\\u002Fattacker.example"\n#'
"""Closes a string, opens a table the daemon would trust, comments out the rest.

The URL's slashes are TOML escapes, so the string passes Kubernetes' path-segment rule."""


def hostile_base() -> dict[str, Any]:
    """A v2 HPA reading every string field the importer reads: one metric of each kind."""
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5,
            "behavior": {"scaleUp": {"selectPolicy": "Max", "policies": [
                {"type": "Pods", "value": 1, "periodSeconds": 15}]}},
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {
                    "type": "Utilization", "averageUtilization": 50}}},
                {"type": "ContainerResource", "containerResource": {
                    "name": "cpu", "container": "app", "target": {
                        "type": "Utilization", "averageUtilization": 50}}},
                {"type": "Pods", "pods": {"metric": {"name": "rps", "selector": {
                    "matchLabels": {"route": "main"}}}, "target": {
                    "type": "AverageValue", "averageValue": "10"}}},
                {"type": "Object", "object": {
                    "metric": {"name": "hits"},
                    "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                        "name": "main"},
                    "target": {"type": "Value", "value": "1k"}}},
                {"type": "External", "external": {"metric": {"name": "queue", "selector": {
                    "matchLabels": {"queue": "jobs"}}}, "target": {
                    "type": "AverageValue", "averageValue": "30"}}},
            ],
        },
    }


def expected_target(hpa: Mapping[str, Any], default_namespace: str = "default") -> dict[str, Any]:
    """The [[autoscaler]] table an HPA must become (queries aside), written independently."""
    spec = hpa["spec"]
    target = {"namespace": hpa["metadata"].get("namespace", default_namespace),
              "scaleTargetRef": spec["scaleTargetRef"], "metrics": spec.get("metrics", [])}
    target |= {k: spec[k] for k in ("minReplicas", "maxReplicas", "behavior") if k in spec}
    return target


def without_queries(target: dict[str, Any]) -> dict[str, Any]:
    """``target`` with each TODO query taken out (and checked to be one)."""
    for metric in target.get("metrics", []):
        source = metric.get(str(metric.get("type", ""))[:1].lower() + str(metric.get("type"))[1:])
        if metric.get("type") in {"Pods", "Object", "External"}:
            assert source.pop("query").startswith("TODO")
    return target


def import_documents(tmp_path: Path, documents: list[Any], file_name: str = "in.yaml") -> str:
    """Write ``documents`` as YAML (escaped: PyYAML writes a raw U+0085 that reads back as a
    line break), import them, and check the output.

    The checks hold whatever the documents held: every line of the output and every note is
    printable (no hidden line break, no control character), the output parses, holds only
    ``[[autoscaler]]`` tables, and ``parse_config`` ends in a Config or a ConfigError.
    """
    path = tmp_path / file_name
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    text, notes = convert_files([str(path)], default_namespace="default")
    # split("\n"), not splitlines(): that would split at U+2028 and U+0085 too, and hide them.
    assert all(line.isprintable() for line in text.removesuffix("\n").split("\n")), text
    assert all(note.isprintable() for note in notes), notes
    assert set(tomllib.loads(text)) == {"autoscaler"}
    try:
        config = parse_config(text)
    except ConfigError:
        pass
    else:
        assert len(config.targets) == len(tomllib.loads(text)["autoscaler"])
    return text


def set_field(document: dict[str, Any], loc: tuple[str | int, ...], value: Any) -> None:
    for part in loc[:-1]:
        document = document[part]
    document[loc[-1]] = value


METRIC = ("spec", "metrics")
KEPT = [
    # (id, field path in the HPA, hostile string): the output parses to exactly the HPA
    ("ref-api-version", ("spec", "scaleTargetRef", "apiVersion"), "apps/v1" + ATTACKER),
    ("ref-kind-triple-quotes", ("spec", "scaleTargetRef", "kind"), 'Deployment"""\n[x]\n"""'),
    ("ref-name-backslashes", ("spec", "scaleTargetRef", "name"), 'web\\" \\\\\\n\\'),
    ("resource-name", (*METRIC, 0, "resource", "name"), "cpu" + ATTACKER),
    ("target-type", (*METRIC, 0, "resource", "target", "type"), "Utilization" + ATTACKER),
    ("pods-metric-name", (*METRIC, 2, "pods", "metric", "name"), "rps" + ATTACKER),
    ("label-value-closes-matcher", (*METRIC, 2, "pods", "metric", "selector", "matchLabels",
                                    "route"), '"} or vector(1) #\n[prometheus]'),
    ("label-value-placeholder", (*METRIC, 4, "external", "metric", "selector", "matchLabels",
                                 "queue"), "${namespace}$"),
    ("label-key", (*METRIC, 4, "external", "metric", "selector", "matchLabels"),
     {ATTACKER: "v"}),
    ("described-kind-hash", (*METRIC, 3, "object", "describedObject", "kind"),
     "Ingress # ]\n[prometheus]"),
    ("described-name-u2028", (*METRIC, 3, "object", "describedObject", "name"),
     'main\u2028[prometheus]\u2028url = "http:\\u002F\\u002Fattacker.example"'),
    ("described-name-u0085", (*METRIC, 3, "object", "describedObject", "name"),
     "main\x85[kubernetes]\x85"),
    ("object-metric-bidi", (*METRIC, 3, "object", "metric", "name"), "hits\u202e]sutats["),
    ("control-characters", (*METRIC, 4, "external", "metric", "name"),
     "q\x00\x1b[31m\x07\x7f\r"),
    ("select-policy", ("spec", "behavior", "scaleUp", "selectPolicy"), "Max" + ATTACKER),
    ("metric-key", (*METRIC, 0, 'x = 1\n[prometheus]\nurl = "http://attacker.example"'), "v"),
    ("source-key", (*METRIC, 0, "resource", "a.b\n[kubernetes]"), "v"),
]


@pytest.mark.parametrize(("loc", "attack"), [case[1:] for case in KEPT],
                         ids=[case[0] for case in KEPT])
def test_hostile_string_stays_a_value(tmp_path: Path, loc: tuple[str | int, ...],
                                      attack: Any) -> None:
    """A hostile string in a field Kubernetes does not restrict comes back as exactly itself."""
    hpa = hostile_base()
    set_field(hpa, loc, attack)
    text = import_documents(tmp_path, [hpa])
    assert without_queries(tomllib.loads(text)["autoscaler"][0]) == expected_target(hpa)


REJECTED = [
    # (id, field path, hostile string, field path and message in the error)
    ("name-newline-table", ("metadata", "name"), "web" + ATTACKER,
     "metadata.name: must be a lowercase RFC 1123 subdomain"),
    ("name-u2028", ("metadata", "name"), "web\u2028[prometheus]",
     "metadata.name: must be a lowercase RFC 1123 subdomain"),
    ("namespace-quote", ("metadata", "namespace"), 'shop"\n[kubernetes]',
     "metadata.namespace: must be a lowercase RFC 1123 label"),
    ("namespace-too-long", ("metadata", "namespace"), "a" * 64,
     "metadata.namespace: must be no more than 63 characters, got 64"),
    ("ref-name-slash", ("spec", "scaleTargetRef", "name"), "../../x",
     "spec.scaleTargetRef.name: may not contain '/'"),
    ("metric-name-dot-dot", (*METRIC, 2, "pods", "metric", "name"), "..",
     "spec.metrics[2].pods.metric.name: may not be '..'"),
    ("described-percent", (*METRIC, 3, "object", "describedObject", "name"), "a%0a",
     "spec.metrics[3].object.describedObject.name: may not contain '%'"),
    ("container", (*METRIC, 1, "containerResource", "container"), "app\n[x]",
     "spec.metrics[1].containerResource.container: must be a lowercase RFC 1123 label"),
]


@pytest.mark.parametrize(("loc", "attack", "message"), [case[1:] for case in REJECTED],
                         ids=[case[0] for case in REJECTED])
def test_name_kubernetes_rejects_is_rejected(tmp_path: Path, loc: tuple[str | int, ...],
                                             attack: str, message: str) -> None:
    """A name the API server would refuse is an error naming the document and field path."""
    hpa = hostile_base()
    set_field(hpa, loc, attack)
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(hpa), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        convert_files([str(path)], default_namespace="default")
    assert f"in.yaml:{line_of_field(path, loc)}: document 1, {message}" in str(caught.value)
    assert str(caught.value).isprintable()


def line_of_field(path: Path, loc: tuple[str | int, ...]) -> int:
    """The line of a field, found with PyYAML's composer (independent of the importer)."""
    node = yaml.compose(path.read_text())
    for part in loc:
        if isinstance(part, int):
            node = node.value[part]
        else:
            node = next(value for key, value in node.value if key.value == part)
    return int(node.start_mark.line) + 1


def test_hostile_kind_and_file_name_stay_in_their_line(tmp_path: Path) -> None:
    """A skipped object's kind (a terminal escape) and the file's name are shown escaped."""
    other = {"apiVersion": "v1", "kind": "\x1b]0;owned\x07\n[prometheus]", "metadata": {
        "name": "x\u2028y"}}
    text = import_documents(tmp_path, [other, hostile_base()], file_name="in\n[prometheus]")
    assert text.split("\n")[0] == (
        '# Written by `autoscaler import-hpa` from "' + str(tmp_path) + '/in\\n[prometheus]".')


def test_label_value_is_a_promql_string_literal(tmp_path: Path) -> None:
    """The example matcher quotes and escapes the value, and doubles '$' for the template."""
    hpa = hostile_base()
    set_field(hpa, (*METRIC, 4, "external", "metric", "selector", "matchLabels", "queue"),
              'a"b\\c\n${namespace}')
    text = import_documents(tmp_path, [hpa])
    assert '#   For example: sum(queue{queue="a\\"b\\\\c\\n$${namespace}"})' in text


valid_names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
names = st.integers(0, 9).flatmap(lambda n: st.text(max_size=12) if n == 0 else valid_names)
"""Mostly names Kubernetes accepts, so that most examples get as far as the output."""
texts = st.text(max_size=12)
segments = st.text(min_size=1, max_size=12)
"""For fields Kubernetes requires (and then allows anything without '/' or '%')."""


@st.composite
def hostile_hpas(draw: st.DrawFn) -> dict[str, Any]:
    """``hostile_base`` with any text in every string field the importer reads."""
    hpa = hostile_base()
    for loc in [("metadata", "name"), ("metadata", "namespace"),
                (*METRIC, 1, "containerResource", "container")]:
        set_field(hpa, loc, draw(names))
    for loc in [("spec", "scaleTargetRef", "kind"), ("spec", "scaleTargetRef", "name"),
                (*METRIC, 2, "pods", "metric", "name"), (*METRIC, 3, "object", "metric", "name"),
                (*METRIC, 3, "object", "describedObject", "kind"),
                (*METRIC, 3, "object", "describedObject", "name"),
                (*METRIC, 4, "external", "metric", "name")]:
        set_field(hpa, loc, draw(segments))
    for loc in [("spec", "scaleTargetRef", "apiVersion"), (*METRIC, 0, "resource", "name"),
                (*METRIC, 0, "resource", "target", "type"),
                (*METRIC, 3, "object", "describedObject", "apiVersion"),
                ("spec", "behavior", "scaleUp", "selectPolicy"),
                ("spec", "behavior", "scaleUp", "policies", 0, "type")]:
        set_field(hpa, loc, draw(texts))
    set_field(hpa, (*METRIC, 2, "pods", "metric", "selector", "matchLabels"),
              draw(st.dictionaries(texts, texts, max_size=2)))
    set_field(hpa, (*METRIC, 4, draw(texts)), draw(texts))
    return hpa


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hpa=hostile_hpas(), other_kind=texts)
def test_any_strings_give_exactly_the_hpa_or_an_error(
    tmp_path: Path, hpa: dict[str, Any], other_kind: str
) -> None:
    """Any text anywhere: the HPA's own [[autoscaler]] table and nothing more, or one error line.

    The output parses; it holds one target, equal to the HPA (queries aside); it has no
    [prometheus], [kubernetes] or other table; parse_config accepts or rejects it cleanly.
    """
    documents = [hpa, {"apiVersion": "v1", "kind": other_kind or "X", "metadata": {"name": "o"}}]
    outcome = import_or_error(tmp_path, documents)
    if isinstance(outcome, InputError):
        event("rejected")
        assert str(outcome).isprintable()
        assert "document 1, " in str(outcome)
        return
    event("imported")
    (target,) = tomllib.loads(outcome)["autoscaler"]
    assert without_queries(target) == expected_target(hpa)


def import_or_error(tmp_path: Path, documents: list[Any]) -> str | InputError:
    try:
        return import_documents(tmp_path, documents)
    except InputError as error:
        return error


def test_output_is_replaced_only_by_a_whole_import(tmp_path: Path) -> None:
    """--out keeps the old file (an earlier import) when the import fails, and is replaced
    (same mode) when it works."""
    out = tmp_path / "out.toml"
    earlier = "# Written by `autoscaler import-hpa` from old.yaml.\n# the working config\n"
    out.write_text(earlier)
    out.chmod(0o640)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: x\n")
    assert command([str(bad), "--out", str(out)]) == 1
    assert out.read_text() == earlier
    assert command([str(MANIFESTS / "v1.yaml"), "--out", str(out)]) == 0
    assert len(load_config(out).targets) == 2
    assert out.stat().st_mode & 0o777 == 0o640
    assert {p.name for p in tmp_path.iterdir()} == {"out.toml", "bad.yaml"}  # no temp file left


SYNC_PERIOD_HPAS = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 10
  syncPeriodSeconds: 5
---
apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: old, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: old}
  maxReplicas: 4
  syncPeriodSeconds: 3600
"""


def test_sync_period_seconds_is_carried_over(tmp_path: Path) -> None:
    """KEP-6003's spec.syncPeriodSeconds (v2 and v1 alike, as its latest draft has it)
    becomes the target's syncPeriodSeconds, with a comment on how our scheduler differs."""
    path = tmp_path / "hpa.yaml"
    path.write_text(SYNC_PERIOD_HPAS)
    text, notes = convert_files([str(path)], default_namespace="default")
    assert [t.sync_period for t in parse_config(text).targets] == [5.0, 3600.0]
    assert text.count("syncPeriodSeconds (KEP-6003): upstream waits this long after a "
                      "reconcile ends") == 2
    assert not [note for note in notes if "syncPeriodSeconds" in note]


def test_out_of_range_sync_period_is_check_s_to_refuse(tmp_path: Path) -> None:
    """A value no API server would hold is copied, and check names the field."""
    path = tmp_path / "hpa.yaml"
    path.write_text(SYNC_PERIOD_HPAS.replace("syncPeriodSeconds: 5", "syncPeriodSeconds: 0"))
    text, _ = convert_files([str(path)], default_namespace="default")
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert [(i.path, i.message) for i in caught.value.issues] == [
        ("autoscaler[0].syncPeriodSeconds", "must be between 1 and 3600, got 0")]


def test_behavior_keys_the_config_lacks_are_noted(tmp_path: Path) -> None:
    """No key of spec.behavior is dropped without a note: KEP-6003's first-draft place of
    syncPeriodSeconds, and a rule key the config does not know."""
    path = tmp_path / "hpa.yaml"
    path.write_text(SYNC_PERIOD_HPAS.replace("  syncPeriodSeconds: 5\n", (
        "  behavior:\n    syncPeriodSeconds: 7\n    scaleUp: {selectPolicy: Max, newRule: 1}\n")))
    text, notes = convert_files([str(path)], default_namespace="default")
    assert "shop/web: spec.behavior.scaleUp.newRule is not imported" in notes
    assert ("shop/web: spec.behavior.syncPeriodSeconds is not imported (KEP-6003's first draft "
            "put it there; the field is spec.syncPeriodSeconds)") in notes
    assert parse_config(text).targets[0].sync_period == 15.0
