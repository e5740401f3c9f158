"""core/documents.py: JSON and YAML read with bounds, each refusal naming the file and what is wrong."""

from __future__ import annotations

import pytest

from raybridge.core.documents import MAX_DEPTH, load_json_or_yaml, load_yaml, load_yaml_documents
from raybridge.errors import BadInput

# (case, text, what comes back)
READ = [
    ("an alias used twice is two values", "a: &x {b: 1}\nc: *x", {"a": {"b": 1}, "c": {"b": 1}}),
    ("nesting at the bound", "[" * MAX_DEPTH + "]" * MAX_DEPTH, eval("[" * MAX_DEPTH + "]" * MAX_DEPTH)),
    ("an empty text", "", None),
    ("an integer of 4,300 digits", "x: " + "9" * 4300, {"x": int("9" * 4300)}),
]

# (case, text, a fragment of the refusal)
REFUSED = [
    ("an alias inside itself", "a: &a [*a]", "refers to a node containing it"),
    ("nesting one past the bound", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested more than"),
    ("an integer of 4,301 digits", "x: " + "9" * 4301, "4300 digits"),
    ("NaN in JSON", '{"a": NaN}', "not finite"),
    ("infinity in YAML", "a: .inf", "not finite"),
    ("1e400 in JSON", '{"a": 1e400}', "not finite"),
    ("aliases expanding past a million values", "a: &a [" + ",".join(["0"] * 1000) + "]\nb: &b [" + ",".join(["*a"] * 1001) + "]", "add more than 1,000,000 values"),
    ("not YAML at all", "a: [", "neither JSON nor YAML"),
]


@pytest.mark.parametrize("case, text, expected", READ, ids=[r[0] for r in READ])
def test_read_within_the_bounds(case: str, text: str, expected: object) -> None:
    assert load_json_or_yaml(text, "f") == expected, case


@pytest.mark.parametrize("case, text, fragment", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_beyond_them(case: str, text: str, fragment: str) -> None:
    with pytest.raises(BadInput, match=fragment) as refused:
        load_json_or_yaml(text, "--nodes file 'n.yaml'")
    assert refused.value.problems[0].startswith("--nodes file 'n.yaml' "), case


def test_every_document_is_bounded_and_one_is_asked_for_where_one_is_meant() -> None:
    assert load_yaml_documents("a: 1\n---\nb: 2\n", "f") == [{"a": 1}, {"b": 2}]
    with pytest.raises(BadInput, match="2 YAML documents"):
        load_yaml("a: 1\n---\nb: 2\n", "f")


def test_a_document_without_aliases_is_bounded_by_its_size_alone() -> None:
    # `kubectl get pods -A -o json` of a few thousand pods holds millions of values; none is added by an alias
    pod = {"metadata": {"name": "p", "labels": {f"k{i}": "v" for i in range(40)}}, "spec": {"containers": [{"name": "c"}]}}
    text = '{"items": [' + ",".join([__import__("json").dumps(pod)] * 30_000) + "]}"
    assert len(load_json_or_yaml(text, "pods file")["items"]) == 30_000


def test_an_alias_that_adds_values_is_counted_whatever_the_document_holds_besides() -> None:
    written = "w: [" + ",".join(["0"] * 2_000) + "]\n"
    added = "a: &a [" + ",".join(["0"] * 1000) + "]\nb: [" + ",".join(["*a"] * 1001) + "]\n"
    with pytest.raises(BadInput, match="add more than 1,000,000 values"):
        load_yaml(written + added, "spec")
