"""core/node_index.py answers exactly as `placement.admits` does, node by node, and reads each value once.

Why: the adjuster now asks the index, not `admits`, which nodes a constraint group may use (and, for the plan's
notes, which free nodes). An index that differed for some operator, an absent label, an empty term, a label value
that is not text or a taint it reads otherwise would change which nodes a group has, so its node size, its GPU
memory and every placeholder. Hypothesis draws nodes (labels from a small vocabulary, values of odd types, taints)
and constraints (every operator and some that are not, matchFields, empty terms, tolerations of every shape) and
compares the two; the step count shows the point of it: one evaluation per distinct value, not per node.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raybridge.core import node_index
from raybridge.core.node_index import NodeIndex, bits_of, positions_of
from raybridge.core.placement import admits

KEYS = ("pool", "zone", "team", "nvidia.com/gpu.memory", "kubernetes.io/hostname")
VALUES = ("a", "b", "c", "", "100", "81559", "-3", "x1")
label_values = st.one_of(st.sampled_from(VALUES), st.integers(-5, 200), st.none(), st.lists(st.sampled_from(VALUES), max_size=2),
                         st.booleans())
taints = st.fixed_dictionaries({"key": st.sampled_from(("dedicated", "spot", "nvidia.com/gpu", "")),
                                "effect": st.sampled_from(("NoSchedule", "NoExecute", "PreferNoSchedule", ""))},
                               optional={"value": st.sampled_from(("a", "b", "true", ""))})
nodes = st.lists(st.tuples(st.dictionaries(st.sampled_from(KEYS), label_values, max_size=4), st.lists(taints, max_size=3)),
                 min_size=0, max_size=12)
operators = st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"))
expression = st.fixed_dictionaries({"key": st.sampled_from(KEYS), "operator": operators},
                                   optional={"values": st.lists(st.sampled_from(VALUES), max_size=3)})
field = st.fixed_dictionaries({"key": st.sampled_from(("metadata.name", "metadata.uid")), "operator": operators},
                              optional={"values": st.lists(st.sampled_from(("n0", "n1", "n3", "5")), max_size=2)})
term = st.fixed_dictionaries({}, optional={"matchExpressions": st.lists(expression, max_size=3), "matchFields": st.lists(field, max_size=1)})
toleration = st.fixed_dictionaries({}, optional={"key": st.sampled_from(("dedicated", "spot", "nvidia.com/gpu", "")),
                                                 "operator": st.sampled_from(("Exists", "Equal", "")),
                                                 "value": st.sampled_from(("a", "b", "true", "")),
                                                 "effect": st.sampled_from(("NoSchedule", "NoExecute", ""))})
constraints = st.tuples(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2), st.lists(term, max_size=3),
                        st.lists(toleration, max_size=3))


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes, asked=st.lists(constraints, min_size=1, max_size=4), among=st.integers(min_value=0))
def test_the_index_admits_the_nodes_admits_admits(nodes: list[tuple[dict[str, Any], list[dict[str, Any]]]],
                                                   asked: list[tuple[dict[str, str], list[dict[str, Any]], list[dict[str, Any]]]],
                                                   among: int) -> None:
    names = [f"n{i}" for i in range(len(nodes))]
    index = NodeIndex([labels for labels, _ in nodes], names, [node_taints for _, node_taints in nodes])
    among &= index.all
    for selector, terms, tolerations in asked * 2:  # asked twice: the remembered answers are the same answers
        key = repr(tolerations)
        expected = bits_of(i for i, (labels, node_taints) in enumerate(nodes) if admits(selector, terms, tolerations, labels, names[i], node_taints))
        assert index.admitting(selector, terms, tolerations, key) == expected
        assert index.admitting(selector, terms, tolerations, key, among=among) == expected & among


def test_bits_and_positions_are_inverse() -> None:
    assert list(positions_of(bits_of([0, 3, 64, 200]))) == [0, 3, 64, 200]
    assert bits_of([]) == 0 and list(positions_of(0)) == []


def test_an_expression_is_decided_once_per_distinct_value_not_per_node(monkeypatch: Any) -> None:
    """2,000 nodes in 4 pools and 3 zones: a term on both is 7 evaluations, not 4,000."""
    calls = []
    real = node_index.expression_matches
    monkeypatch.setattr(node_index, "expression_matches", lambda *a: calls.append(a) or real(*a))
    labels = [{"pool": f"p{i % 4}", "zone": f"z{i % 3}", "kubernetes.io/hostname": f"n{i}"} for i in range(2000)]
    index = NodeIndex(labels, [f"n{i}" for i in range(2000)], [[] for _ in labels])
    terms = [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["p1"]}, {"key": "zone", "operator": "NotIn", "values": ["z0"]}]}]
    found = index.admitting({}, terms, [])
    assert found == bits_of(i for i in range(2000) if i % 4 == 1 and i % 3 != 0)
    assert len(calls) == 4 + 3
