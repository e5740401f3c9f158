"""core/documents.py: JSON and YAML read with bounds, each refusal naming the file and what is wrong."""

from __future__ import annotations

import pytest

import json
import tracemalloc
from typing import Callable

import yaml

from raybridge.core import documents
from raybridge.core.documents import MAX_DEPTH, MAX_YAML_CHARS, YAML_COST_PER_CHAR, load_json_or_yaml, load_yaml, load_yaml_documents
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
    ("nesting past libyaml's own bound", "x: " + "[" * 5000 + "]" * 5000, "nested more than"),
    ("YAML longer than it may be", "a: b\n" * (MAX_YAML_CHARS // 5 + 1), "larger than 4 MiB, more than raybridge reads as YAML"),
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


def test_a_json_text_longer_than_yaml_may_be_is_read_as_json_where_yaml_documents_are_read() -> None:
    """`explain -f` and `--queues` read YAML streams; `kubectl get -o json` of a large cluster is one JSON document."""
    text = json.dumps({"items": [{"metadata": {"name": f"pod-{i}"}} for i in range(MAX_YAML_CHARS // 30)]})
    assert len(text) > MAX_YAML_CHARS
    assert len(load_yaml_documents(text, "f")[0]["items"]) == MAX_YAML_CHARS // 30
    assert len(load_json_or_yaml(text, "f")["items"]) == MAX_YAML_CHARS // 30


needs_libyaml = pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False), reason="PyYAML without libyaml")


@needs_libyaml
def test_yaml_is_parsed_by_libyaml_where_pyyaml_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    class Counted(yaml.CSafeLoader):  # type: ignore[misc,name-defined]
        def __init__(self, stream: str) -> None:
            made.append(stream)
            super().__init__(stream)

    monkeypatch.setattr(yaml, "CSafeLoader", Counted)
    monkeypatch.setattr(documents, "_yaml_loader", None)
    assert load_yaml("a: [1, 2]\nb: &x {c: 1}\nd: *x\n", "f") == {"a": [1, 2], "b": {"c": 1}, "d": {"c": 1}}
    assert documents.yaml_loader() is Counted and "a: [1, 2]\nb: &x {c: 1}\nd: *x\n" in made


@pytest.mark.slow
@needs_libyaml
def test_a_libyaml_that_does_not_bound_nesting_itself_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its C composer would recurse once per level of nesting: a text of brackets could overflow the stack."""

    class Unbounded(yaml.CSafeLoader):  # type: ignore[misc,name-defined]
        def get_single_node(self) -> None:
            return None  # takes the probe's 1,001 levels

    monkeypatch.setattr(yaml, "CSafeLoader", Unbounded)
    monkeypatch.setattr(documents, "_yaml_loader", None)
    assert documents.yaml_loader() is yaml.SafeLoader
    with pytest.raises(BadInput, match="nested more than"):
        load_yaml("x: " + "[" * 5000 + "]" * 5000, "f")


#: The costliest YAML shapes known, per character: many nodes, and marks, for few characters. Each is made when its
#: test runs (dumping the pod list took 0.6 CPU-s at every collection of this module, in every worker).
COSTLY_YAML: dict[str, Callable[[], str]] = {
    "a flow mapping of one-character keys": lambda: "{" + "a," * 20_000 + "a}",
    "a flow list of one-key mappings": lambda: "[" + "{a}," * 20_000 + "{a}]",
    "a block list of nested lists": lambda: "- - - - - - - -\n" * 5_000,
    "a flow list of nulls": lambda: "[" + "~," * 20_000 + "~]",
    "a block list of empty values": lambda: "-\n" * 20_000,
    "a pod list as kubectl prints it": lambda: yaml.safe_dump({"items": [{"metadata": {"name": f"p{i}", "labels": {"app": "ray"}},
                                                                          "spec": {"containers": [{"name": "c", "image": "ray"}]}}
                                                                         for i in range(2_000)]}),
}  # fmt: skip


@pytest.mark.slow
@needs_libyaml
@pytest.mark.parametrize("case", list(COSTLY_YAML))
def test_yaml_costs_at_most_its_bound_in_memory_per_character(case: str) -> None:
    """Counted, not timed: the peak of what Python allocates while the text is read, over its length. The pure-Python
    loader took up to 800 bytes a character (and three to eight times the time); a text of MAX_YAML_CHARS thus
    costs at most MAX_YAML_CHARS * YAML_COST_PER_CHAR (1.6 GiB)."""
    text = COSTLY_YAML[case]()
    load_yaml_documents(text, "f")  # the loader's probe and imports, outside the count
    tracemalloc.start()
    try:
        load_yaml_documents(text, "f")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / len(text) <= YAML_COST_PER_CHAR, (case, peak / len(text))
