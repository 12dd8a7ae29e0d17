"""import-keda: ScaledObjects from KEDA's docs become targets that say what KEDA said."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autoscaler.commands import main
from autoscaler.config import ConfigError, parse_config, render_query
from autoscaler.config.schema import ExternalSourceModel, TargetModel
from autoscaler.importers.import_keda import convert_files
from autoscaler.importers.keda_triggers import supported_keys
from autoscaler.importers.manifests import InputError
from tests.importers.test_importer import fill_todos

KEDA = Path(__file__).parent / "manifests" / "keda"
FILES = ["prometheus.yaml", "cron-cpu.yaml", "advanced.yaml"]
ACTIVATION_LIVE = "activationThreshold" in supported_keys(ExternalSourceModel)
COOLDOWN_LIVE = "cooldownPeriod" in supported_keys(TargetModel)


def convert(tmp_path: Path, *documents: Any) -> tuple[dict[str, Any], list[str], str]:
    """Import ``documents`` (written as YAML); the parsed output, the notes and the text.

    Whatever the documents held: every line is printable, the output parses, and it holds
    only [prometheus] and [[autoscaler]] tables.
    """
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    text, notes = convert_files([str(path)], default_namespace="default")
    assert all(line.isprintable() for line in text.removesuffix("\n").split("\n")), text
    assert all(note.isprintable() for note in notes), notes
    parsed = tomllib.loads(text)
    assert set(parsed) <= {"autoscaler", "prometheus"}
    assert set(parsed.get("prometheus", {})) <= {"url", "servers", "headers", "queryParams",
                                                 "timeout", "insecureSkipVerify",
                                                 "bearerTokenFile", "basicAuth"}
    return parsed, notes, text


def scaled_object(**spec: Any) -> dict[str, Any]:
    """A ScaledObject with one prometheus trigger; ``spec`` keys replace the spec's."""
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"scaleTargetRef": {"name": "web"}, "triggers": [prometheus()], **spec}}


def prometheus(**metadata: Any) -> dict[str, Any]:
    return {"type": "prometheus", "metadata": {
        "serverAddress": "http://prometheus:9090", "threshold": "10",
        "query": "sum(rate(http_requests_total[2m]))", **metadata}}


@pytest.mark.parametrize("name", FILES, ids=FILES)
def test_docs_examples_pass_check(name: str) -> None:
    """Each documented example imports into a config `check --syntax-only` accepts (TODOs filled)."""
    text, _ = convert_files([str(KEDA / name)], default_namespace="default")
    config = parse_config(fill_todos(text))
    assert len(config.targets) == len(tomllib.loads(text)["autoscaler"])


def test_prometheus_trigger_is_an_external_metric_per_replica() -> None:
    """threshold is AverageValue per replica (Value with metricType); defaults min 0 max 100."""
    text, _ = convert_files([str(KEDA / "prometheus.yaml")], default_namespace="default")
    config = parse_config(text)
    basic, bearer, value = config.targets
    assert (basic.spec.min_replicas, basic.spec.max_replicas) == (0, 100)
    (metric,) = basic.spec.metrics
    assert (metric.type, metric.name, metric.target.type, metric.target.average_value) == (
        "External", "s0-prometheus", "AverageValue", 100_000)
    assert bearer.spec.metrics[0].target.average_value == 100_500
    assert (value.spec.metrics[0].target.type, value.spec.metrics[0].target.value) == (
        "Value", 2_000_000)
    assert basic.metric_queries[0].query == (
        'sum(rate(http_requests_total{deployment="my-deployment"}[2m]))')
    servers = config.prometheus_servers
    assert servers["prometheus"].headers == {
        "X-Client-Id": "cid", "X-Tenant-Id": "tid", "X-Organization-Id": "oid"}
    assert servers["prometheus"].query_params == {
        "key-1": "value-1", "key-2": "value-2", "namespace": "example-namespace"}
    assert servers["prometheus"].timeout == 1.0  # "1000": milliseconds, as KEDA reads it
    assert servers["thanos-query"].insecure_skip_verify is True
    assert (bearer.prometheus, value.prometheus) == ("prometheus", "thanos-query")


