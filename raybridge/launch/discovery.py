"""Where the GPU inventory comes from: a file, the cluster, a Ray cluster or this machine.

The service that picks the source, in the order a user would expect
(explicit file, explicit Ray address, the configured cluster, the local
node), and returns one `Inventory`. The parsing itself is pure
(`raybridge.core.inventory`); the probes are adapters (`raybridge.gpu`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional, Sequence

from raybridge.core.inventory import Inventory, inventory_from_nodes
from raybridge.errors import BadInput
from raybridge.files import load_objects
from raybridge.launch.target import ClusterTarget


def discover_inventory(
    *,
    nodes_file: Optional[str] = None,
    pods_file: Optional[str] = None,
    ray_address: Optional[str] = None,
    cluster: Optional[ClusterTarget] = None,
    tolerations: Sequence[Any] = (),
    local_fallback: bool = True,
    kube: Any = None,
) -> Inventory:
    """The inventory from the first source that applies."""
    if nodes_file:
        nodes = load_objects(nodes_file, "Node")
        pods = load_objects(pods_file, "Pod") if pods_file else None
        return inventory_from_nodes(nodes, pods, tolerations=tolerations, source="file")
    if pods_file:
        raise BadInput("--pods needs --nodes (the pods are matched to those nodes)")
    if ray_address:
        from raybridge.gpu import probe_ray_cluster

        bound = (cluster or ClusterTarget()).request_timeout
        return probe_ray_cluster(None if ray_address == "auto" else ray_address, connect_timeout=bound)
    from raybridge.kube.client import cluster_configured

    cluster = cluster or ClusterTarget()
    if kube is not None or cluster_configured(cluster.kubeconfig) or not local_fallback:
        from raybridge.kube.client import list_nodes, list_pods_all_namespaces

        kube = kube or cluster.connect()
        nodes = list_nodes(kube)
        pods = list_pods_all_namespaces(kube)
        inventory = inventory_from_nodes(nodes, pods, tolerations=tolerations, source="kubernetes")
        if pods is None:
            return replace(inventory, notes=inventory.notes + ("free GPUs unknown: no permission to list pods",))
        return inventory
    from raybridge.gpu import local_inventory

    local = local_inventory()
    return replace(local, notes=("no cluster configured: this machine's GPUs",) + tuple(local.notes))
