"""What ``status`` and ``plan`` print: a ``kubectl get hpa`` table and a ``describe`` page.

Both render a target's ``/status`` body (``runtime/status.py``) and nothing else, so what a
person reads here is what a dashboard or a script reads from the daemon. The page adds what
upstream cannot show: each metric's query and per-pod values with the pods named by group,
each stage of the last decision with the window or policy that shaped it and when it lets go,
and the earliest moment a scale-down can happen. Times are printed as RFC 3339 UTC with the
distance from ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from autoscaler.config.durations import format_duration
from autoscaler.runtime.ring import SINGLE_LEADER_NOT_READ
from autoscaler.terminal import columns

Body = Mapping[str, Any]
NONE = "<none>"
UNKNOWN = "<unknown>"

TABLE_HEADERS = ("NAMESPACE", "NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS",
                 "REPLICAS", "DESIRED", "LAST SCALE", "CONDITIONS")
_QUIET_REASONS = frozenset({"SucceededGetScale", "ReadyForNewScale", "SucceededRescale",
                            "ValidMetricFound", "DesiredWithinRange", "NotScaledToZero"})
_FALSE_IS_NORMAL = frozenset({"ScalingLimited", "ScaledToZero"})
"""Conditions whose False says nothing is amiss (not limited; not held at zero)."""


def split_key(key: str) -> tuple[str, str, str]:
    """``ns/Kind/name`` -> (namespace, kind, name)."""
    namespace, _, rest = key.partition("/")
    kind, _, name = rest.partition("/")
    return namespace, kind, name


# --- the table ------------------------------------------------------------------------------


def table(bodies: Iterable[Body], *, now: datetime, colour: bool = False) -> str:
    """One row per target, as ``kubectl get hpa -A`` (plus DESIRED, LAST SCALE, CONDITIONS);
    with ``colour``, the conditions in red (failing) or yellow (held back or limited)."""
    rows = [TABLE_HEADERS]
    tones = [""]
    for body in bodies:
        namespace, kind, name = split_key(str(body.get("target", "")))
        rows.append((
            namespace, name, f"{kind}/{name}", targets_cell(body),
            _text(body.get("minReplicas")), _text(body.get("maxReplicas")),
            _text(body.get("currentReplicas")), _text(body.get("desiredReplicas")),
            _age(body.get("lastScaleTime"), now), condition_summary(body)))
        tones.append(tone(body) if colour else "")
    lines = columns(rows).splitlines()
    return "\n".join(_paint_last(line, row[-1], colour_code) for line, row, colour_code
                     in zip(lines, rows, tones, strict=True))


def ring_summary(ring: Body) -> str:
    """The line under the table of a ring member (dynamic sharding): who it is, what it holds
    (the table lists only its targets), and what no one holds."""
    held, claiming, releasing = (len(ring.get(k) or ()) for k in
                                 ("buckets", "claiming", "releasing"))
    unowned = ring.get("unownedBuckets") or []
    return (f"Ring member {ring.get('member', '?')}"
            f"{'' if ring.get('valid') else ' (not valid: writes nothing)'}: "
            f"{held} buckets held, {claiming} claiming, {releasing} releasing; "
            f"{len(ring.get('members') or ())} members; "
            f"unowned buckets: {', '.join(unowned) if unowned else 'none'}; "
            f"{ring.get('moves', 0)} moves; caches {ring.get('cachedNamespaces', '?')} "
            f"namespaces{_pending(ring.get('standbyPendingNamespaces'))}"
            f"{_single_leader(ring.get('singleLeader'))}")


def _pending(count: object) -> str:
    return f" ({count} more once the ring settles)" if isinstance(count, int) and count else ""


def _single_leader(holder: object) -> str:
    if not holder:
        return ""
    if holder == SINGLE_LEADER_NOT_READ:
        return "; claims nothing until it has read the single-leader Lease of this name"
    return f"; claims nothing while the single leader {holder} of this name acts"


_TONES = {"red": "\033[31m", "yellow": "\033[33m"}


def tone(body: Body) -> str:
    """``red`` for a target that cannot be scaled, ``yellow`` for one held back, else ""."""
    conditions = body.get("conditions", ())
    if body.get("lastOutcome") == "error" or any(
            c["status"] == "False" and c["type"] != "ScalingLimited" for c in conditions):
        return "red"
    if body.get("paused") or body.get("blockedBy") or any(
            c["type"] == "ScalingLimited" and c["status"] == "True" for c in conditions) or any(
            str(c["reason"]).endswith("Stabilized") for c in conditions):
        return "yellow"
    return ""


def _paint_last(line: str, cell: str, name: str) -> str:
    if not name or not line.endswith(cell):
        return line
    return f"{line[:-len(cell)]}{_TONES[name]}{cell}\033[0m"


def targets_cell(body: Body) -> str:
    metrics = body.get("currentMetrics")
    if not metrics:
        return UNKNOWN
    return ", ".join(f"{m['name']}: {current_of(m)}/{target_of(m)}" for m in metrics)


def target_of(metric: Body) -> str:
    target = metric.get("target", {})
    if "averageUtilization" in target:
        return f"{target['averageUtilization']}%"
    if "averageValue" in target:
        average = target["averageValue"]
        return f"{average} (avg)" if metric.get("type") in {"Object", "External"} else average
    return str(target.get("value", UNKNOWN))


def current_of(metric: Body) -> str:
    current = metric.get("current")
    if not current:
        return UNKNOWN
    if "averageUtilization" in current and "averageUtilization" in metric.get("target", {}):
        return f"{current['averageUtilization']}%"
    return str(current.get("averageValue", current.get("value", UNKNOWN)))


def condition_summary(body: Body) -> str:
    """The few words that say what is going on: a pause, an owner, an error, a limit."""
    if "paused" in body:
        return f"Paused ({body['paused']})"
    if "blockedBy" in body:
        return "OwnedElsewhere"
    reasons = []
    if "shadow" in body:
        agree = body["shadow"].get("agree")
        reasons.append("Shadow" + ("" if agree is None else " (agree)" if agree
                                   else " (disagree)"))
    for condition in body.get("conditions", ()):
        failing = condition["status"] == "False" and condition["type"] not in _FALSE_IS_NORMAL
        limited = condition["type"] == "ScalingLimited" and condition["status"] == "True"
        if failing or limited or condition["reason"] not in _QUIET_REASONS:
            reasons.append(str(condition["reason"]))
    if body.get("fallbackActive"):
        reasons.append("Fallback")
    return ", ".join(dict.fromkeys(reasons)) or "Ok"


# --- the page -------------------------------------------------------------------------------


def page(body: Body, *, now: datetime, planned: bool = False) -> str:
    """``kubectl describe hpa`` for one target, plus the why of each number."""
    namespace, kind, name = split_key(str(body.get("target", "")))
    decision = body.get("decision")
    lines = _fields([
        ("Name", name),
        ("Namespace", namespace),
        ("Reference", f"{kind}/{name}"),
        ("Min replicas", _text(body.get("minReplicas"))),
        ("Max replicas", _text(body.get("maxReplicas"))),
        (f"{kind} pods", f"{_text(body.get('currentReplicas'))} current / "
                         f"{_text(body.get('desiredReplicas'))} desired"
                         + (" (shadow mode: not written)" if "shadow" in body else "")),
        ("Last reconcile", _last_reconcile(body, now)),
        ("Last scale", _when(body.get("lastScaleTime"), now)),
    ])
    lines += _problems(body)
    lines += _metrics(body)
    lines += _decision(body, decision, now, planned=planned)
    lines += _fields([("Scale-down", _scale_down(body, now))])
    lines += _conditions(body)
    lines += _events(body, now)
    return "\n".join(lines)


_LABEL_WIDTH = 20


def _fields(pairs: Iterable[tuple[str, str]]) -> list[str]:
    return [f"{label + ':':<{_LABEL_WIDTH}} {value}".rstrip() for label, value in pairs]


def _last_reconcile(body: Body, now: datetime) -> str:
    outcome = body.get("lastOutcome", "pending")
    return f"{_when(body.get('lastReconcileTime'), now)}: {outcome}"


def _problems(body: Body) -> list[str]:
    pairs = [(label, str(body[key])) for key, label in (
        ("error", "Error"), ("drift", "Drift"), ("paused", "Paused"))
        if body.get(key)]
    if "shadow" in body:
        pairs.append(("Shadow", shadow_text(body["shadow"])))
    if body.get("blockedBy"):
        pairs.append(("Owned by", ", ".join(body["blockedBy"])
                      + ": the autoscaler leaves this target alone"))
    return _fields(pairs)


def shadow_text(shadow: Body) -> str:
    """Our count against the other autoscaler's, as shadow mode compares them each pass."""
    ours, theirs, owner = shadow.get("desiredReplicas"), shadow.get("theirDesiredReplicas"), (
        shadow.get("owner") or "the other autoscaler")
    if theirs is None:
        return f"this autoscaler would scale to {_text(ours)}; no HPA reports a desired count"
    verdict = "they agree" if shadow.get("agree") else "they disagree"
    return f"this autoscaler would scale to {_text(ours)}, {owner} wants {theirs}: {verdict}"


