"""What ``autoscaler check`` prints of a valid config: its targets, one row each, and when
each schedule next starts (the command itself is ``autoscaler.commands.check``)."""

from __future__ import annotations

from datetime import UTC, datetime

from autoscaler.algorithm import (
    Behavior,
    MetricSourceType,
    MetricSpec,
    MetricTargetType,
    ScalingRules,
    format_milli,
)
from autoscaler.config import Config, TargetConfig, format_duration
from autoscaler.schedules import active_window, next_activation
from autoscaler.terminal import columns

_HEADERS = ("TARGET", "MIN", "MAX", "METRICS", "BEHAVIOR", "PROMETHEUS", "SYNC")


def summary(config: Config, *, now: datetime | None = None) -> str:
    """The targets as a table, one row each; then each schedule's next activation."""
    lines = columns([_HEADERS, *(_row(target) for target in config.targets)],
                    gap="  ").splitlines()
    lines += schedule_lines(config, now or datetime.now(UTC))
    count = len(config.targets)
    lines.append(f"{count} target{'s' if count != 1 else ''}, "
                 f"{len(config.prometheus_servers)} Prometheus server"
                 f"{'s' if len(config.prometheus_servers) != 1 else ''}"
                 f"{', dry-run' if config.daemon.dry_run else ''}")
    return "\n".join(lines)


def schedule_lines(config: Config, now: datetime) -> list[str]:
    """``schedule <target> <name>: minReplicas 10 ... next 2026-11-24T08:00:00+09:00``."""
    lines = []
    for target in config.targets:
        for schedule in target.schedules:
            bounds = ", ".join(f"{label} {value}" for label, value in (
                ("minReplicas", schedule.min_replicas), ("maxReplicas", schedule.max_replicas))
                if value is not None)
            state = "active now" if active_window(schedule, now) else "inactive"
            upcoming = next_activation(schedule, now)
            when = (upcoming.astimezone(schedule.zone).isoformat(timespec="minutes")
                    if upcoming else "never again")
            lines.append(f"schedule {target.key} {schedule.name!r}: {bounds}"
                         f"{' (immediate)' if schedule.immediate else ''}; {state};"
                         f" next start {when}")
    return lines


def _row(target: TargetConfig) -> tuple[str, ...]:
    key = target.key + (" (paused)" if target.paused or target.paused_replicas is not None
                        else "")
    return (key, str(target.spec.min_replicas), str(target.spec.max_replicas),
            ", ".join(describe_metric(m) for m in target.spec.metrics),
            describe_behavior(target.spec.behavior), target.prometheus,
            format_duration(target.sync_period))


def describe_metric(metric: MetricSpec) -> str:
    """``cpu 80%``, ``memory[app] avg 512Mi``, ``pods:rps avg 100``, ``external:queue 30``."""
    name = metric.name
    if metric.container:
        name = f"{name}[{metric.container}]"
    if metric.type not in {MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE}:
        kind = f"{metric.described_object_kind}/" if metric.described_object_kind else ""
        name = f"{metric.type.lower()}:{kind}{name}"
    target = metric.target
    if target.type is MetricTargetType.UTILIZATION:
        return f"{name} {target.average_utilization}%"
    if target.type is MetricTargetType.AVERAGE_VALUE:
        return f"{name} avg {quantity(target.average_value or 0)}"
    return f"{name} {quantity(target.value or 0)}"


def quantity(milli: int) -> str:
    """Milli-units as a short quantity: ``1.5Gi`` rather than ``1610612736``, ``10k``."""
    if milli % 1000 == 0:
        whole = milli // 1000
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if whole >= size and (whole * 2) % size == 0:
                return f"{whole / size:g}{suffix}"
        for suffix, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
            if whole >= size and whole % (size // 10) == 0:
                return f"{whole / size:g}{suffix}"
    return format_milli(milli)


def describe_behavior(behavior: Behavior | None) -> str:
    if behavior is None:
        return "default"
    return f"up: {_rules(behavior.scale_up)}; down: {_rules(behavior.scale_down)}"


def _rules(rules: ScalingRules | None) -> str:
    if rules is None:
        return "default"
    parts = []
    if rules.stabilization_window_seconds is not None:
        parts.append(f"window {format_duration(rules.stabilization_window_seconds)}")
    if rules.select_policy is not None:
        parts.append(str(rules.select_policy))
    if rules.policies is not None:
        parts.append(" + ".join(
            f"{p.value}{'%' if p.type == 'Percent' else ' pods'}/{p.period_seconds}s"
            for p in rules.policies))
    if rules.tolerance is not None:
        parts.append(f"tolerance {rules.tolerance:g}")
    return " ".join(parts) or "default"


def summary_json(config: Config) -> list[dict[str, object]]:
    """The summary's rows as data, for ``check -o json``."""
    return [{"target": target.key, "minReplicas": target.spec.min_replicas,
             "maxReplicas": target.spec.max_replicas,
             "metrics": [describe_metric(m) for m in target.spec.metrics],
             "behavior": describe_behavior(target.spec.behavior),
             "prometheus": target.prometheus, "syncPeriod": format_duration(target.sync_period),
             "paused": target.paused or target.paused_replicas is not None}
            for target in config.targets]