def test_secrets_are_marked_todos() -> None:
    """authModes bearer and basic become file settings naming the TriggerAuthentication."""
    text, _ = convert_files([str(KEDA / "prometheus.yaml")], default_namespace="default")
    servers = tomllib.loads(text)["prometheus"]["servers"]
    assert servers["prometheus"]["bearerTokenFile"] == (
        "TODO: a file holding bearerToken of TriggerAuthentication keda-prom-creds (key "
        "bearerToken of Secret keda-prom-secret)")
    assert servers["thanos-query"]["basicAuth"]["passwordFile"].startswith("TODO: ")
    with pytest.raises(ConfigError, match=r"bearerTokenFile: cannot read"):
        parse_config(text, check_files=True)


@pytest.mark.parametrize(("metadata", "when_empty", "activation"), [
    ({}, "zero", None),
    ({"ignoreNullValues": "false", "activationThreshold": "5.5"}, None, "5.5"),
    ({"ignoreNullValues": "f"}, None, None),
    ({"ignoreNullValues": True, "activationThreshold": 0}, "zero", "0"),
], ids=["defaults", "set", "go-bool-f", "unquoted-yaml"])
def test_activation_and_empty_answers(tmp_path: Path, metadata: dict[str, Any],
                                      when_empty: str | None, activation: str | None) -> None:
    """ignoreNullValues defaults to true in KEDA (an empty answer is 0); activationThreshold
    is kept; both live where the config has the keys, else commented TODO lines."""
    parsed, _, text = convert(tmp_path, scaled_object(triggers=[prometheus(**metadata)]))
    source = parsed["autoscaler"][0]["metrics"][0]["external"]
    for key, value in (("whenEmpty", when_empty), ("activationThreshold", activation)):
        if ACTIVATION_LIVE:
            assert source.get(key) == value
        else:
            assert key not in source
            assert (f"# external.{key} = " in text) == (value is not None)
    if ACTIVATION_LIVE:
        parse_config(text)


def test_dollar_in_query_is_kept(tmp_path: Path) -> None:
    """A `$` in PromQL is doubled for our templates, so the query sent is the one KEDA sent."""
    query = 'label_replace(up, "x", "$1", "job", "(.*)")'
    _, _, text = convert(tmp_path, scaled_object(triggers=[prometheus(query=query)]))
    written = parse_config(text).targets[0].metric_queries[0].query or ""
    assert render_query(written, namespace="n", name="w", kind="Deployment", pod_selector="",
                        pod_regex="") == query


def test_scale_to_zero_keeps_the_cooldowns(tmp_path: Path) -> None:
    """With minReplicaCount 0 (KEDA's default) cooldownPeriod (default 300) is carried."""
    parsed, _, text = convert(tmp_path, scaled_object(initialCooldownPeriod=60))
    target = parsed["autoscaler"][0]
    assert target["minReplicas"] == 0
    if COOLDOWN_LIVE:
        assert (target["cooldownPeriod"], target["initialCooldownPeriod"]) == (300, 60)
    else:
        assert "# cooldownPeriod = 300  # TODO: KEDA cooldownPeriod 300" in text
        assert "# initialCooldownPeriod = 60  # TODO" in text


@pytest.mark.parametrize(("annotations", "expected"), [
    ({"autoscaling.keda.sh/paused": "true"}, {"paused": True}),
    ({"autoscaling.keda.sh/paused": "false"}, {}),
    ({"autoscaling.keda.sh/paused": "yes please"}, {"paused": True}),
    ({"autoscaling.keda.sh/paused-replicas": "0", "autoscaling.keda.sh/paused": "true"},
     {"pausedReplicas": 0}),
], ids=["paused", "not-paused", "not-a-bool-is-true", "replicas-win"])
def test_pause_annotations(tmp_path: Path, annotations: dict[str, str],
                           expected: dict[str, Any]) -> None:
    """KEDA's paused / paused-replicas become paused / pausedReplicas, read as KEDA reads them."""
    so = scaled_object()
    so["metadata"]["annotations"] = annotations
    parsed, _, text = convert(tmp_path, so)
    target = parsed["autoscaler"][0]
    assert {k: target[k] for k in ("paused", "pausedReplicas") if k in target} == expected
    assert ("kubectl annotate deployment/web autoscaler.dev/paused" in text) == bool(expected)