def _metrics(body: Body) -> list[str]:
    metrics = body.get("currentMetrics")
    if not metrics:
        return _fields([("Metrics", NONE)])
    lines = _fields([("Metrics", "( current / target )")])
    for metric in metrics:
        lines.append(f"  {metric['description']}: {current_of(metric)} / {target_of(metric)}")
        if "query" in metric:
            lines.append(f"    query:     {metric['query']}")
        lines += _pods(metric.get("pods"))
        if "error" in metric:
            lines.append(f"    invalid:   {metric['error']}")
        elif "proposal" in metric:
            lines.append(f"    proposes:  {_proposal(metric)}")
    return lines


def _pods(pods: Body | None) -> list[str]:
    if not pods:
        return []
    groups = ("ready", "unready", "missing", "ignored")
    counts = ", ".join(f"{len(pods[g])} {g}" for g in groups if g in pods)
    lines = [f"    pods:      {counts or str(len(pods.get('values', {}))) + ' with values'}"]
    values: Mapping[str, str] = pods.get("values", {})
    group_of = {pod: group for group in groups for pod in pods.get(group, ())}
    width = max((len(pod) for pod in {*values, *group_of}), default=0)
    for pod in sorted({*values, *group_of}):
        value = values.get(pod, "-")
        group = group_of.get(pod, "")
        note = "" if group == "ready" else f"  ({group}{_GROUP_NOTES.get(group, '')})"
        lines.append(f"      {pod:<{width}}  {value}{note}".rstrip())
    return lines


