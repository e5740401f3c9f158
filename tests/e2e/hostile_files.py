"""Hostile input files for the CLI tests: nodes, specs and queues that once crashed, hung or lied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import yaml

from tests.helpers import EXAMPLES

NODES = EXAMPLES / "cluster" / "nodes.json"


def nodes_file(tmp_path: Path, name: str, change: Callable[[dict[str, Any]], None]) -> str:
    """The example node list with its first node changed by `change`."""
    document = json.loads(NODES.read_text())
    change(document["items"][0])
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def text_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def queues_file(tmp_path: Path, name: str, queues: list[dict[str, Any]]) -> str:
    docs = []
    for queue in queues:
        spec: dict[str, Any] = {"resources": {"gpu": {"quota": queue.get("quota", 0), "limit": -1, "overQuotaWeight": queue.get("weight", 1)}}}
        if queue.get("parent"):
            spec["parentQueue"] = queue["parent"]
        docs.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": queue["name"]}, "spec": spec})
    return text_file(tmp_path, name, yaml.safe_dump_all(docs))


def set_allocatable(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda node: node["status"]["allocatable"].__setitem__(key, value)


def billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


def kai_pod_files(tmp_path: Path, queue_label: Any = "a", gpu_terms: Any = None, name: str = "kai.yaml") -> str:
    """A KAI Queue `a`, a PodGroup `pg` in it and a pending pod `p` of the group labelled with `queue_label`, for
    `explain p -f FILE -f NODES`; `gpu_terms` replaces the Queue's gpu quota, limit and overQuotaWeight."""
    terms = gpu_terms if gpu_terms is not None else {"quota": 1, "limit": -1, "overQuotaWeight": 1}
    documents = [
        {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "a"}, "spec": {"resources": {"gpu": terms}}},
        {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "default"},
         "spec": {"queue": "a", "minMember": 1}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "p", "namespace": "default", "labels": {"kai.scheduler/queue": queue_label}, "annotations": {"pod-group-name": "pg"}},
         "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
         "status": {"phase": "Pending"}},
    ]
    return text_file(tmp_path, name, yaml.safe_dump_all(documents))


def many_nodes_file(tmp_path: Path, name: str, min_chars: int) -> str:
    """The example node list repeated under new names until it is longer than `min_chars`, as YAML (block style,
    as `kubectl get -o yaml` prints it) or as JSON, by `name`'s extension."""
    items = json.loads(NODES.read_text())["items"]
    one = len(yaml.safe_dump(items[0]))
    copies = []
    for i in range(min_chars // one + 1):
        node = json.loads(json.dumps(items[i % len(items)]))
        node["metadata"]["name"] = f"node-{i}"
        copies.append(node)
    document = {"apiVersion": "v1", "kind": "List", "items": copies}
    text = json.dumps(document) if name.endswith(".json") else yaml.safe_dump(document)
    assert len(text) > min_chars
    return text_file(tmp_path, name, text)
