"""A large shared GPU cluster, generated from a seed: pending pods whose constraints fall into `groups` distinct sets.

`benchmarks/adjuster_plan_speed.py` has 3 constraint groups: every pod of a pool asks for it by one node selector.
A cluster many teams share is not like that. Its pods carry node selectors (a pool, a GPU product, a zone, a team's
dedicated nodes, on-demand capacity), tolerations (a team's taint, spot, the GPU taint, and tolerations copied from
templates that match no taint at all), required node affinities (zones, instance types left out, a GPU memory
floor), an explicit vendor now and then and, for a few services, a required anti-affinity by hostname; and a
handful of pools the cluster has scaled to zero. Each distinct combination is a constraint group of the
node-scale-adjuster. This module makes such a cluster with exactly `groups` distinct combinations, for the speed
benchmark (`benchmarks/adjuster_group_curve.py`) and for the test that the decisions stay the same
(`tests/unit/test_adjuster_shared_cluster_decisions.py`).

The nodes: pools of ten GPU types (NVIDIA H200, H100, A100 80 and 40 GB, L40S, L4, A10G, T4; AMD MI300X and MI250X),
in three zones, a quarter of them dedicated to a team (label and `NoSchedule` taint), a fifth spot (taint), the
smaller GPU pools tainted `nvidia.com/gpu`; most nodes are busy (a running pod holds all their GPUs, or some).
A combination is drawn from a node that exists (its pool, zone, team; the tolerations its taints need), so it admits
that node at least, except for the pools scaled to zero. The pods spread over the combinations the way a shared
cluster's do: a few combinations hold most pods, most hold a few (weights 1/rank), every combination at least one.
The pods are GPU-sharing pods of KAI's scheduler, pending (Unschedulable), one in twenty still inside the grace
period and one in fifty blocked by its queue's quota: fractions, gpu-memory, multi-device pods.

`kubectl=True` dresses the objects as `kubectl get -o json` prints them (adjuster_plan_speed.py's `kubectl_pod`
and `kubectl_node`: KubeRay's worker pods, NFD- and GPU-operator-labelled nodes).

    python benchmarks/adjuster_shared_cluster.py --groups 1239 --out DIR [--pods 10000] [--nodes 2000] [--seed 1] [--lean]

writes DIR/pods.json and DIR/nodes.json (kubectl's 4-space indent).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from adjuster_plan_speed import kubectl_node, kubectl_pod  # noqa: E402

NOW = "2025-06-01T12:00:00Z"

#: (pool, vendor, GPUs per node, GPU memory label, product label, share of the nodes, tainted nvidia.com/gpu)
POOLS = (
    ("h200", "nvidia", 8, "143771", "NVIDIA-H200", 3, False),
    ("h100", "nvidia", 8, "81559", "NVIDIA-H100-80GB-HBM3", 6, False),
    ("a100-80", "nvidia", 8, "81920", "NVIDIA-A100-SXM4-80GB", 5, False),
    ("a100-40", "nvidia", 8, "40960", "NVIDIA-A100-SXM4-40GB", 4, False),
    ("l40s", "nvidia", 4, "46068", "NVIDIA-L40S", 3, True),
    ("l4", "nvidia", 4, "23034", "NVIDIA-L4", 3, True),
    ("a10g", "nvidia", 4, "23028", "NVIDIA-A10G", 2, True),
    ("t4", "nvidia", 4, "15360", "Tesla-T4", 2, True),
    ("mi300x", "amd", 8, "192G", "AMD_Instinct_MI300X_OAM", 2, False),
    ("mi250x", "amd", 8, "128G", "AMD_Instinct_MI250X", 1, False),
)
#: Pools a team asks for that the cluster has scaled to zero (no node of them exists).
EMPTY_POOLS = ("h100-reserved", "b200", "gh200")
ZONES = ("zone-a", "zone-b", "zone-c")
TEAMS = tuple(f"team-{i:02d}" for i in range(24))
#: Tolerations that templates carry and no node's taint needs (a shared cluster's pods are full of them).
SPARE_TOLERATIONS = (
    {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "example.com/preemptible", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {"key": "example.com/gpu-burn-in", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
)
FRACTIONS = ("0.1", "0.125", "0.2", "0.25", "0.3", "0.33", "0.5", "0.6", "0.75")
MEMORIES = (2000, 4096, 10240, 20000, 40000)
ZONE_KEY = "topology.kubernetes.io/zone"
TYPE_KEY = "node.kubernetes.io/instance-type"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
SPOT_TAINT = {"key": "example.com/spot", "value": "true", "effect": "NoSchedule"}


def _stamp(seconds_before_now: float) -> str:
    base = time.mktime(time.strptime(NOW, "%Y-%m-%dT%H:%M:%SZ"))
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base - seconds_before_now))


def make_nodes(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """`count` GPU nodes in the pools, by their shares: labels, taints, allocatable."""
    weights = [p[5] for p in POOLS]
    nodes = []
    for i in range(count):
        pool, vendor, gpus, memory, product, _, gpu_taint = rng.choices(POOLS, weights)[0]
        key = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}[vendor]
        name = f"{pool}-{i}"
        zone = rng.choice(ZONES)
        labels = {"pool": pool, "kubernetes.io/hostname": name, ZONE_KEY: zone, TYPE_KEY: f"gpu-{pool}-{gpus}x",
                  "example.com/capacity-type": "on-demand"}  # fmt: skip
        labels["amd.com/gpu.vram" if vendor == "amd" else "nvidia.com/gpu.memory"] = memory
        labels["amd.com/gpu.product-name" if vendor == "amd" else "nvidia.com/gpu.product"] = product
        taints = []
        if gpu_taint:
            taints.append(dict(GPU_TAINT))
        if vendor == "amd":
            taints.append({"key": "amd.com/gpu", "effect": "NoSchedule"})
        if rng.random() < 0.25:
            team = rng.choice(TEAMS)
            labels["example.com/team"] = team
            taints.append({"key": "example.com/dedicated", "value": team, "effect": "NoSchedule"})
        if rng.random() < 0.2:
            labels["example.com/capacity-type"] = "spot"
            taints.append(dict(SPOT_TAINT))
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": taints} if taints else {},
            "status": {
                "allocatable": {key: str(gpus), "cpu": "96", "memory": "1056745Mi", "pods": "110", "ephemeral-storage": "1Ti"},
                "capacity": {key: str(gpus), "cpu": "96", "memory": "1056745Mi", "pods": "110", "ephemeral-storage": "1Ti"},
                "conditions": [{"type": t, "status": "False" if t != "Ready" else "True", "lastTransitionTime": NOW}
                               for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
                "nodeInfo": {"kubeletVersion": "v1.31.2", "containerRuntimeVersion": "containerd://1.7.22"},
            },
        })  # fmt: skip
    return nodes


def _gpu_key(node: dict[str, Any]) -> str:
    return "amd.com/gpu" if "amd.com/gpu" in node["status"]["allocatable"] else "nvidia.com/gpu"


def _tolerating(taints: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Tolerations for `taints`, written the several ways pods write them, and now and then a spare one."""
    found = []
    for taint in taints:
        if rng.random() < 0.5:
            found.append({"key": taint["key"], "operator": "Exists", "effect": taint["effect"]})
        elif "value" in taint:
            found.append({"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]})
        else:
            found.append({"key": taint["key"], "operator": "Exists"})
    if rng.random() < 0.35:
        found.append(dict(rng.choice(SPARE_TOLERATIONS)))
    return found


def _combination(anchor: Optional[dict[str, Any]], rng: random.Random, serial: int) -> dict[str, Any]:
    """One set of constraints that admits `anchor` (None: a pool scaled to zero)."""
    combo: dict[str, Any] = {"nodeSelector": {}, "tolerations": [], "terms": [], "vendor": None, "spread": None}
    if anchor is None:
        combo["nodeSelector"]["pool"] = rng.choice(EMPTY_POOLS)
        combo["tolerations"] = _tolerating([dict(GPU_TAINT)], rng)
        if rng.random() < 0.5:
            combo["terms"] = [{"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": sorted(rng.sample(ZONES, 2))}]}]
        return combo
    labels = anchor["metadata"]["labels"]
    taints = anchor["spec"].get("taints", [])
    selector = combo["nodeSelector"]
    roll = rng.random()
    if roll < 0.45:
        selector["pool"] = labels["pool"]
    elif roll < 0.75:
        product_key = "amd.com/gpu.product-name" if "amd.com/gpu.product-name" in labels else "nvidia.com/gpu.product"
        selector[product_key] = labels[product_key]
    # else: any pool of the vendor
    if "example.com/team" in labels and rng.random() < 0.8:
        selector["example.com/team"] = labels["example.com/team"]
    if rng.random() < 0.3:
        selector[ZONE_KEY] = labels[ZONE_KEY]
    if labels["example.com/capacity-type"] == "on-demand" and rng.random() < 0.2:
        selector["example.com/capacity-type"] = "on-demand"
    expressions = []
    if ZONE_KEY not in selector and rng.random() < 0.3:
        others = [z for z in ZONES if z != labels[ZONE_KEY]]
        expressions.append({"key": ZONE_KEY, "operator": "In", "values": sorted({labels[ZONE_KEY], rng.choice(others)})})
    if rng.random() < 0.2:
        others = sorted({f"gpu-{p[0]}-{p[2]}x" for p in POOLS} - {labels[TYPE_KEY]})
        expressions.append({"key": TYPE_KEY, "operator": "NotIn", "values": sorted(rng.sample(others, rng.randint(1, 3)))})
    if "nvidia.com/gpu.memory" in labels and rng.random() < 0.15:
        below = int(labels["nvidia.com/gpu.memory"]) - rng.choice((1, 1000, 10000))
        expressions.append({"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": [str(max(below, 1))]})
    if expressions:
        combo["terms"] = [{"matchExpressions": expressions}]
    combo["tolerations"] = _tolerating([t for t in taints if t["key"] != "example.com/dedicated" or "example.com/team" in selector], rng)
    if _gpu_key(anchor) == "nvidia.com/gpu" and rng.random() < 0.1:
        combo["vendor"] = "nvidia"
    if rng.random() < 0.02:
        combo["spread"] = f"svc-{serial}"
    return combo