@pytest.mark.parametrize(("fallback", "expected", "note"), [
    ({"failureThreshold": 3, "replicas": 6},
     {"failureThreshold": 4, "replicas": 6, "allowScaleDown": True}, None),
    ({"failureThreshold": 3, "replicas": 6, "behavior": "currentReplicasIfHigher"},
     {"failureThreshold": 4, "replicas": 6}, None),
    ({"failureThreshold": 0, "replicas": 500}, {"failureThreshold": 1, "replicas": 100,
                                                "allowScaleDown": True}, None),
    ({"failureThreshold": 3, "replicas": 6, "behavior": "currentReplicas"}, None,
     "fallback behavior currentReplicas is not carried over"),
], ids=["static", "if-higher", "clamped", "current-replicas"])
def test_fallback(tmp_path: Path, fallback: dict[str, Any], expected: dict[str, Any] | None,
                  note: str | None) -> None:
    """KEDA falls back after more than N failures (ours: after N): N+1; static may scale down."""
    parsed, notes, text = convert(tmp_path, scaled_object(fallback=fallback))
    assert parsed["autoscaler"][0].get("fallback") == expected
    assert (note is None) or any(note in n for n in notes)
    parse_config(text)


CRON = [
    # (id, start, end, timezone, schedule or the reason it is not carried over)
    ("daily", "0 6 * * *", "0 20 * * *", "Asia/Kolkata",
     {"start": "06:00", "end": "20:00"}),
    ("weekdays", "30 8 * * 1-5", "0 18 * * 1-5", "Europe/Berlin",
     {"start": "08:30", "end": "18:00", "days": ["Mon", "Tue", "Wed", "Thu", "Fri"]}),
    ("overnight", "0 22 * * *", "0 6 * * *", "America/New_York",
     {"start": "22:00", "end": "06:00"}),
    ("weekend-utc", "0 18 * * 5", "0 6 * * 1", "UTC", {"cron": "0 18 * * 5", "duration": "60h"}),
    ("weekend-across-dst", "0 18 * * 5", "0 6 * * 1", "Europe/Berlin",
     "not all the same length"),
    ("same-start-and-end", "0 6 * * *", "0 6 * * *", "UTC", "start and end are the same"),
    ("bad-zone", "0 6 * * *", "0 7 * * *", "Mars/Olympus", "not an IANA time zone"),
    ("six-fields", "0 0 6 * * *", "0 0 7 * * *", "UTC", "not a five-field cron expression"),
]


@pytest.mark.parametrize(("start", "end", "zone", "expected"), [c[1:] for c in CRON],
                         ids=[c[0] for c in CRON])
def test_cron_trigger_becomes_a_schedule_only_when_equal(
    tmp_path: Path, start: str, end: str, zone: str, expected: dict[str, Any] | str
) -> None:
    """desiredReplicas is a floor while KEDA's window is active; the window must match exactly."""
    cron = {"type": "cron", "metadata": {"timezone": zone, "start": start, "end": end,
                                          "desiredReplicas": "7"}}
    parsed, notes, text = convert(tmp_path, scaled_object(triggers=[prometheus(), cron]))
    schedules = parsed["autoscaler"][0].get("schedules")
    if isinstance(expected, str):
        assert schedules is None
        assert any(expected in note for note in notes), notes
        return
    assert schedules == [{"name": "cron-1", "timezone": zone, **expected, "minReplicas": 7}]
    parse_config(text)


