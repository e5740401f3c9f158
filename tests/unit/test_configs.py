"""The shipped configs/ must validate against the real CRD schemas (and core objects against Kubernetes'; the CEL rules and
Kueue's webhooks on the real releases: tests/e2e/test_release_matrix.py),
follow the resource-group rule of `raybridge.queues.decision.configs`, and, in Kueue's flavor assignment as
kubesim/sim_kueue.py computes it, land each vendor's GPU pods on that vendor's nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from raybridge.queues.decision.configs import resource_group_problems
from kubesim.controllers import assign_flavors, ray_podsets
from tests.builders import gpu_node, h100_node, rayjob_manifest
from testcluster.crd_schemas import is_crd_kind, schema_errors
from tests.unit.k8s_schemas import k8s_schema_errors, versions_for

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
CONFIGS = sorted(CONFIG_DIR.rglob("*.yaml"))
DOCS = [(f"{p.parent.name}/{p.name}#{i}", doc) for p in CONFIGS for i, doc in enumerate(yaml.safe_load_all(p.read_text())) if doc]


def test_there_are_configs():
    assert len(DOCS) >= 5


@pytest.mark.parametrize("where,doc", DOCS, ids=[d[0] for d in DOCS])
def test_config_validates(where, doc):
    if is_crd_kind(doc.get("apiVersion", ""), doc.get("kind", "")):
        assert schema_errors(doc) == []
    else:
        # Built-in kinds (Namespaces; the adjuster's RBAC, Deployment, Service, PriorityClass, admission policies).
        for version in versions_for(doc):
            assert k8s_schema_errors(doc, version) == [], version


# The CEL rules of the CRDs (`x-kubernetes-validations`) and Kueue's webhooks are judged by the real API server and
# Kueue of each served release: tests/e2e/test_release_matrix.py, test_the_shipped_kueue_config_passes_the_release_s_...


# --- Kueue: one flavor per pod set and resource group ------------------------------------------

CLUSTER_QUEUES = [(where, doc) for where, doc in DOCS if doc.get("kind") == "ClusterQueue"]


def test_there_are_cluster_queues():
    assert {where.split("#")[0] for where, _ in CLUSTER_QUEUES} >= {"kueue/gpu-queues.yaml", "kueue/example-cluster.yaml"}


@pytest.mark.parametrize("where,cluster_queue", CLUSTER_QUEUES, ids=[c[0] for c in CLUSTER_QUEUES])
def test_every_gpu_resource_group_covers_cpu_and_memory(where, cluster_queue):
    assert resource_group_problems(cluster_queue) == []


def cluster_queue(*groups: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"coveredResources": g} for g in groups]}}


# (case, ClusterQueue, problems the rule reports)
RULE_ROWS = [
    ("one group for everything", cluster_queue(["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"]), []),
    ("no GPUs at all", cluster_queue(["cpu", "memory"]), []),
    ("a group of extra non-GPU resources", cluster_queue(["cpu", "memory", "nvidia.com/gpu"], ["ephemeral-storage"]), []),
    ("AMD GPUs alone in a second group", cluster_queue(["cpu", "memory", "nvidia.com/gpu"], ["amd.com/gpu"]),
     ["ClusterQueue cq resourceGroups[1] covers amd.com/gpu but not cpu or memory: "
      "Kueue would take a GPU pod set's cpu and memory from another group's flavor"]),
    ("memory left out of the GPU group", cluster_queue(["cpu", "nvidia.com/gpu"], ["memory"]),
     ["ClusterQueue cq resourceGroups[0] covers nvidia.com/gpu but not memory: "
      "Kueue would take a GPU pod set's cpu and memory from another group's flavor"]),
]  # fmt: skip


@pytest.mark.parametrize("case,queue,expected", RULE_ROWS, ids=[r[0] for r in RULE_ROWS])
def test_the_resource_group_rule(case, queue, expected):
    assert resource_group_problems(queue) == expected


GPU_QUEUES = [doc for where, doc in DOCS if where.startswith("kueue/gpu-queues.yaml#")]
FLAVOR_LABELS = {d["metadata"]["name"]: (d.get("spec") or {}).get("nodeLabels") or {} for d in GPU_QUEUES if d["kind"] == "ResourceFlavor"}
# The nodes gpu-queues.yaml is written for, labelled as GPU Feature Discovery and the ROCm node labeller do.
NODES = {
    "h100-0": ("nvidia", h100_node("h100-0")["metadata"]["labels"]),
    "h100-1": ("nvidia", h100_node("h100-1")["metadata"]["labels"]),
    "mi300x-0": ("amd", gpu_node("mi300x-0", 8, "amd", product="AMD_Instinct_MI300X_OAM", memory_mib=196608)["metadata"]["labels"]),
}


def matching_nodes(node_selector: dict[str, str]) -> set[str]:
    return {name for name, (_, labels) in NODES.items() if all(labels.get(k) == v for k, v in node_selector.items())}


# (vendor, its GPU key): a RayJob with two 8-GPU workers of that vendor, admitted under gpu-queues.yaml
VENDOR_ROWS = [("amd", "amd.com/gpu"), ("nvidia", "nvidia.com/gpu")]


@pytest.mark.parametrize("vendor,gpu_key", VENDOR_ROWS, ids=[r[0] for r in VENDOR_ROWS])
def test_gpu_queues_yaml_puts_each_vendor_s_workers_on_that_vendor_s_nodes(vendor, gpu_key):
    [queue] = [d for d in GPU_QUEUES if d["kind"] == "ClusterQueue"]
    job = rayjob_manifest("train", namespace="team-a", queue="team-a", workers=2, gpus_per_worker=8, vendor_key=gpu_key)
    fit = assign_flavors(queue, ray_podsets("RayJob", job), {}, FLAVOR_LABELS)
    assert fit.fits, fit.message
    for assignment in fit.pod_set_assignments:
        # Kueue injects the nodeLabels of every flavor the pod set got into its nodeSelector.
        selector: dict[str, str] = {}
        for flavor in sorted(set(assignment["flavors"].values())):
            selector.update(FLAVOR_LABELS[flavor])
        nodes = matching_nodes(selector)
        assert nodes, f"pod set {assignment['name']} got {assignment['flavors']}: no node has {selector}"
        if gpu_key in assignment["flavors"]:
            assert {NODES[n][0] for n in nodes} == {vendor}, (assignment, nodes)
