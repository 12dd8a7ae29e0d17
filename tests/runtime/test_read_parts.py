"""A pass's targets in parts for its metric reads (``observe.read_parts``): every target in
exactly one part, a namespace never in two, parts of about equal pods."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import Pod
from autoscaler.runtime.observe import Observed, read_parts
from autoscaler.runtime.pause import Pause
from tests.runtime.doubles import FixedScale, targets


def observed(namespace: str, name: str, pods: int, *, paused: bool = False) -> Observed:
    [target] = targets(name, namespace=namespace)
    return Observed(target=target, scale=FixedScale(),
                    pods=tuple(Pod(name=f"{name}-{i}") for i in range(pods)),
                    pause=Pause(replicas=None, source="config") if paused else None)


def keys(parts: list) -> list[list[str]]:
    return [[one.target.key for one in part] for part in parts]


def namespaces_of(parts: list) -> list[set[str]]:
    return [{one.target.namespace for one in part} for part in parts]


def test_a_pass_within_the_bound_or_without_one_is_one_part() -> None:
    pass_ = [observed("a", "x", 5), observed("b", "y", 5)]
    assert read_parts(pass_, None) == [pass_]
    assert read_parts(pass_, 10) == [pass_]
    assert read_parts([], 10) == [[]]


@pytest.mark.parametrize(("namespaces", "bound", "parts"), [
    (10, 30, 2),  # 50 pods over a bound of 30: two parts of 25
    (10, 10, 5),
    (9, 20, 3),   # 45 pods: three of 15
])
def test_parts_are_of_about_equal_pods_and_as_few_as_the_bound_allows(
        namespaces: int, bound: int, parts: int) -> None:
    pass_ = [observed(f"ns-{n}", f"t{n}-{i}", 1) for i in range(5) for n in range(namespaces)]
    made = read_parts(pass_, bound)
    assert len(made) == parts
    sizes = [sum(len(one.pods) for one in part) for part in made]
    assert max(sizes) - min(sizes) <= 5  # one namespace's pods at most
    assert max(sizes) <= bound
    assert sorted(k for part in keys(made) for k in part) == sorted(keys([pass_])[0])


def test_a_namespace_is_never_in_two_parts() -> None:
    """A part's query is cut to its namespaces: a namespace in two parts is read twice."""
    pass_ = [observed(f"ns-{i % 7}", f"t{i}", 3) for i in range(70)]
    made = read_parts(pass_, 50)
    seen = namespaces_of(made)
    assert sum(len(names) for names in seen) == 7
    assert len(made) == 5  # 210 pods over 50: 5 parts


def test_a_namespace_above_the_bound_is_read_whole() -> None:
    big = [observed("big", f"b{i}", 10) for i in range(10)]
    small = [observed("small", "s", 5)]
    assert namespaces_of(read_parts(big + small, 30)) == [{"big"}, {"small"}]
    # Below its share of the pods, a part takes the next namespace whatever its size.
    assert namespaces_of(read_parts(small + big, 30)) == [{"small", "big"}]


def test_paused_targets_count_no_pods() -> None:
    """A paused target reads no metrics: a pass of them is one part, however many pods."""
    pass_ = [observed(f"ns-{i}", f"t{i}", 10, paused=True) for i in range(10)]
    assert read_parts(pass_, 5) == [pass_]


def test_each_target_keeps_its_place_within_its_namespace() -> None:
    pass_ = [observed(f"ns-{i % 2}", f"t{i}", 10) for i in range(6)]
    made = read_parts(pass_, 30)
    assert keys(made) == [["ns-0/Deployment/t0", "ns-0/Deployment/t2", "ns-0/Deployment/t4"],
                          ["ns-1/Deployment/t1", "ns-1/Deployment/t3", "ns-1/Deployment/t5"]]