def test_cron_floor_above_max_is_capped(tmp_path: Path) -> None:
    """desiredReplicas above maxReplicaCount is capped, as KEDA's HPA caps it."""
    cron = {"type": "cron", "metadata": {"timezone": "UTC", "start": "0 6 * * *",
                                          "end": "0 7 * * *", "desiredReplicas": "500"}}
    parsed, _, text = convert(tmp_path, scaled_object(triggers=[prometheus(), cron]))
    assert parsed["autoscaler"][0]["schedules"][0]["minReplicas"] == 100
    parse_config(text)


def test_cpu_only_min_zero_becomes_one(tmp_path: Path) -> None:
    """KEDA cannot wake a cpu-only object from zero either: minReplicas 1, and a note."""
    cpu = {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}
    parsed, notes, text = convert(tmp_path, scaled_object(triggers=[cpu]))
    assert parsed["autoscaler"][0]["minReplicas"] == 1
    assert any("minReplicaCount 0 becomes minReplicas 1" in note for note in notes)
    parse_config(text)


def test_two_servers_in_one_object_keep_the_first(tmp_path: Path) -> None:
    """A target asks one Prometheus: the second trigger's other server is a note."""
    other = prometheus(serverAddress="http://other:9090")
    parsed, notes, _ = convert(tmp_path, scaled_object(triggers=[prometheus(), other]))
    assert parsed["prometheus"]["url"] == "http://prometheus:9090"
    assert any('asks another Prometheus server ("http://other:9090")' in n for n in notes)


def test_polling_interval_is_the_sync_period_only_with_cached_metrics(tmp_path: Path) -> None:
    """KEDA's HPA reads cached metrics every pollingInterval only with useCachedMetrics."""
    cached = {**prometheus(), "useCachedMetrics": True}
    parsed, _, _ = convert(tmp_path, scaled_object(pollingInterval=60, triggers=[cached]))
    assert parsed["autoscaler"][0]["syncPeriod"] == "60s"
    parsed, _, text = convert(tmp_path, scaled_object(pollingInterval=60))
    assert "syncPeriod" not in parsed["autoscaler"][0]
    assert "# pollingInterval = 60  # KEDA: how often it checked activation" in text


def test_scaling_modifiers_suggest_promql() -> None:
    """A formula of + - * / over prometheus triggers is suggested as PromQL beside a TODO."""
    text, notes = convert_files([str(KEDA / "advanced.yaml")], default_namespace="default")
    assert ("#   In PromQL (each query one series without labels): "
            '(sum(rate(requests_total{app="a"}[2m]))) + (sum(rate(requests_total{app="b"}[2m])))'
            ) in text
    composite = tomllib.loads(text)["autoscaler"][1]["metrics"]
    assert [m["type"] for m in composite] == ["Resource", "External"]
    assert composite[1]["external"]["metric"] == {"name": "composite-metric"}
    assert any("scalingModifiers is not carried over" in note for note in notes)


BROKEN = [
    # (id, path in the ScaledObject, value, field path and message in the error)
    ("api-version", ("apiVersion",), "keda.sh/v1", 'apiVersion: "keda.sh/v1" is not supported'),
    ("no-triggers", ("spec", "triggers"), [], "spec.triggers: must list at least one trigger"),
    ("threshold-text", ("spec", "triggers", 0, "metadata", "threshold"), "lots",
     'spec.triggers[0].metadata.threshold: must be a number greater than 0, got "lots"'),
    ("threshold-zero", ("spec", "triggers", 0, "metadata", "threshold"), "0",
     "must be a number greater than 0"),
    ("no-query", ("spec", "triggers", 0, "metadata", "query"), None,
     "spec.triggers[0].metadata.query: required"),
    ("bool", ("spec", "triggers", 0, "metadata", "unsafeSsl"), "yes",
     'spec.triggers[0].metadata.unsafeSsl: must be true or false, got "yes"'),
    ("headers", ("spec", "triggers", 0, "metadata", "customHeaders"), "a=b=c",
     "customHeaders: expected key=value pairs separated by commas"),
    ("utilization", ("spec", "triggers", 0, "metricType"), "Utilization",
     "spec.triggers[0].metricType: Utilization is for cpu and memory triggers only"),
    ("min-negative", ("spec", "minReplicaCount"), -1,
     "spec.minReplicaCount: must be a whole number from 0 to 2147483647, got -1"),
    ("paused-replicas", ("metadata", "annotations"), {"autoscaling.keda.sh/paused-replicas": "x"},
     'metadata.annotations."autoscaling.keda.sh/paused-replicas": must be a replica count'),
    ("ref-name", ("spec", "scaleTargetRef", "name"), "a/b",
     "spec.scaleTargetRef.name: may not contain '/'"),
    ("name", ("metadata", "name"), "Web", "metadata.name: must be a lowercase RFC 1123"),
    ("timeout", ("spec", "triggers", 0, "metadata", "timeout"), "soon",
     "metadata.timeout: must be a duration"),
]


