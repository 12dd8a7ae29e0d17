"""prometheus-adapter's rules, read to write the PromQL behind an HPA's custom metrics.

``import-hpa --adapter-rules FILE`` reads the adapter's configuration (the config file, its
ConfigMap, or the Helm chart's values with ``rules.custom``/``rules.external``) and, for each
Pods, Object or External metric of an HPA, finds the rule that serves it as the adapter
would: ``rules`` for Pods and Object metrics, ``externalRules`` for External ones, the first
whose naming (``name.matches``/``as``) turns some series into the metric's name and whose
``seriesQuery`` and ``seriesFilters`` admit that series. The rule's ``metricsQuery`` is
then filled in as the adapter fills it (``<<.Series>>``, ``<<.LabelMatchers>>``,
``<<.GroupBy>>``), with our placeholders where the adapter puts the objects it was asked
about: ``${pod_regex}`` for the pods, ``${namespace}`` for the namespace.

Regular expressions are Go's, so they run on RE2 (``adapter_naming``). A rule the adapter
itself would refuse (a bad regex, ``as`` missing with two capture groups) is an error naming
the file, line and field. A series is found from the names alone: that it exists with the
labels the query uses is for ``autoscaler check --prometheus`` to confirm. Templates are
read in linear time and filled to at most ``MAX_QUERY`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from autoscaler.config.issues import Loc
from autoscaler.importers import manifest_fields as read
from autoscaler.importers.adapter_naming import Naming, compile_regex, series_for
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import (
    Document,
    InputError,
    parse_manifests,
    plain,
    read_manifests,
    shown,
)
from autoscaler.importers.toml_out import key as toml_key
from autoscaler.importers.toml_out import string

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ACTION = re.compile(r"<<(-\s)?\s*(.*?)\s*(\s-)?>>", re.DOTALL)
"""A Go template action, matched between a ``<<`` and the next ``>>`` only (linear time)."""
MAX_ACTION = 200
"""The longest ``<<...>>`` read; ``<< .LabelMatchers >>`` is 21."""
MAX_QUERY = 64 * 1024
"""The longest query a rule may fill to: more is no query anyone meant."""
_FIELD = re.compile(r"\.([A-Za-z]+)")
_RULE_KEYS = ("rules", "externalRules", "resourceRules")


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """The PromQL for a metric and the comment saying where it came from."""

    query: str
    comment: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One discovery rule, compiled as the adapter compiles it."""

    where: str
    """``rules[2]`` or ``externalRules[0]``, with the file it came from."""
    naming: Naming
    metrics_query: str
    overrides: Mapping[str, tuple[str, str]]
    """Prometheus label -> (group, resource)."""
    template: str | None
    namespaced: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterRules:
    """The custom (``rules``) and external (``externalRules``) rules of one configuration."""

    rules: tuple[Rule, ...]
    external: tuple[Rule, ...]

    def resolve(self, metric_type: str, source: Mapping[str, Any]) -> Resolved | str:
        """The PromQL for a Pods, Object or External metric source, or why there is none.

        Series named outright by a rule's seriesQuery come before series found by reading a
        rule's naming backwards; the first that gives a query wins, and the comment names
        the other candidates (only Prometheus knows which series exist).
        """
        identifier = read.mapping(source.get("metric"), ())
        name = identifier.get("name")
        kind = "externalRules" if metric_type == "External" else "rules"
        rules = self.external if metric_type == "External" else self.rules
        found = sorted(((tier, rule, series) for rule in rules
                        for tier, series in series_for(rule.naming, str(name))),
                       key=lambda candidate: candidate[0])
        written: list[tuple[int, Rule, str, str]] = []
        reasons: list[str] = []
        for tier, rule, series in found:
            query = _query(rule, metric_type, series, source)
            if query.startswith("!"):
                reasons.append(f"{rule.where} names it, but {query[1:]}")
            elif not written or tier == written[0][0]:
                written.append((tier, rule, series, query))
        if not written:
            return "; ".join(reasons) or (
                f"no prometheus-adapter {kind} entry names {shown(name)} ({len(rules)} checked)")
        tier, rule, series, query = written[0]
        guess = " if Prometheus has it (the rule's name.matches reads back to it)" if tier else ""
        comment = [f"From prometheus-adapter {rule.where}: series {series}{guess}."]
        comment += [f"  If it does not exist: series {other} of {other_rule.where}."
                    for _, other_rule, other, _ in written[1:4]]
        return Resolved(query=query, comment=tuple(comment))


