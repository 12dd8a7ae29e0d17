"""import-hpa --adapter-rules: prometheus-adapter's rules write the PromQL of custom metrics."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import re2

from autoscaler.commands import main
from autoscaler.config import parse_config, render_query
from autoscaler.importers.adapter_naming import expand
from autoscaler.importers.adapter_rules import read_adapter_rules
from autoscaler.importers.import_hpa import convert_files
from autoscaler.importers.manifests import InputError
from tests.importers.test_importer import assert_same, fill_todos, manifest_hpas

MANIFESTS = Path(__file__).parent / "manifests"
CONFIG_MAP = str(MANIFESTS / "adapter-configmap.yaml")


def imported(hpas: str = "adapter-hpas.yaml", rules: str = CONFIG_MAP) -> tuple[str, list[str]]:
    return convert_files([str(MANIFESTS / hpas)], default_namespace="default",
                         rules=read_adapter_rules(rules))


def queries(text: str) -> list[str]:
    targets = tomllib.loads(text)["autoscaler"]
    return [source["query"] for target in targets for metric in target["metrics"]
            for source in metric.values() if isinstance(source, dict) and "query" in source]


def test_documented_rules_write_the_queries() -> None:
    """Each metric gets the metricsQuery of the rule serving it, filled in as the adapter would."""
    text, notes = imported()
    assert queries(text) == [
        'label_replace(sum(rate(http_requests_total{verb="GET",kubernetes_namespace='
        '"${namespace}",kubernetes_pod_name=~"${pod_regex}"}[2m])) by (kubernetes_pod_name), '
        '"pod", "$$1", "kubernetes_pod_name", "(.*)")',
        'sum(rate(nginx_hits_total{namespace="${namespace}",ingress="main"}[2m])) by (ingress)',
        'sum(queue_consumer_lag{name="orders",topic=~"main|retry",namespace="${namespace}"}) '
        "by (name)",
        'sum(queue_depth{name="my-sample-queue",namespace="queue"}) by (name)',
        "TODO: PromQL for External metric not_served",
    ]
    assert ('shop/frontend: metrics[4]: no prometheus-adapter externalRules entry names '
            '"not_served" (2 checked); left a TODO') in notes
    assert "# From prometheus-adapter externalRules[1] of " in text


def test_output_loads_and_keeps_the_hpa() -> None:
    """With the one TODO filled, the output loads and says what the HPA says, field by field."""
    text, _ = imported()
    config = parse_config(fill_todos(text))
    (hpa,) = manifest_hpas("adapter-hpas.yaml")
    assert_same(config.targets[0], hpa)
    rendered = render_query(config.targets[0].metric_queries[0].query or "", namespace="shop",
                            name="frontend", kind="Deployment", pod_selector="",
                            pod_regex="frontend-1|frontend-2")
    assert rendered.endswith('"pod", "$1", "kubernetes_pod_name", "(.*)")')
    assert 'kubernetes_namespace="shop",kubernetes_pod_name=~"frontend-1|frontend-2"' in rendered


CONFIG_FILE = str(MANIFESTS / "adapter-config.yaml")
POD_CPU = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 3
  metrics:
  - type: Pods
    pods: {metric: {name: cpu_usage}, target: {type: AverageValue, averageValue: 500m}}
"""
DEFAULT_RULE_QUERY = ('sum(rate(container_cpu_usage_seconds_total{${pod_selector},'
                      'container!="POD"}[5m])) by (pod)')


@pytest.mark.parametrize("form", ["config-file", "helm-values", "config-map-json"])
def test_every_form_of_the_config_reads_the_same(tmp_path: Path, form: str) -> None:
    """The config file, the Helm chart's values and a JSON ConfigMap give the same query."""
    rules = Path(CONFIG_FILE).read_text()
    if form == "helm-values":
        rules = "rules:\n  default: false\n  custom:\n" + "".join(
            f"  {line}\n" for line in rules.split("rules:\n")[1].splitlines())
    elif form == "config-map-json":
        import json
        rules = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                            "data": {"config.yaml": rules}})
    (tmp_path / "rules.yaml").write_text(rules)
    (tmp_path / "hpa.yaml").write_text(POD_CPU)
    text, _ = convert_files([str(tmp_path / "hpa.yaml")], default_namespace="default",
                            rules=read_adapter_rules(str(tmp_path / "rules.yaml")))
    assert queries(text) == [DEFAULT_RULE_QUERY]
    assert "if Prometheus has it" in text  # the series was found from the rule's pattern