@pytest.mark.parametrize(("loc", "value", "message"), [c[1:] for c in BROKEN],
                         ids=[c[0] for c in BROKEN])
def test_broken_object_is_one_line_naming_the_field(tmp_path: Path, loc: tuple[Any, ...],
                                                    value: Any, message: str) -> None:
    """A field KEDA (or the API server) would refuse: one line with file, document and path."""
    so = scaled_object()
    set_field(so, loc, value)
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(so))
    with pytest.raises(InputError) as caught:
        convert_files([str(path)], default_namespace="default")
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"{path}:")
    assert "document 1, " in str(caught.value)
    assert str(caught.value).isprintable()


def set_field(document: Any, loc: tuple[Any, ...], value: Any) -> None:
    for part in loc[:-1]:
        document = document[part]
    if value is None:
        del document[loc[-1]]
    else:
        document[loc[-1]] = value


ATTACKER = '"\n[daemon]\ndryRun = false\n[prometheus]\nurl = "http://attacker.example"\n#'
KEPT = [
    # (id, path, hostile text, where it must land unchanged in the parsed output)
    ("query", ("spec", "triggers", 0, "metadata", "query"), "up" + ATTACKER,
     ("autoscaler", 0, "metrics", 0, "external", "query")),
    ("server", ("spec", "triggers", 0, "metadata", "serverAddress"), "http://p" + ATTACKER,
     ("prometheus", "url")),
    ("header-value", ("spec", "triggers", 0, "metadata", "customHeaders"),
     "X-A=" + ATTACKER.replace(",", "").replace("=", ":"),
     ("prometheus", "headers", "X-A")),
    ("query-param", ("spec", "triggers", 0, "metadata", "queryParameters"),
     "k=v\u2028[daemon]", ("prometheus", "queryParams", "k")),
    ("ref-kind", ("spec", "scaleTargetRef", "kind"), "Kind" + ATTACKER.replace("/", "\\"),
     ("autoscaler", 0, "scaleTargetRef", "kind")),
    ("threshold-exponent", ("spec", "triggers", 0, "metadata", "threshold"), "1e3",
     ("autoscaler", 0, "metrics", 0, "external", "target", "averageValue")),
    ("trigger-name-bidi", ("spec", "triggers", 0, "name"), "t\u202e]nomead[", None),
    ("other-scaler-type", ("spec", "triggers", 0, "type"), "kafka\x1b[31m" + ATTACKER, None),
]


@pytest.mark.parametrize(("loc", "attack", "lands"), [c[1:] for c in KEPT],
                         ids=[c[0] for c in KEPT])
def test_hostile_string_stays_a_value(tmp_path: Path, loc: tuple[Any, ...], attack: str,
                                      lands: tuple[Any, ...] | None) -> None:
    """A hostile string opens no table and ends no line; where it is kept, it is kept exactly."""
    so = scaled_object()
    set_field(so, loc, attack)
    parsed, _, _ = convert(tmp_path, so)
    assert "daemon" not in parsed
    if lands is None:
        return
    value: Any = parsed
    for part in lands:
        value = value[part]
    expected = attack.split("=", 1)[1] if loc[-1] in ("customHeaders", "queryParameters") \
        else attack
    assert value == expected.strip()  # KEDA trims every metadata value


