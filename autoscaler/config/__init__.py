"""The daemon's configuration: one TOML file, checked completely before anything uses it.

``load_config(path)`` returns a ``Config`` (daemon settings, Prometheus servers, Kubernetes
access, and one ``TargetConfig`` per ``[[autoscaler]]`` table with its HPA spec as the
algorithm core's types) or raises ``ConfigError`` listing every problem as
``FILE:LINE: FIELD.PATH: message``. ``config/README.md`` documents every key.

Query templates take these placeholders (``string.Template`` syntax; ``$$`` is a literal ``$``):

- ``${namespace}``: the target's namespace;
- ``${name}``: ``scaleTargetRef.name``;
- ``${kind}``: ``scaleTargetRef.kind``;
- ``${pod_selector}``: ``namespace="<ns>",pod=~"<pod_regex>"``, to put inside ``{...}``;
- ``${pod_regex}``: the target's current pod names, regex-escaped and joined with ``|``;
- ``${container}``: a ContainerResource metric's container (empty otherwise).

Modules: ``model`` (the validated dataclasses), ``schema`` (the file's shape, pydantic;
nothing outside this package sees pydantic), ``fields`` (field types), ``settings`` and
``targets`` (cross-field rules, conversion to ``model``), ``loader`` (the pipeline),
``errors`` (issues), ``locate`` (TOML line numbers), ``translate`` (pydantic errors as
messages), ``query`` (templates), ``durations``, ``files`` (reading the file safely, checking
the files it names); ``check`` (the summary ``autoscaler check`` prints), ``importer``
(import-hpa: ``hpa``, ``adapter_rules`` and ``adapter_naming``) and ``import_keda`` (``keda``,
``keda_metadata``, ``keda_triggers``, ``keda_cron``), which share ``manifests``,
``manifest_fields``, ``import_out`` and ``toml_out``. The commands themselves live in
``autoscaler.commands``.
"""

from autoscaler.config.durations import format_duration, parse_duration
from autoscaler.config.errors import ConfigError, ConfigIssue
from autoscaler.config.loader import load_config, parse_config
from autoscaler.config.model import (
    DEFAULT_SERVER,
    DEFAULT_SYNC_PERIOD,
    Config,
    DaemonSettings,
    Fallback,
    KubernetesSettings,
    LeaderElectionSettings,
    MetricQuery,
    PrometheusServer,
    RequestsSource,
    ScaleTargetRef,
    TargetConfig,
)
from autoscaler.config.query import PLACEHOLDERS, render_query

__all__ = [
    "DEFAULT_SERVER", "DEFAULT_SYNC_PERIOD", "PLACEHOLDERS", "Config", "ConfigError",
    "ConfigIssue", "DaemonSettings", "Fallback", "KubernetesSettings", "LeaderElectionSettings",
    "MetricQuery", "PrometheusServer", "RequestsSource", "ScaleTargetRef", "TargetConfig",
    "format_duration", "load_config", "parse_config", "parse_duration", "render_query",
]