def read_adapter_rules(file: str) -> AdapterRules:
    """The rules of the adapter configuration in ``file``; ``InputError`` if unusable."""
    rules: list[Rule] = []
    external: list[Rule] = []
    found = False
    for document, config, loc in _configs(read_manifests(file)):
        found = True
        try:
            rules += _rules(config, "rules", loc, document.file)
            external += _rules(config, "externalRules", loc, document.file)
        except ManifestError as error:
            raise document.error(error.loc, error.message) from None
    if not found:
        raise InputError(f"{plain(file)}: no prometheus-adapter rules found: expected the "
                         "adapter's config file, its ConfigMap, or the Helm chart's values")
    return AdapterRules(rules=tuple(rules), external=tuple(external))


def _configs(documents: list[Document]) -> Iterator[tuple[Document, Mapping[str, Any], Loc]]:
    """Each configuration in the documents: (document, the config, its path in the document)."""
    for document in documents:
        value = document.value
        if not isinstance(value, Mapping):
            continue
        if value.get("kind") == "ConfigMap":
            yield from _in_config_map(document)
        elif isinstance(value.get("rules"), Mapping):  # the Helm chart's values
            chart = value["rules"]
            yield document, {"rules": chart.get("custom"),
                             "externalRules": chart.get("external")}, ("rules",)
        elif any(k in value for k in _RULE_KEYS):
            yield document, value, ()


def _in_config_map(document: Document) -> Iterator[tuple[Document, Mapping[str, Any], Loc]]:
    try:
        data = read.mapping(document.value.get("data"), ("data",))
        for key, text in data.items():
            read.string(text, ("data", key))
    except ManifestError as error:
        raise document.error(error.loc, error.message) from None
    name = read.name_of(document.value)
    for key, text in data.items():
        label = f"{plain(document.file)} (data.{toml_key(key)} of ConfigMap {name})"
        for inner in parse_manifests(text, label):
            if isinstance(inner.value, Mapping) and any(k in inner.value for k in _RULE_KEYS):
                yield inner, inner.value, ()


def _rules(config: Mapping[str, Any], group: str, loc: Loc, file: str) -> list[Rule]:
    """The rules of one group (``rules`` or ``externalRules``) of a configuration."""
    key = group if loc == () else {"rules": "custom", "externalRules": "external"}[group]
    where = (*loc, key)
    listed = read.array(config.get(group), where)
    return [_rule(read.mapping(value, (*where, index)), (*where, index),
                  f"{group}[{index}] of {plain(file)}")
            for index, value in enumerate(listed)]


