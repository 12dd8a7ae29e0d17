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

Modules: ``validated`` (the validated dataclasses), ``schema`` (the file's shape, pydantic;
nothing outside this package sees pydantic), ``fields`` (field types), ``settings``,
``targets``, ``schedule_tables`` and ``prediction_table`` (cross-field rules, conversion to
``validated``), ``loader`` (the pipeline), ``issues`` (problems with their file, line and
field path), ``locate`` (TOML line numbers), ``translate`` (pydantic errors as messages),
``query`` (templates), ``durations``, ``files`` (reading the file safely, checking the files
it names). Writing our TOML from other tools' manifests is ``autoscaler.importers``'. The
commands themselves live in ``autoscaler.commands`` (with the summary ``check`` prints,
``config_summary``).
"""

from autoscaler.config.durations import format_duration, parse_duration
from autoscaler.config.issues import ConfigError, ConfigIssue
from autoscaler.config.loader import load_config, parse_config
from autoscaler.config.query import PLACEHOLDERS, render_query
from autoscaler.config.validated import (
    DEFAULT_SERVER,
    Config,
    DaemonSettings,
    Fallback,
    KubernetesSettings,
    LeaderElectionSettings,
    MetricQuery,
    PrometheusServer,
    RequestsSource,
    ScaleTargetRef,
    ShardingSettings,
    TargetConfig,
)

__all__ = [
    "DEFAULT_SERVER", "PLACEHOLDERS", "Config", "ConfigError",
    "ConfigIssue", "DaemonSettings", "Fallback", "KubernetesSettings", "LeaderElectionSettings",
    "MetricQuery", "PrometheusServer", "RequestsSource", "ScaleTargetRef", "ShardingSettings",
    "TargetConfig",
    "format_duration", "load_config", "parse_config", "parse_duration", "render_query",
]
