"""Reading manifests: plain JSON-like data from YAML, and Kubernetes' name rules."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.importers.manifests import (
    InputError,
    dns_label_problem,
    dns_subdomain_problem,
    path_segment_problem,
    read_manifests,
)

READ = [
    # (id, YAML text, the documents it holds)
    ("multi-document", "a: 1\n---\nb: [x, 2.5, true, null]\n---\n",
     [{"a": 1}, {"b": ["x", 2.5, True, None]}, None]),
    ("date-stays-text", "created: 2024-01-01\nat: 2024-01-01T10:00:00Z\n",
     [{"created": "2024-01-01", "at": "2024-01-01T10:00:00Z"}]),
    ("keys-are-text", "{1: a, true: b, null: c}\n", [{"1": "a", "true": "b", "null": "c"}]),
    ("merge-key-is-a-key", "<<: {a: 1}\n", [{"<<": {"a": 1}}]),
    ("anchor-without-alias", "a: &x 1\n", [{"a": 1}]),
    ("explicit-json-tags", "a: !!str 5\nb: !!int '7'\nc: !!map {}\n", [{"a": "5", "b": 7, "c": {}}]),
    ("utf-8-bom", "\ufeffa: 1\n", [{"a": 1}]),
    ("json", '{"items": [{"a": "x\\/y"}]}', [{"items": [{"a": "x/y"}]}]),
    ("yaml-1.1-numbers", "a: 0x1F\nb: 1_000\nc: .inf\n", [{"a": 31, "b": 1000, "c": float("inf")}]),
]


@pytest.mark.parametrize(("text", "documents"), [c[1:] for c in READ], ids=[c[0] for c in READ])
def test_reads_plain_data(tmp_path: Path, text: str, documents: list[Any]) -> None:
    """Documents come back as what JSON holds, the way kubectl reads them."""
    path = tmp_path / "in.yaml"
    path.write_text(text, encoding="utf-8")
    assert [d.value for d in read_manifests(str(path))] == documents


@settings(max_examples=100, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3), max_leaves=10))
def test_reads_what_pyyaml_wrote(value: Any) -> None:
    """Whatever PyYAML writes from JSON-like data (escaped) reads back the same."""
    text = yaml.safe_dump(value)
    documents = _read_text(text)
    assert [d.value for d in documents] == [value]


def _read_text(text: str) -> Any:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", encoding="utf-8") as stream:
        stream.write(text)
        stream.flush()
        return read_manifests(stream.name)


def test_field_line_in_a_later_document(tmp_path: Path) -> None:
    """An error points at the field's own line, counted from the top of the file."""
    path = tmp_path / "in.yaml"
    path.write_text("a: 1\n---\nspec:\n  metrics:\n  - x\n  - {type: [1]}\n")
    document = read_manifests(str(path))[1]
    error = document.error(("spec", "metrics", 1, "type"), "must be a string")
    assert str(error) == f"{path}:6: document 2, spec.metrics[1].type: must be a string"


NAMES = [
    # (id, rule, name, problem fragment or None)
    ("label-ok", dns_label_problem, "kube-system", None),
    ("label-upper", dns_label_problem, "Shop", "must be a lowercase RFC 1123 label"),
    ("label-dot", dns_label_problem, "a.b", "must be a lowercase RFC 1123 label"),
    ("label-64", dns_label_problem, "a" * 64, "no more than 63 characters"),
    ("subdomain-ok", dns_subdomain_problem, "web.v2-0", None),
    ("subdomain-empty-label", dns_subdomain_problem, "a..b", "lowercase RFC 1123 subdomain"),
    ("subdomain-dash-dot", dns_subdomain_problem, "a-.b", "lowercase RFC 1123 subdomain"),
    ("subdomain-254", dns_subdomain_problem, "a" * 254, "no more than 253 characters"),
    ("subdomain-newline", dns_subdomain_problem, "web\n", "got \"web\\n\""),
    ("segment-ok", path_segment_problem, "Any thing\n", None),
    ("segment-dot-dot", path_segment_problem, "..", "may not be '..'"),
    ("segment-slash-percent", path_segment_problem, "a/%", "may not contain '/' or '%'"),
    ("segment-empty", path_segment_problem, "", "must not be empty"),
]


@pytest.mark.parametrize(("rule", "name", "problem"), [c[1:] for c in NAMES],
                         ids=[c[0] for c in NAMES])
def test_name_rules(rule: Any, name: str, problem: str | None) -> None:
    """Names are checked as the API server checks them, with its wording."""
    found = rule(name)
    assert found is None if problem is None else problem in found


def test_read_error_is_an_input_error(tmp_path: Path) -> None:
    """A file that cannot be read is an InputError naming it, never an OSError."""
    with pytest.raises(InputError, match=r"nothing\.yaml: No such file or directory"):
        read_manifests(str(tmp_path / "nothing.yaml"))


def test_reads_a_pipe_to_its_end() -> None:
    """A pipe (as `<(kubectl get hpa -o yaml)` gives, /dev/fd/N) is read to its end."""
    read_end, write_end = os.pipe()
    text = "a: 1\n---\nb: x\n" + "# padding\n" * 20_000  # more than a pipe buffer holds
    writer = threading.Thread(target=lambda: (os.write(write_end, text.encode()),
                                              os.close(write_end)), daemon=True)
    writer.start()
    try:
        documents = read_manifests(f"/dev/fd/{read_end}")
    finally:
        writer.join(timeout=10)
        os.close(read_end)
    assert [d.value for d in documents] == [{"a": 1}, {"b": "x"}]