def _canonical(combo: dict[str, Any]) -> str:
    return json.dumps(combo, sort_keys=True)


def make_combinations(groups: int, nodes: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """`groups` distinct constraint combinations, one in forty for a pool scaled to zero."""
    found: dict[str, dict[str, Any]] = {}
    tries = 0
    while len(found) < groups:
        tries += 1
        if tries > 200 * groups + 10_000:
            raise SystemExit(f"could not draw {groups} distinct combinations from {len(nodes)} nodes")
        anchor = None if (rng.random() < 0.025 or not nodes) else rng.choice(nodes)
        combo = _combination(anchor, rng, len(found))
        key = _canonical({**combo, "spread": bool(combo["spread"])})
        found.setdefault(key, combo)
    return list(found.values())


def make_pods(count: int, combos: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """`count` pending GPU-sharing pods over `combos`: every combination at least one, the rest by weight 1/rank."""
    order = list(range(len(combos)))
    weights = [1.0 / (rank + 1) for rank in order]
    chosen = order[:count] + rng.choices(order, weights, k=max(0, count - len(combos)))
    pods = []
    for i, index in enumerate(chosen):
        combo = combos[index]
        annotations: dict[str, str] = {"kai.scheduler/queue": f"q-{i % 11}"}
        if rng.random() < 0.6:
            annotations["gpu-fraction"] = rng.choice(FRACTIONS)
        else:
            annotations["gpu-memory"] = str(rng.choice(MEMORIES))
        if rng.random() < 0.08:
            annotations["gpu-fraction-num-devices"] = str(rng.choice((2, 4)))
        if combo["vendor"]:
            annotations["raybridge.io/gpu-vendor"] = combo["vendor"]
        namespace = f"ns-{index % 37}"
        labels = {"app": "ray", "kai.scheduler/queue": f"q-{i % 11}"}
        spec: dict[str, Any] = {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "image": "rayproject/ray:2.55.1", "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
                            "env": [{"name": "RANK", "value": str(i)}], "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            *[dict(t) for t in combo["tolerations"]]],
        }  # fmt: skip
        if combo["nodeSelector"]:
            spec["nodeSelector"] = dict(combo["nodeSelector"])
        affinity: dict[str, Any] = {}
        if combo["terms"]:
            affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": json.loads(json.dumps(combo["terms"]))}}
        if combo["spread"]:
            labels["example.com/service"] = combo["spread"]
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"example.com/service": combo["spread"]}}, "topologyKey": "kubernetes.io/hostname"}]}
        if affinity:
            spec["affinity"] = affinity
        waited = 2 if rng.random() < 0.05 else rng.randint(11, 3600)
        message = "Not enough resources for the workload: node-group(s) didn't have enough resources: GPUs."
        if rng.random() < 0.02:
            message = f"NonPreemptibleOverQuota: Non-preemptible workload is over quota. Workload requested 1 GPUs, queue q-{i % 11} quota is 4"
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"job-{i}-worker", "namespace": namespace, "uid": f"{i:08d}-0000-0000-0000-000000000000",
                         "creationTimestamp": _stamp(3700 - i // 4), "labels": labels, "annotations": annotations},
            "spec": spec,
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                           "lastTransitionTime": _stamp(waited), "message": message}]},
        })  # fmt: skip
    return pods


