"""The Kubernetes HPA algorithm as a pure library: no I/O, no clock reads, no logging.

Its values have one idiom per kind: what is made once (a spec, a setting, a rule) is a
``@record``, and what is made every pass is a native value type in a module of values alone
(``model`` for what a decision observes, ``decision_values``, ``stage_values`` and
``zero_values`` for what it makes), so the rule modules open on their rules
(``autoscaler/record.py`` says how both are written and kept immutable).

Build an ``AutoscalerSpec``, gather the target's ``ScaleState``, its ``Pod`` list and one
``MetricValues`` per metric spec, and call ``decide`` with them, the target's ``History``
and ``now`` in one ``DecisionInput``.
After a successful scale write, fold the change into the history with ``record_scale_event``.
"""

from autoscaler.algorithm.behavior import rate_limited, record_scale_event, resolve_behavior
from autoscaler.algorithm.decision import Decide, bridge_gap, decide
from autoscaler.algorithm.decision_values import Bounds, Condition, Decision, DecisionInput
from autoscaler.algorithm.model import (
    AlgorithmSettings,
    AutoscalerSpec,
    Behavior,
    ConditionStatus,
    Container,
    ExternalMetricValues,
    History,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    MetricUnavailable,
    MetricValues,
    Milli,
    ObjectMetricValue,
    Pod,
    PodMetricValues,
    PodPhase,
    PodSample,
    PodValues,
    PolicyType,
    Recommendation,
    RequestsBasis,
    ScaleEvent,
    ScaleState,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
)
from autoscaler.algorithm.quantity import QuantityError, format_milli, parse_milli
from autoscaler.algorithm.reasons import (
    ConditionType,
    EventReason,
    Reason,
    Step,
    rescale_message,
)
from autoscaler.algorithm.stage_values import (
    MetricCurrent,
    MetricOutcome,
    MetricProposal,
    Tolerances,
)

__all__ = [
    "AlgorithmSettings", "AutoscalerSpec", "Behavior", "Bounds", "Condition", "ConditionStatus",
    "ConditionType", "Container", "Decide", "Decision", "DecisionInput", "EventReason",
    "ExternalMetricValues", "History", "MetricCurrent", "MetricOutcome", "MetricProposal",
    "MetricSourceType", "MetricSpec", "MetricTarget", "MetricTargetType", "MetricUnavailable",
    "MetricValues", "Milli", "ObjectMetricValue", "Pod", "PodMetricValues", "PodPhase",
    "PodSample", "PodValues", "PolicyType", "QuantityError", "Reason", "Recommendation",
    "RequestsBasis", "ScaleEvent", "ScaleState", "ScalingPolicy", "ScalingRules", "SelectPolicy",
    "Step", "Tolerances", "bridge_gap", "decide", "format_milli", "parse_milli", "rate_limited",
    "record_scale_event", "rescale_message", "resolve_behavior",
]