BROKEN = [
    # (id, rules file text, one-line message fragment)
    ("not-adapter-config", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n",
     "rules.yaml: no prometheus-adapter rules found"),
    ("bad-regex", "rules:\n- seriesQuery: x\n  name: {matches: '(?<=a)b'}\n",
     "rules.yaml:3: document 1, rules[0].name.matches: not a valid regular expression: "
     "invalid perl operator: (?<="),
    ("two-groups-no-as", "rules:\n- name:\n    matches: '(a)(b)'\n",
     "rules.yaml:3: document 1, rules[0].name: needs 'as': matches has 2 capture groups"),
    ("is-and-isnot", "rules:\n- seriesFilters: [{is: a, isNot: b}]\n",
     "rules.yaml:2: document 1, rules[0].seriesFilters[0]: must have exactly one of"),
    ("label-injection", "externalRules:\n- resources:\n    overrides:\n"
     "      'x=\"1\"} or vector(1) #': {resource: namespace}\n",
     "is not a Prometheus label name"),
    ("namespaced-string", "externalRules:\n- resources: {namespaced: 'no'}\n",
     'externalRules[0].resources.namespaced: must be true or false, got "no"'),
    ("config-map-bad-yaml", "kind: ConfigMap\nmetadata: {name: ad}\ndata:\n  config.yaml: "
     "'rules: [1'\n", 'rules.yaml (data."config.yaml" of ConfigMap ad):2: invalid YAML'),
    ("config-map-data-number", "kind: ConfigMap\nmetadata: {name: ad}\ndata: {c: 5}\n",
     "rules.yaml:3: document 1, data.c: must be a string, got 5"),
]


@pytest.mark.parametrize(("content", "message"), [c[1:] for c in BROKEN],
                         ids=[c[0] for c in BROKEN])