def test_command_writes_and_notes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command writes -o and prints what was skipped or not carried over to stderr."""
    out = tmp_path / "out.toml"
    assert main(["import-keda", str(KEDA / "advanced.yaml"), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: skipped ScaledJob batch: it runs Jobs, not a workload's replicas" in err
    assert "note: jobs/worker: KEDA trigger 1 (kafka) is not carried over" in err
    assert out.read_text().startswith("# Written by `autoscaler import-keda` from ")
    assert main(["import-keda", str(KEDA / "prometheus.yaml"), "--out", str(out)]) == 0
    assert main(["check", str(out), "--syntax-only"]) == 0


def test_no_scaled_object_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Input without a ScaledObject is exit code 1 saying so."""
    (tmp_path / "in.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n")
    assert main(["import-keda", str(tmp_path / "in.yaml")]) == 1
    assert "no ScaledObject found in" in capsys.readouterr().err


def test_round_trip_keeps_bounds_and_behavior() -> None:
    """min/max, behavior, pause and fallback of the documented objects come back as given."""
    text, _ = convert_files([str(KEDA / "advanced.yaml")], default_namespace="default")
    worker, composite = parse_config(fill_todos(text)).targets
    assert (worker.spec.min_replicas, worker.spec.max_replicas) == (1, 50)
    assert worker.paused_replicas == 3
    assert worker.spec.behavior is not None
    assert worker.spec.behavior.scale_down is not None
    assert worker.spec.behavior.scale_down.stabilization_window_seconds == 300
    assert worker.fallback is not None
    assert (worker.fallback.failure_threshold, worker.fallback.replicas) == (4, 6)
    assert composite.paused is True


texts = st.text(max_size=12)
STRING_FIELDS = [
    ("metadata", "name"), ("metadata", "namespace"), ("spec", "scaleTargetRef", "name"),
    ("spec", "scaleTargetRef", "kind"), ("spec", "scaleTargetRef", "apiVersion"),
    ("spec", "triggers", 0, "type"), ("spec", "triggers", 0, "name"),
    ("spec", "triggers", 0, "metricType"),
    *(("spec", "triggers", 0, "metadata", key) for key in (
        "serverAddress", "query", "threshold", "activationThreshold", "ignoreNullValues",
        "customHeaders", "queryParameters", "unsafeSsl", "timeout", "authModes", "namespace")),
    *(("spec", "triggers", 1, "metadata", key) for key in (
        "timezone", "start", "end", "desiredReplicas")),
    ("spec", "fallback", "behavior"), ("spec", "advanced", "scalingModifiers", "formula"),
]


