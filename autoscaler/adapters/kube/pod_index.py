"""The pods of one namespace in memory, indexed by label so a selector need not scan them all.

Most scale selectors are ``matchLabels`` (equalities): the index of (key, value) -> pod
names narrows a selector to the pods carrying its most selective equality (or ``in``) label
before the full selector is checked, so a pass over many targets in a large namespace costs
roughly the pods selected, not targets x pods. Only the label keys some selector has used
are indexed (a key is indexed on first use): labels no selector names, such as
``pod-template-hash``, cost no index entries. Answers are memoised per selector until the
next change.

A label value carried by a few pods (a workload's ``app=web``: its replicas) keeps their
names in a tuple, a set only past ``_SMALL``: a set of five names takes 728 bytes, a tuple
80, and a fleet has one such entry per target (``bench/daemon_scale.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.adapters.kube.labels import Operator, Selector
from autoscaler.algorithm import Pod

Entry = tuple[Mapping[str, str], Pod, str | None]
"""A pod's labels, the pod, and the resourceVersion it was converted from (if any)."""
Names = tuple[str, ...] | set[str]
"""The pods carrying one label value: a tuple while there are few, else a set."""

_SMALL = 16


class PodIndex:
    def __init__(self) -> None:
        self._pods: dict[str, Entry] = {}
        self._by_label: dict[tuple[str, str], Names] = {}
        self._indexed: set[str] = set()
        """The label keys in ``_by_label``: those selectors have asked for."""
        self._memo: dict[str, list[Pod]] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def get(self, name: str) -> Entry | None:
        return self._pods.get(name)

    def replace(self, entries: Iterable[tuple[str, Entry]]) -> None:
        """Swap in a fresh LIST's pods."""
        self._pods.clear()
        self._by_label.clear()
        for name, entry in entries:
            self.upsert(name, entry)
        self._memo.clear()

    def upsert(self, name: str, entry: Entry) -> None:
        self.delete(name)
        self._pods[name] = entry
        for item in entry[0].items():
            if item[0] in self._indexed:
                self._add(item, name)

    def delete(self, name: str) -> None:
        self._memo.clear()
        old = self._pods.pop(name, None)
        if old is None:
            return
        for item in old[0].items():
            names = self._by_label.get(item)
            if names is None:
                continue
            if isinstance(names, set):
                names.discard(name)
                if len(names) <= _SMALL // 2:  # a workload scaled down: back to a tuple
                    names = self._by_label[item] = tuple(names)
            else:
                names = self._by_label[item] = tuple(n for n in names if n != name)
            if not names:
                del self._by_label[item]

    def _add(self, item: tuple[str, str], name: str) -> None:
        names = self._by_label.get(item, ())
        if isinstance(names, set):
            names.add(name)
        elif len(names) < _SMALL:
            self._by_label[item] = (*names, name)
        else:
            self._by_label[item] = {*names, name}

    def select(self, selector: Selector) -> list[Pod]:
        """The pods matching ``selector``, sorted by name."""
        cached = self._memo.get(selector.text)
        if cached is None:
            pods = (self._pods[name] for name in self._candidates(selector))
            cached = sorted((pod for labels, pod, _ in pods if selector.matches(labels)),
                            key=lambda pod: pod.name)
            self._memo[selector.text] = cached
        return list(cached)

    def _candidates(self, selector: Selector) -> Iterable[str]:
        best: set[str] | None = None
        for requirement in selector.requirements:
            if requirement.operator is not Operator.IN:
                continue
            if requirement.key not in self._indexed:
                self._index_key(requirement.key)
            names: set[str] = set()
            for value in requirement.values:
                names.update(self._by_label.get((requirement.key, value), ()))
            if best is None or len(names) < len(best):
                best = names
        return self._pods.keys() if best is None else best

    def _index_key(self, key: str) -> None:
        self._indexed.add(key)
        for name, (labels, _, _) in self._pods.items():
            value = labels.get(key)
            if value is not None:
                self._add((key, value), name)