def test_rules_the_adapter_refuses_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    """A rule the adapter would refuse stops the import with the file, line and field."""
    (tmp_path / "rules.yaml").write_text(content)
    assert main(["import-hpa", str(MANIFESTS / "v1.yaml"), "--adapter-rules",
                    str(tmp_path / "rules.yaml")]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert len(err.splitlines()) == 1


EXPAND = [
    # (id, name.matches, as, series, API name) as Go's Regexp.ExpandString gives it
    ("group", "^(.*)_total$", "${1}_per_second", "http_requests_total", "http_requests_per_second"),
    ("bare-reference-is-greedy", "^(.*)_total$", "$1x", "a_total", ""),
    ("dollar-dollar", "^(.*)$", "$$1", "a", "$1"),
    ("malformed-is-text", "^(.*)$", "${1", "a", "${1"),
    ("named", "^(?P<base>.*)_total$", "${base}", "b_total", "b"),
    ("unmatched-group", "^(a)?(b)$", "[$1]", "b", "[]"),
    ("unanchored", "requests", "$0", "http_requests_total", "requests"),
]


@pytest.mark.parametrize(("pattern", "template", "series", "name"),
                         [c[1:] for c in EXPAND], ids=[c[0] for c in EXPAND])
def test_names_expand_as_go_expands_them(pattern: str, template: str, series: str,
                                         name: str) -> None:
    """The adapter's naming is Go's ExpandString on Go's regex match; ours gives the same."""
    compiled = re2.compile(pattern)
    assert expand(template, compiled.search(series), compiled.groupindex) == name


def test_hostile_regex_runs_in_linear_time(tmp_path: Path) -> None:
    """`(a|a)*$` backtracks forever in Python's re; RE2 answers at once, as Go would."""
    (tmp_path / "rules.yaml").write_text(
        "rules:\n- seriesQuery: '{__name__=~\"(a|a)*$\"}'\n  seriesFilters: [{is: '(a|a)*$'}]\n"
        "  name: {matches: '^((?:a|a)*)$'}\n  resources: {template: <<.Resource>>}\n"
        "  metricsQuery: x\n")
    hpa = POD_CPU.replace("cpu_usage", "a" * 5000 + "b")
    (tmp_path / "hpa.yaml").write_text(hpa)
    started = time.monotonic()
    _, notes = convert_files([str(tmp_path / "hpa.yaml")], default_namespace="default",
                                rules=read_adapter_rules(str(tmp_path / "rules.yaml")))
    assert time.monotonic() - started < 2
    assert any("no prometheus-adapter rules entry names" in note for note in notes)


HOSTILE_SELECTOR: list[tuple[str, Any, str]] = [
    ("value-closes-the-matcher", {"matchLabels": {"queue": '"} or vector(1) #'}},
     'queue="\\"} or vector(1) #"'),
    ("value-with-placeholder", {"matchLabels": {"queue": "${namespace}"}}, 'queue="${namespace}"'),
    ("key-not-a-label", {"matchLabels": {"app.kubernetes.io/name": "x"}}, "TODO"),
    ("unknown-operator", {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
     "TODO"),
]


@pytest.mark.parametrize(("selector", "expected"), [c[1:] for c in HOSTILE_SELECTOR],
                         ids=[c[0] for c in HOSTILE_SELECTOR])
def test_selector_values_stay_string_literals(tmp_path: Path, selector: Any,
                                              expected: str) -> None:
    """A selector value lands as one PromQL string literal; what cannot be written is a TODO."""
    import yaml
    (tmp_path / "hpa.yaml").write_text(yaml.safe_dump({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "w", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"},
                 "maxReplicas": 2, "metrics": [{"type": "External", "external": {
                     "metric": {"name": "queue_depth", "selector": selector},
                     "target": {"type": "Value", "value": "1"}}}]}}))
    text, _ = convert_files([str(tmp_path / "hpa.yaml")], default_namespace="default",
                            rules=read_adapter_rules(CONFIG_MAP))
    (query,) = queries(text)
    if expected == "TODO":
        assert query.startswith("TODO")
        return
    rendered = render_query(query, namespace="shop", name="w", kind="Deployment",
                            pod_selector="", pod_regex="")
    assert rendered == f"sum(queue_depth{{{expected}}}) by (name)"


def test_unreadable_rules_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A missing rules file is exit code 1 naming it, before any HPA is read."""
    assert main(["import-hpa", str(MANIFESTS / "v1.yaml"), "--adapter-rules", "/nonexistent.yaml"]) == 1
    assert capsys.readouterr().err == (
        "autoscaler import-hpa: /nonexistent.yaml: No such file or directory\n")


def test_input_error_names_the_config_map(tmp_path: Path) -> None:
    """A control character inside a ConfigMap's value names the ConfigMap and the line in it."""
    (tmp_path / "r.yaml").write_text('kind: ConfigMap\nmetadata: {name: ad}\n'
                                     'data: {c: "rules: []\\n\\u0007"}\n')
    with pytest.raises(InputError, match=r'\(data\.c of ConfigMap ad\):2: character U\+0007'):
        read_adapter_rules(str(tmp_path / "r.yaml"))


HOSTILE_RULES = [
    # (id, the rule's name and metricsQuery): each must resolve (or not) at once
    ("as-many-references", {"name": {"matches": "^(.*)$", "as": "${1}" * 40 + "x"}}),
    ("as-many-dollars", {"name": {"matches": "^(.*)$", "as": "$" * 200_000}}),
    ("query-many-brackets", {"metricsQuery": "<<" * 200_000}),
    ("query-many-actions", {"metricsQuery": "<<.Series>>" * 50_000}),
]


@pytest.mark.parametrize("rule", [c[1] for c in HOSTILE_RULES], ids=[c[0] for c in HOSTILE_RULES])
def test_hostile_rules_resolve_in_bounded_time(tmp_path: Path, rule: dict[str, Any]) -> None:
    """Patterns that make a backtracking matcher or a quadratic scan hang are answered at once."""
    import yaml
    full = {"seriesQuery": "{__name__=~\".+\"}", "resources": {"template": "<<.Resource>>"},
            "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)", **rule}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"rules": [full]}))
    (tmp_path / "hpa.yaml").write_text(POD_CPU.replace("cpu_usage", "a" * 3000))
    started = time.monotonic()
    text, _ = convert_files([str(tmp_path / "hpa.yaml")], default_namespace="default",
                            rules=read_adapter_rules(str(tmp_path / "rules.yaml")))
    assert time.monotonic() - started < 2
    assert "From prometheus-adapter" in text or "TODO" in text


def test_default_naming_serves_the_series_of_the_same_name(tmp_path: Path) -> None:
    """A rule without `name` (matches .*, as $0) serves a metric under its series' own name."""
    (tmp_path / "rules.yaml").write_text(
        "rules:\n- seriesQuery: '{__name__=~\"^http_.*\",namespace!=\"\",pod!=\"\"}'\n"
        "  resources: {template: <<.Resource>>}\n"
        "  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)\n")
    (tmp_path / "hpa.yaml").write_text(POD_CPU.replace("cpu_usage", "http_inflight"))
    text, _ = convert_files([str(tmp_path / "hpa.yaml")], default_namespace="default",
                            rules=read_adapter_rules(str(tmp_path / "rules.yaml")))
    assert queries(text) == ["sum(http_inflight{${pod_selector}}) by (pod)"]


