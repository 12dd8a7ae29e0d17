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


@given(pods=st.lists(labelsets, max_size=12), changes=st.lists(labelsets, max_size=4),
       selector=selectors)
def test_index_equals_scan(pods: list[dict[str, str]], changes: list[dict[str, str]],
                           selector: str) -> None:
    """After a LIST and relabelling updates, select() equals a brute-force scan."""
    index = PodIndex()
    current = {f"p{i}": labels for i, labels in enumerate(pods)}
    index.replace((name, (labels, Pod(name=name))) for name, labels in current.items())
    parsed = parse_selector(selector)
    index.select(parsed)  # fill the memo, which the changes must invalidate
    for i, labels in enumerate(changes):
        name = f"p{i}"
        if i % 2 and name in current:
            del current[name]
            index.delete(name)
        else:
            current[name] = labels
            index.upsert(name, (labels, Pod(name=name)))
    expected = sorted(name for name, labels in current.items() if parsed.matches(labels))
    assert [pod.name for pod in index.select(parsed)] == expected
