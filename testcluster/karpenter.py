"""Karpenter with its kwok cloud provider in a Stack: the real node autoscaler, launching kwok nodes for pending pods.

Why: raybridge's node-scale-adjuster asks an autoscaler for GPU nodes by leaving placeholder pods pending.
Whether a real autoscaler then adds nodes, of which size, and how many, is Karpenter's own decision; this
runs the real one (`sigs.k8s.io/karpenter/kwok`, programs.py) instead of our idea of it.

What it does (`start(stack)`, called by `Stack._start` when `"karpenter"` is in `StackOptions.operators`):
- installs the release's CRDs from the module cache: `kwok/charts/crds` (NodePool, NodeClaim, NodeOverlay,
  CapacityBuffer: what the kwok chart installs) and `kwok/apis/crds` (KWOKNodeClass);
- writes the instance types (`StackOptions.karpenter_instance_types`, Karpenter's own JSON format, read by
  `ConstructInstanceTypes` in kwok/cloudprovider/helpers.go through `--instance-types-file-path`);
- starts Karpenter out of cluster: `KUBECONFIG` (`ctrl.GetConfigOrDie`, pkg/operator/operator.go), leader
  election off, in a network namespace of its own (netjail.py): it binds its metrics and health servers on every
  interface (`:PORT`, operator.go `NewOperator`, with no host setting), which there is its own loopback alone; waits
  for `/readyz` (caches synced, NodePool and NodeClaim CRDs mapped) through a Unix socket of the stack's;
- creates the KWOKNodeClass `default` and the NodePool `default` (`nodepool()`), and waits until the NodePool is Ready.

How its nodes come up: for a NodeClaim, Karpenter's kwok cloud provider creates the Node itself
(`CloudProvider.Create`/`toNode`, kwok/cloudprovider/cloudprovider.go): annotation and label
`kwok.x-k8s.io/node: fake`, providerID `kwok://NAME`, the `karpenter.sh/unregistered` taint, allocatable from
the instance type, no conditions or addresses. The stack's kwok manages every node without kwok.NO_KUBELET_LABEL, so its
node-initialize stage gives the Node the stack's InternalIP (127.0.0.1), kwok's kubelet port and Ready, and its
heartbeat stage keeps the lease; Karpenter then registers the NodeClaim (removes the taint) and initializes it.

Labels per instance type: the instance-type file has no field for node labels (`InstanceTypeOptions`, helpers.go),
but every single-valued `In` requirement of an offering becomes a label of the Node made from it
(`addInstanceLabels`, cloudprovider.go) and a well-known label pods may select on (`newInstanceType`, helpers.go).
`gpu_instance_type()` puts `nvidia.com/gpu.count`, `nvidia.com/gpu.product` and `nvidia.com/gpu.memory` (the
labels NVIDIA's GPU feature discovery sets) there.

What this does not do: no consolidation, expiry or drift by default (the NodePool says `consolidateAfter: Never`,
`expireAfter: Never` and a budget of 0 nodes; a test that wants them applies its own `nodepool(...)`); no webhooks
(v1.14.1 has none); no NodeOverlay or CapacityBuffer (their feature gates are off by default); no prices but those of
the instance-type file; nothing of a real cloud (the kwok cloud provider needs none).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Optional

from testcluster.processes import unix_http_ok, wait_until
from testcluster.sources import release_crds

if TYPE_CHECKING:
    from testcluster.stack import Stack

__all__ = ["DEFAULT_INSTANCE_TYPES", "NODE_CLASS", "NODE_POOL", "gpu_instance_type", "instance_type", "nodeclass", "nodepool", "start"]

#: Its metrics and health servers' ports (its defaults), inside its network namespace.
METRICS_PORT, HEALTH_PORT = 8080, 8081
NODE_CLASS = "default"
NODE_POOL = "default"
ZONE = "test-zone-a"
#: The GPU every default GPU type has (labels as NVIDIA's GPU feature discovery writes them; memory in MiB).
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}


def instance_type(name: str, cpu: str, memory: str, price: float, extra: Optional[dict[str, str]] = None,
                  labels: Optional[dict[str, str]] = None, pods: str = "110") -> dict[str, Any]:  # fmt: skip
    """One instance type in Karpenter kwok's file format (`InstanceTypeOptions`, kwok/cloudprovider/helpers.go):
    one on-demand offering in `ZONE` at `price`, carrying `labels` as single-valued requirements (they become
    labels of the nodes made from it); `extra` resources (such as `nvidia.com/gpu`) beside CPU and memory."""
    requirements = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
    ] + [{"key": key, "operator": "In", "values": [value]} for key, value in sorted((labels or {}).items())]
    resources = {"cpu": cpu, "memory": memory, "ephemeral-storage": "100Gi", "pods": pods, **(extra or {})}
    return {
        "name": name, "architecture": "amd64", "operatingSystems": ["linux"], "resources": resources,
        "offerings": [{"Price": price, "Available": True, "Requirements": requirements}],
    }  # fmt: skip


def gpu_instance_type(name: str, gpus: int, cpu: str, memory: str, price: float, gpu_labels: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """A type with `gpus` `nvidia.com/gpu` and the GPU labels (count, and `gpu_labels`, by default an H100's)."""
    labels = {"nvidia.com/gpu.count": str(gpus), **(H100 if gpu_labels is None else gpu_labels)}
    return instance_type(name, cpu, memory, price, extra={"nvidia.com/gpu": str(gpus)}, labels=labels)


#: A CPU type and two GPU types, priced by size (so for a pod that fits both GPU types, the 4-GPU one is cheaper).
DEFAULT_INSTANCE_TYPES: list[dict[str, Any]] = [
    instance_type("cpu-16x", "16", "64Gi", 0.8),
    gpu_instance_type("gpu-4x", 4, "48", "384Gi", 16.0),
    gpu_instance_type("gpu-8x", 8, "96", "768Gi", 32.0),
]


def nodeclass(name: str = NODE_CLASS) -> dict[str, Any]:
    """A KWOKNodeClass (its CRD defaults its status to Ready, kwok/apis/v1alpha1/kwoknodeclass.go)."""
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": name}}


def nodepool(name: str = NODE_POOL, instance_types: Optional[list[str]] = None, disruption: Optional[dict] = None,
             node_class: str = NODE_CLASS) -> dict[str, Any]:  # fmt: skip
    """A NodePool of linux nodes (of `instance_types` only, if given) of the KWOKNodeClass `node_class`.

    Disruption is off unless `disruption` says otherwise: `consolidateAfter: Never` (no consolidation at all, where
    the default 0 s would remove a node the moment it is empty or underused, pkg/apis/v1/nodepool.go), a budget of
    0 nodes (no voluntary disruption: drift, emptiness, expiry) and `expireAfter: Never`. Tests judge how many nodes
    a request brings; a node taken away between two polls would make that a race. Deleting a NodeClaim still works.
    """
    requirements = [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]
    if instance_types is not None:
        requirements.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(instance_types)})
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "requirements": requirements,
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": node_class},
                "expireAfter": "Never",
            }},
            "disruption": disruption or {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "Never", "budgets": [{"nodes": "0"}]},
        },
    }  # fmt: skip