def routed_hpas(tmp_path: Path) -> str:
    """adapter-hpas.yaml with KEP-6382 sources: the Pods metric from another provider, the
    Object metric from its type's default group, the External ones as they were."""
    text = (MANIFESTS / "adapter-hpas.yaml").read_text()
    text = text.replace(
        "metric: {name: http_requests_per_second, selector: {matchLabels: {verb: GET}}}",
        "metric: {name: http_requests_per_second, selector: {matchLabels: {verb: GET}}, "
        "source: {apiGroup: modelserver.example.com}}")
    text = text.replace("metric: {name: nginx_hits}",
                        "metric: {name: nginx_hits, source: {apiGroup: custom.metrics.k8s.io}}")
    path = tmp_path / "routed.yaml"
    path.write_text(text)
    return str(path)


def test_a_metric_another_provider_serves_keeps_a_todo_naming_its_group(tmp_path: Path) -> None:
    """KEP-6382: a metric whose metric.source.apiGroup names another provider is not
    prometheus-adapter's, so the rules do not write its query: it keeps a TODO whose comment
    names the group, and the source stays in the table (check accepts it). A source naming
    the type's default group is the default: the rules serve it, the source is left out."""
    text, notes = convert_files([routed_hpas(tmp_path)], default_namespace="default",
                                rules=read_adapter_rules(CONFIG_MAP))
    found = queries(text)
    assert found[0] == "TODO: PromQL for Pods metric http_requests_per_second"
    assert found[1].startswith("sum(rate(nginx_hits_total{")
    assert ('shop/frontend: metrics[0]: served by API group "modelserver.example.com" '
            "(KEP-6382), whose queries prometheus-adapter's rules cannot know; left a TODO"
            ) in notes
    assert ('shop/frontend: metrics[1]: metric.source.apiGroup "custom.metrics.k8s.io" is '
            "the default for Object metrics; left out") in notes
    assert ('#   The HPA asks API group "modelserver.example.com" for it (KEP-6382): write what '
            "that provider computes.") in text
    (target,) = tomllib.loads(text)["autoscaler"]
    assert target["metrics"][0]["pods"]["metric"]["source"] == {
        "apiGroup": "modelserver.example.com"}
    assert "source" not in target["metrics"][1]["object"]["metric"]
    config = parse_config(fill_todos(text))
    assert len(config.targets[0].spec.metrics) == 5


def test_the_kep_example_imports_with_its_groups_named(tmp_path: Path) -> None:
    """KEP-6382's user-facing example (store 68352816158): the two routed metrics name their
    groups; once the TODOs are written the file loads, sources and all."""
    path = tmp_path / "kep.yaml"
    path.write_text(KEP_6382_EXAMPLE)
    text, _ = convert_files([str(path)], default_namespace="default")
    assert text.count("The HPA asks API group") == 2
    assert 'API group "modelserver.example.com"' in text
    assert 'API group "monitoring.example.com"' in text
    assert len(parse_config(fill_todos(text)).targets[0].spec.metrics) == 3


KEP_6382_EXAMPLE = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: inference-server
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: inference-server
  minReplicas: 2
  maxReplicas: 50
  metrics:
  - type: Pods
    pods:
      metric:
        name: gen_ai_server_request_queued
        source:
          apiGroup: modelserver.example.com
      target:
        type: AverageValue
        averageValue: "5"
  - type: External
    external:
      metric:
        name: datadog_request_rate
      target:
        type: Value
        value: "100"
  - type: Object
    object:
      metric:
        name: active_connections
        source:
          apiGroup: monitoring.example.com
      describedObject:
        apiVersion: networking.k8s.io/v1
        kind: Ingress
        name: main-ingress
      target:
        type: Value
        value: "1000"
"""


@pytest.mark.parametrize(("source", "message"), [
    ("{apiGroup: Not_A_Group}", "must be a lowercase RFC 1123 subdomain"),
    ("{}", "required"),
    ("{apiGroup: 7}", "must be a string, got 7"),
    ("groups", "must be a mapping"),
])
def test_an_unusable_source_names_its_field(tmp_path: Path, source: str, message: str) -> None:
    """metric.source.apiGroup must be a DNS subdomain, as upstream validates it."""
    path = tmp_path / "bad.yaml"
    path.write_text(POD_CPU.replace("metric: {name: cpu_usage}",
                                    f"metric: {{name: cpu_usage, source: {source}}}"))
    with pytest.raises(InputError) as caught:
        convert_files([str(path)], default_namespace="default")
    assert "spec.metrics[0].pods.metric.source" in str(caught.value)
    assert message in str(caught.value)
