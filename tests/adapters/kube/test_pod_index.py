"""The label index answers every selector exactly as a full scan would."""

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.adapters.kube.labels import parse_selector
from autoscaler.adapters.kube.pod_index import PodIndex
from autoscaler.algorithm import Pod

KEYS, VALUES = ["app", "tier", "track"], ["a", "b", "c"]
labelsets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
requirement = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), st.sampled_from(VALUES)),
    st.builds(lambda k, v: f"{k}!={v}", st.sampled_from(KEYS), st.sampled_from(VALUES)),
    st.builds(lambda k, vs: f"{k} in ({','.join(vs)})", st.sampled_from(KEYS),
              st.lists(st.sampled_from(VALUES), min_size=1, max_size=2)),
    st.builds(lambda k: f"!{k}", st.sampled_from(KEYS)),
    st.sampled_from(KEYS),
)
selectors = st.lists(requirement, max_size=3).map(",".join)


@given(pods=st.lists(labelsets, max_size=60), changes=st.lists(labelsets, max_size=30),
       selector=selectors)
def test_index_equals_scan(pods: list[dict[str, str]], changes: list[dict[str, str]],
                           selector: str) -> None:
    """After a LIST and relabelling updates, select() equals a brute-force scan (up to 60
    pods: a label value's names are kept in a tuple up to 16 pods, in a set beyond)."""
    index = PodIndex()
    current = {f"p{i}": labels for i, labels in enumerate(pods)}
    index.replace((name, (labels, Pod(name=name), None)) for name, labels in current.items())
    parsed = parse_selector(selector)
    index.select(parsed)  # fill the memo, which the changes must invalidate
    for i, labels in enumerate(changes):
        name = f"p{i}"
        if i % 2 and name in current:
            del current[name]
            index.delete(name)
        else:
            current[name] = labels
            index.upsert(name, (labels, Pod(name=name), None))
    expected = sorted(name for name, labels in current.items() if parsed.matches(labels))
    assert [pod.name for pod in index.select(parsed)] == expected


def test_a_label_value_of_many_pods_grows_and_shrinks() -> None:
    """Past 16 pods a label value's names move from a tuple to a set, and back at 8;
    deleting and relabelling pods on either side leaves select() exact."""
    index = PodIndex()
    web = parse_selector("app=web")
    index.select(web)  # indexes "app"
    for i in range(20):
        index.upsert(f"p{i:02d}", ({"app": "web"}, Pod(name=f"p{i:02d}"), None))
    assert len(index.select(web)) == 20
    for i in range(0, 20, 2):
        index.delete(f"p{i:02d}")
    index.upsert("p01", ({"app": "db"}, Pod(name="p01"), None))
    assert [pod.name for pod in index.select(web)] == [f"p{i:02d}" for i in range(3, 20, 2)]
    index.delete("p03")  # 8 left: a tuple again (memory), and select() still exact
    assert isinstance(index._by_label[("app", "web")], tuple)
    assert [pod.name for pod in index.select(web)] == [f"p{i:02d}" for i in range(5, 20, 2)]
    for i in range(5, 20, 2):
        index.delete(f"p{i:02d}")
    assert index.select(web) == []
    assert [pod.name for pod in index.select(parse_selector("app=db"))] == ["p01"]