@st.composite
def hostile_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A ScaledObject with a prometheus and a cron trigger and any text in its string fields."""
    cron = {"type": "cron", "metadata": {"timezone": "UTC", "start": "0 6 * * *",
                                          "end": "0 7 * * *", "desiredReplicas": "2"}}
    so = scaled_object(triggers=[prometheus(), cron], fallback={
        "failureThreshold": 1, "replicas": 2}, advanced={"scalingModifiers": {"target": "1"}})
    for loc in draw(st.lists(st.sampled_from(STRING_FIELDS), min_size=1, max_size=6)):
        set_field(so, loc, draw(texts))
    return so


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(so=hostile_objects())
def test_any_strings_give_targets_or_one_error_line(tmp_path: Path, so: dict[str, Any]) -> None:
    """Any text in any string field: only our tables, every line printable, or one error line."""
    outcome = convert_or_error(tmp_path, so)
    if isinstance(outcome, InputError):
        event("rejected")
        assert str(outcome).isprintable()
        assert "document 1, " in str(outcome)
        return
    event("imported")
    parsed, _, text = outcome
    assert len(parsed["autoscaler"]) == 1
    try:
        parse_config(fill_todos(text))
    except ConfigError:
        event("check rejects")


def convert_or_error(tmp_path: Path,
                     so: dict[str, Any]) -> tuple[dict[str, Any], list[str], str] | InputError:
    try:
        return convert(tmp_path, so)
    except InputError as error:
        return error


def test_cli_runs_import_keda(tmp_path: Path) -> None:
    """`autoscaler import-keda` is a command of the CLI."""
    from autoscaler.cli import main
    out = tmp_path / "out.toml"
    assert main(["import-keda", str(KEDA / "prometheus.yaml"), "--out", str(out)]) == 0
    assert len(parse_config(out.read_text()).targets) == 3


@pytest.mark.parametrize(("spec", "expected"), [
    ({"secretTargetRef": [{"parameter": "bearerToken", "name": "prom", "key": "token"}]},
     "TODO: a file holding bearerToken of TriggerAuthentication creds (key token of Secret "
     "prom)"),
    ({"secretTargetRef": 5}, "TODO: a file holding bearerToken of TriggerAuthentication creds"),
    ({"secretTargetRef": [{"parameter": "bearerToken", "name": "p\n[daemon]", "key": "t"}]},
     'TODO: a file holding bearerToken of TriggerAuthentication creds (key t of Secret '
     '"p\\n[daemon]")'),
], ids=["named", "unreadable-is-left-out", "hostile-name-escaped"])
def test_trigger_authentication_in_the_input_names_the_secret(
    tmp_path: Path, spec: dict[str, Any], expected: str
) -> None:
    """With its TriggerAuthentication in the input, the secret's TODO names the Secret's key."""
    auth = {"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": {"name": "creds", "namespace": "shop"}, "spec": spec}
    trigger = {**prometheus(authModes="bearer"), "authenticationRef": {"name": "creds"}}
    parsed, _, _ = convert(tmp_path, auth, scaled_object(triggers=[trigger]))
    assert parsed["prometheus"]["bearerTokenFile"] == expected


OUT_OF_RANGE_TRIGGERS = [
    ("threshold-beyond-int64", {"threshold": "1e400"}, "threshold"),
    ("activation-negative", {"activationThreshold": "-1"}, "activationThreshold"),
]


@pytest.mark.parametrize(("metadata", "field"), [c[1:] for c in OUT_OF_RANGE_TRIGGERS],
                         ids=[c[0] for c in OUT_OF_RANGE_TRIGGERS])
def test_a_trigger_number_check_would_refuse_is_an_error_naming_it(
    tmp_path: Path, metadata: dict[str, Any], field: str,
) -> None:
    """A number the config refuses (past int64 milli-units, a negative activation) is a
    one-line error naming the trigger's field, as "0" is, not a config that `check` fails."""
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(scaled_object(minReplicaCount=0,
                                                 triggers=[prometheus(**metadata)])))
    refused: InputError | None = None
    try:
        text, _ = convert_files([str(path)], default_namespace="default")
    except InputError as error:
        refused = error
    if refused is not None:
        assert f"spec.triggers[0].metadata.{field}" in str(refused)
        return
    try:
        parse_config(fill_todos(text))
    except ConfigError as error:
        pytest.fail(f"import-keda wrote a config check refuses: {error}")


def test_check_of_an_import_keda_output_speaks_of_the_importer_that_wrote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A TODO query left by import-keda is named as an importer's placeholder, never as
    something import-hpa wrote."""
    source = tmp_path / "so.yaml"
    source.write_text(yaml.safe_dump({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "worker", "namespace": "jobs"},
        "spec": {"scaleTargetRef": {"name": "worker"}, "maxReplicaCount": 5,
                 "triggers": [{"type": "rabbitmq", "metadata": {"queueName": "q"}}]}}))
    out = tmp_path / "out.toml"
    assert main(["import-keda", str(source), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["check", str(out), "--syntax-only"]) == 1
    err = capsys.readouterr().err
    assert "is still the TODO placeholder an importer wrote" in err
    assert "import-hpa" not in err