def _rule(rule: Mapping[str, Any], loc: Loc, where: str) -> Rule:
    filters = []
    for index, value in enumerate(read.array(rule.get("seriesFilters"), (*loc, "seriesFilters"))):
        entry = read.mapping(value, (*loc, "seriesFilters", index))
        if ("is" in entry) == ("isNot" in entry):
            raise ManifestError((*loc, "seriesFilters", index), "must have exactly one of "
                                "'is' and 'isNot'")
        field = "is" if "is" in entry else "isNot"
        pattern = read.string(entry[field], (*loc, "seriesFilters", index, field)) or ""
        where_ = (*loc, "seriesFilters", index, field)
        filters.append((field == "is", compile_regex(pattern, where_)))
    naming = read.mapping(rule.get("name"), (*loc, "name"))
    matches_text = read.string(naming.get("matches"), (*loc, "name", "matches")) or ".*"
    matches = compile_regex(matches_text, (*loc, "name", "matches"))
    as_ = read.string(naming.get("as"), (*loc, "name", "as")) or ""
    if not as_:
        if matches.groups > 1:
            raise ManifestError((*loc, "name"), f"needs 'as': matches has {matches.groups} "
                                "capture groups (the adapter refuses this rule too)")
        as_ = f"${matches.groups}"
    resources = read.mapping(rule.get("resources"), (*loc, "resources"))
    namespaced = resources.get("namespaced", True)
    if not isinstance(namespaced, bool):
        raise ManifestError((*loc, "resources", "namespaced"),
                            f"must be true or false, got {shown(namespaced)}")
    return Rule(
        where=where, naming=Naming(
            series_query=read.string(rule.get("seriesQuery"), (*loc, "seriesQuery")) or "",
            filters=tuple(filters), matches=matches, as_=as_),
        metrics_query=read.string(rule.get("metricsQuery"), (*loc, "metricsQuery")) or "",
        overrides=_overrides(resources.get("overrides"), (*loc, "resources", "overrides")),
        template=read.string(resources.get("template"), (*loc, "resources", "template")),
        namespaced=namespaced)


def _overrides(value: Any, loc: Loc) -> dict[str, tuple[str, str]]:
    overrides = {}
    for label, target in read.mapping(value, loc).items():
        if not _LABEL_NAME.fullmatch(label):
            raise ManifestError((*loc, label), f"{shown(label)} is not a Prometheus label name")
        entry = read.mapping(target, (*loc, label))
        resource = read.string(entry.get("resource"), (*loc, label, "resource"))
        if not resource:
            raise ManifestError((*loc, label, "resource"), "required")
        group = read.string(entry.get("group"), (*loc, label, "group")) or ""
        overrides[label] = (group, resource.lower())
    return overrides


# --- querying: the metricsQuery filled in ---------------------------------------------------


def _query(rule: Rule, metric_type: str, series: str, source: Mapping[str, Any]) -> str:
    """The filled-in metricsQuery, or ``!reason`` when it cannot be written."""
    identifier = read.mapping(source.get("metric"), ())
    matchers = _selector_matchers(identifier.get("selector"))
    if matchers is None:
        return "!its selector cannot be written as PromQL matchers"
    namespace = _label_for(rule, "", "namespace")
    if metric_type == "External":
        if rule.namespaced:
            if namespace is None:
                return "!it has no label for namespaces"
            matchers.append(f'{namespace}="${{namespace}}"')
        group_by = ""
    else:
        described = read.mapping(source.get("describedObject"), ())
        kind = "Pod" if metric_type == "Pods" else str(described.get("kind"))
        group = str(described.get("apiVersion") or "").rpartition("/")[0]
        label = _label_for(rule, "" if metric_type == "Pods" else group, kind.lower())
        if label is None or namespace is None:
            return f"!it has no label for {'namespaces' if namespace is None else kind}"
        matchers.append(f'{namespace}="${{namespace}}"')
        if metric_type == "Pods":
            matchers.append(f'{label}=~"${{pod_regex}}"')
        else:
            matchers.append(f"{label}={_promql_string(str(described.get('name')))}")
        group_by = label
    if matchers[-2:] == ['namespace="${namespace}"', 'pod=~"${pod_regex}"']:
        matchers[-2:] = ["${pod_selector}"]
    query = _fill(rule.metrics_query, {
        "Series": series, "LabelMatchers": ",".join(matchers), "GroupBy": group_by})
    if query is None:
        return "!its metricsQuery uses template actions other than .Series, .LabelMatchers " \
               f"and .GroupBy, or fills to more than {MAX_QUERY} characters"
    if not query.strip():
        return "!its metricsQuery is empty"
    if metric_type == "Pods" and group_by != "pod":
        # Our Pods queries answer one series per pod with a `pod` label.
        query = f'label_replace({query}, "pod", "$$1", "{group_by}", "(.*)")'
    return query