def _nodepool_ready(stack: "Stack", name: str) -> bool:
    from kubernetes import client

    api = stack.api_client()
    try:
        found = json.loads(client.CustomObjectsApi(api).get_cluster_custom_object("karpenter.sh", "v1", "nodepools", name, _preload_content=False).data)
    finally:
        api.close()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (found.get("status") or {}).get("conditions") or [])


def start(stack: "Stack") -> None:
    """Karpenter's CRDs, its instance types, the program itself, then the KWOKNodeClass and NodePool `default`."""

    stack.install_crds(release_crds("karpenter", stack.programs, stack.options.versions))
    folder = stack.workdir / "karpenter"
    folder.mkdir(parents=True, exist_ok=True)
    types = stack.options.karpenter_instance_types
    instance_types = folder / "instance-types.json"
    instance_types.write_text(json.dumps(DEFAULT_INSTANCE_TYPES if types is None else types, indent=1))
    argv = [
        str(stack.binaries["karpenter"]), f"--instance-types-file-path={instance_types}",
        f"--metrics-port={METRICS_PORT}", f"--health-probe-port={HEALTH_PORT}", "--disable-leader-election=true", "--log-level=info",
    ]  # fmt: skip
    env = dict(os.environ, KUBECONFIG=str(stack.kubeconfig))
    health = stack.sockets / "karpenter-health.sock"
    process = stack.jailed("karpenter", argv, env, serves={health: HEALTH_PORT})
    process.wait_ready(lambda: unix_http_ok(health, "/readyz"), 120)
    if "failed constructing instance types" in process.log.read_text():  # main.go logs it and runs on with none
        raise process.failure(f"Karpenter could not read its instance types ({instance_types})")
    stack.apply([nodeclass(), nodepool()])
    wait_until(lambda: _nodepool_ready(stack, NODE_POOL), 60, f"Karpenter's NodePool {NODE_POOL!r} did not become Ready")