def make_running(nodes: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The pods that keep most nodes busy: on 85% of them one pod holds every GPU, on 10% some of them."""
    running = []
    for index, node in enumerate(nodes):
        roll = rng.random()
        gpus = int(node["status"]["allocatable"][_gpu_key(node)])
        if roll >= 0.95:
            continue
        held = gpus if roll < 0.85 else rng.randint(1, gpus - 1)
        name = node["metadata"]["name"]
        running.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"train-{index}", "namespace": f"ns-{index % 37}", "uid": f"r{index:07d}-0000-0000-0000-000000000000",
                         "creationTimestamp": _stamp(86_400), "labels": {"app": "train"}},
            "spec": {"nodeName": name, "schedulerName": "kai-scheduler",
                     "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                                     "resources": {"requests": {_gpu_key(node): str(held), "cpu": "8", "memory": "64Gi"},
                                                   "limits": {_gpu_key(node): str(held)}}}],
                     "tolerations": [{"operator": "Exists"}]},
            "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _stamp(86_000)}]},
        })  # fmt: skip
    return running


def make_cluster(groups: int, pods: int = 10_000, nodes: int = 2_000, seed: int = 1, kubectl: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pods, nodes): `pods` pending pods over `groups` constraint combinations and the running pods, on `nodes` nodes."""
    rng = random.Random(seed)
    node_objects = make_nodes(nodes, rng)
    combos = make_combinations(groups, node_objects, random.Random(seed * 7919 + groups))
    pending = make_pods(pods, combos, rng)
    running = make_running(node_objects, rng)
    if kubectl:
        detail = random.Random(seed + 1)
        dressed_nodes = []
        for i, node in enumerate(node_objects):
            own = dict(node["metadata"]["labels"])
            dressed = kubectl_node(node, i, detail)
            dressed["metadata"]["labels"].update(own)  # the pools' own labels, not the dressing's
            dressed_nodes.append(dressed)
        node_objects = dressed_nodes
        pending = [kubectl_pod(pod, i, detail) for i, pod in enumerate(pending)]
    return pending + running, node_objects


def write_cluster(directory: Path, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> tuple[Path, Path]:
    """The files `kubectl get pods -A -o json` and `kubectl get nodes -o json` would print."""
    directory.mkdir(parents=True, exist_ok=True)
    pods_file, nodes_file = directory / "pods.json", directory / "nodes.json"
    pods_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}, indent=4))
    nodes_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}, indent=4))
    return pods_file, nodes_file


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, required=True, help="distinct constraint combinations of the pending pods")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lean", action="store_true", help="only what the planner reads, not kubectl's whole objects")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    pods, nodes = make_cluster(args.groups, args.pods, args.nodes, args.seed, kubectl=not args.lean)
    pods_file, nodes_file = write_cluster(args.out, pods, nodes)
    print(f"{pods_file} ({pods_file.stat().st_size / 1e6:.1f} MB), {nodes_file} ({nodes_file.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