def _label_for(rule: Rule, group: str, singular: str) -> str | None:
    """The label the rule gives a group-resource: an override naming it, else the template
    (``<<.Group>>`` with dots and dashes as underscores, ``<<.Resource>>`` singular)."""
    plural = _plural(singular)
    for label, (wanted_group, resource) in rule.overrides.items():
        if resource in (singular, plural) and wanted_group in ("", group):
            return label
    if rule.template is None:
        return None
    filled = _fill(rule.template, {"Group": re.sub(r"[.-]", "_", group), "Resource": singular})
    return filled if filled and _LABEL_NAME.fullmatch(filled) else None


def _plural(singular: str) -> str:
    """apimachinery's ``UnsafeGuessKindToResource``, which the adapter's mapper agrees with
    for the kinds an HPA names."""
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"


def _fill(template: str, values: Mapping[str, str]) -> str | None:
    """A ``<<``/``>>`` Go template whose only actions are ``.Field``; None if it has others,
    or if it would fill to more than ``MAX_QUERY`` characters.

    The template's own text is PromQL where ``$`` must be written ``$$`` for our templates;
    the values are already written for them. ``<<-`` and ``->>`` trim spaces, as in Go.
    """
    texts: list[str] = []
    fields: list[tuple[str, bool, bool]] = []
    at = 0
    while (begin := template.find("<<", at)) >= 0:
        close = template.find(">>", begin + 2)
        if close < 0 or close - begin > MAX_ACTION:
            return None
        action = _ACTION.fullmatch(template, begin, close + 2)
        field = _FIELD.fullmatch(action[2]) if action else None
        if action is None or field is None or field[1] not in values:
            return None
        texts.append(template[at:begin])
        fields.append((field[1], bool(action[1]), bool(action[3])))
        at = close + 2
    texts.append(template[at:])
    if sum(map(len, texts)) + sum(len(values[name]) for name, _, _ in fields) > MAX_QUERY:
        return None
    for index, (_, left, right) in enumerate(fields):
        texts[index] = texts[index].rstrip() if left else texts[index]
        texts[index + 1] = texts[index + 1].lstrip() if right else texts[index + 1]
    out = [texts[0].replace("$", "$$")]
    for (name, _, _), text in zip(fields, texts[1:], strict=True):
        out += [values[name], text.replace("$", "$$")]
    return "".join(out)


def _selector_matchers(selector: Any) -> list[str] | None:
    """A LabelSelector as the adapter's matchers, sorted by label (as ``labels.Selector``
    sorts them); None when a key is not a Prometheus label or an operator is unknown."""
    if not isinstance(selector, Mapping):
        return []
    parts: list[tuple[str, str]] = []
    labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not isinstance(expressions, list):
        return None
    for label, value in labels.items():
        if not isinstance(value, str):
            return None
        parts.append((label, f"={_promql_string(value)}"))
    for expression in expressions:
        part = _expression(expression)
        if part is None:
            return None
        parts.append(part)
    if any(not _LABEL_NAME.fullmatch(label) for label, _ in parts):
        return None
    return [label + matcher for label, matcher in sorted(parts, key=lambda p: p[0])]


def _expression(expression: Any) -> tuple[str, str] | None:
    """One ``matchExpressions`` entry as the adapter writes it (``In`` a|b is ``=~"a|b"``)."""
    if not isinstance(expression, Mapping):
        return None
    label, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(label, str) or not isinstance(values, list) or \
            not all(isinstance(v, str) for v in values):
        return None
    joined = _promql_string("|".join(sorted(set(values))))
    written = {("In", True): f"=~{joined}", ("NotIn", True): f"!~{joined}",
               ("Exists", False): '!=""', ("DoesNotExist", False): '=""'}
    found = written.get((str(operator), bool(values)))
    return None if found is None else (label, found)


def _promql_string(value: str) -> str:
    """A PromQL string literal (Go's escapes) with ``$`` doubled for our query templates."""
    return string(value).replace("$", "$$")