_GROUP_NOTES = {
    "unready": ": counted as 0 on a scale-up, not at all otherwise",
    "missing": ": no value; counted conservatively (100% down, 0% up)",
    "ignored": ": deleting or failed, left out",
    "": ": not one of the target's pods",
}


def _proposal(metric: Body) -> str:
    ratio = metric.get("ratio")
    text = f"{metric['proposal']} (usage ratio {_ratio(ratio)}"
    if "rebalancedRatio" in metric:
        text += f", {_ratio(metric['rebalancedRatio'])} counting unready and missing pods"
    text += ")"
    if metric.get("withinTolerance"):
        text += ": within tolerance, keep the current count"
    return text


def _ratio(ratio: object) -> str:
    return "infinite (no replicas)" if ratio is None else f"{float(ratio):.3f}"  # type: ignore[arg-type]


def _decision(body: Body, decision: Body | None, now: datetime, *, planned: bool) -> list[str]:
    if decision is None:
        why = body.get("error") or ""
        if body.get("paused"):
            why = f"paused ({body['paused']}): the autoscaler does not decide for this target"
        return _fields([("Decision", NONE + (f": {why}" if why else ""))])
    header = f"{_when(decision.get('time'), now)}"
    if decision.get("latest") is False:  # not the latest pass's: say which was
        header += _EARLIER.get(str(body.get("lastOutcome")), " (an earlier pass)")
    lines = _fields([("Decision", header)])
    steps = [
        ("metrics", _metrics_step(body, decision)),
        ("stabilization", _stabilization_step(decision, now)),
        ("rate limit", _limit_step(decision, now)),
        ("bounds", _bounds_step(body, decision, now)),
    ]
    current, desired = decision.get("current", body.get("currentReplicas")), decision.get("desired")
    if body.get("fallbackActive") and decision.get("latest") is not False:
        steps.append(("fallback", f"every metric invalid for {body.get('consecutiveInvalid')} "
                                  "passes: the configured fallback count applies"))
        desired = body.get("desiredReplicas", desired)
    verb = "would scale" if planned else "scale"
    outcome = f"{desired}" if current == desired else f"{desired} ({verb} {current} -> {desired})"
    steps.append(("desired", outcome))
    lines += [f"  {label + ':':<15} {text}" for label, text in steps]
    return lines


_EARLIER = {
    "error": " (an earlier pass: the last one failed)",
    "paused": " (before the target was paused)",
    "blocked": " (before another autoscaler took the target)",
}


def _metrics_step(body: Body, decision: Body) -> str:
    proposal = decision.get("proposal")
    current = decision.get("current", body.get("currentReplicas"))
    if proposal is None:
        why = decision.get("error") or body.get("error") or "no proposal"
        return f"no valid proposal: holding at {current} ({why})"
    steps = decision.get("steps", ())
    if "WithinTolerance" in steps:
        return f"within tolerance: keep {proposal}"
    text = f"propose {proposal}"
    reason = decision.get("rescaleReason")
    if reason:
        text += f" ({reason})"
    elif decision.get("proposedBy"):
        text += f" (largest: {decision['proposedBy']})"
    if "InvalidMetrics" in steps:
        text += "; some metrics are invalid, so no scale-down"
    return text


def _stabilization_step(decision: Body, now: datetime) -> str:
    hold = decision.get("stabilization")
    if not hold:
        return "not held"
    direction = "scale-down" if hold["reason"] == "ScaleDownStabilized" else "scale-up"
    extreme = "highest" if direction == "scale-down" else "lowest"
    text = (f"{hold['reason']}: the {direction} window of "
            f"{format_duration(hold['windowSeconds'])} holds {hold['heldAt']} (the {extreme} "
            f"recommendation in it) against {decision.get('proposal')}")
    if hold.get("releasesAt"):
        text += f"; releases it at {_when(hold['releasesAt'], now)}"
    return text


def _limit_step(decision: Body, now: datetime) -> str:
    limit = decision.get("limit")
    if not limit:
        return "none"
    reason, count = limit["reason"], limit["limit"]
    if reason == "TooManyReplicas":
        return f"{reason}: maxReplicas caps the step at {count}"
    if reason == "TooFewReplicas":
        return f"{reason}: minReplicas keeps it at {count}"
    policy, select = limit.get("policy"), limit.get("selectPolicy")
    if select == "Disabled":
        return f"{reason}: this direction is disabled (selectPolicy Disabled)"
    if policy is None:
        return (f"{reason}: the default scale-up rate, max(2 x current, 4), allows {count};"
                " the next pass may step again")
    value = policy["value"]
    amount = f"{value}%" if policy["type"] == "Percent" else (
        f"{value} pod{'s' if value != 1 else ''}")
    text = (f"{reason}: policy {amount} per {format_duration(policy['periodSeconds'])} "
            f"(selectPolicy {select}) allows {count}")
    nxt = limit.get("nextStepAt")
    text += f"; next step allowed at {_when(nxt, now)}" if nxt else "; no further step by waiting"
    return text


def _bounds_step(body: Body, decision: Body, now: datetime) -> str:
    bounds = decision.get("bounds")
    if not bounds:
        return UNKNOWN
    text = f"minReplicas {bounds['minReplicas']}, maxReplicas {bounds['maxReplicas']}"
    schedules = body.get("schedules")
    if schedules:
        active = schedules.get("active") or []
        text += (f" (schedule {', '.join(active)} in force)" if active
                 else " (no schedule in force)")
        upcoming = [f"{name} at {_when(at, now)}" for name, at in
                    schedules.get("next", {}).items() if at]
        if upcoming:
            text += "; next: " + ", ".join(upcoming)
    return text


def _scale_down(body: Body, now: datetime) -> str:
    scale_down = body.get("scaleDown")
    if not scale_down:
        return UNKNOWN
    if scale_down.get("earliest"):
        return f"possible from {_when(scale_down['earliest'], now)} if the metrics drop"
    return f"not possible: {scale_down.get('blockedBy', UNKNOWN)}"


def _conditions(body: Body) -> list[str]:
    conditions = body.get("conditions") or []
    if not conditions:
        return _fields([("Conditions", NONE)])
    rows = [("Type", "Status", "Reason", "Message"), ("----", "------", "------", "-------")]
    rows += [(c["type"], c["status"], str(c["reason"]), str(c["message"])) for c in conditions]
    return ["Conditions:", *("  " + line for line in columns(rows).splitlines())]


def _events(body: Body, now: datetime) -> list[str]:
    events = body.get("scaleEvents")
    if not events:
        return _fields([("Scale events", NONE)])
    rows = [("Age", "Direction", "Change")] + [
        (_age(e["time"], now), e["direction"], f"{e['change']} replica"
         f"{'s' if e['change'] != 1 else ''}") for e in events]
    return ["Scale events:", *("  " + line for line in columns(rows).splitlines())]


# --- times ----------------------------------------------------------------------------------


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _when(text: object, now: datetime) -> str:
    """``2026-11-24T10:00:00Z (in 4m12s)``; ``<none>`` when unset."""
    moment = parse_time(text)
    if moment is None:
        return NONE
    return f"{text} ({_relative(moment, now)})"


def _age(text: object, now: datetime) -> str:
    moment = parse_time(text)
    return NONE if moment is None else _relative(moment, now)


def _relative(moment: datetime, now: datetime) -> str:
    seconds = round((moment - now).total_seconds())
    if seconds == 0:
        return "now"
    span = format_duration(abs(seconds))
    return f"in {span}" if seconds > 0 else f"{span} ago"


def _text(value: object) -> str:
    return UNKNOWN if value is None else str(value)


def now_utc() -> datetime:
    return datetime.now(UTC)
