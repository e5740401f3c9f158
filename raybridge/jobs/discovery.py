"""Where the GPU inventory comes from: a file, the cluster, a Ray cluster or this machine.

The one place that decides the inventory source, for `discover`, `plan`,
`render` and both submit backends (`submission_inventory`, which a dry run
and a real run both call, so the preview sizes against what the run would).
The order is the one a user would expect: an explicit file, an explicit Ray
address, the configured cluster, the local node. Two explicit sources at once
are refused, never one silently preferred.

The parsing itself is pure (`raybridge.core.inventory`); the probes are
adapters (`raybridge.gpu`). Nothing here prints: the flags a source leaves
unused come back as data (`unused_cluster_flags`) for the CLI to warn about.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, Mapping, Optional, Sequence

from raybridge.core.inventory import Inventory, inventory_from_nodes
from raybridge.errors import BadInput
from raybridge.files import load_node_file
from raybridge.jobs.options import ray_address
from raybridge.kube.target import ClusterTarget

InventorySource = Literal["file", "ray", "kubernetes", "local"]

#: The cluster flags each source reads; `discover` uses nothing else, so the rest are ignored there.
_FLAGS_READ: dict[str, tuple[str, ...]] = {
    "file": (),
    "ray": ("--request-timeout",),  # the bound on connecting to the Ray cluster
    "kubernetes": ("--kubeconfig", "--context", "--request-timeout"),  # Nodes and every namespace's Pods
    "local": (),
}
_WHY_UNUSED: dict[str, str] = {
    "file": "the inventory comes from the --nodes file",
    "ray": "the inventory comes from the Ray cluster at --address",
    "kubernetes": "discover lists the Nodes and the Pods of every namespace",
    "local": "no cluster is configured: the inventory is this machine",
}


def choose_inventory_source(
    *,
    nodes_file: Optional[str] = None,
    pods_file: Optional[str] = None,
    ray_address: Optional[str] = None,
    kubeconfig: Optional[str] = None,
    local_fallback: bool = True,
    kube: Any = None,
) -> InventorySource:
    """Which source an inventory comes from; BadInput for contradictory flags."""
    if nodes_file and ray_address:
        raise BadInput("--nodes and --address name two inventory sources: give one of them")
    if pods_file and not nodes_file:
        raise BadInput("--pods needs --nodes (the pods are matched to those nodes)")
    if nodes_file:
        return "file"
    if ray_address:
        return "ray"
    if kube is not None or not local_fallback:
        return "kubernetes"
    from raybridge.kube.config import cluster_configured

    return "kubernetes" if cluster_configured(kubeconfig) else "local"


def unused_cluster_flags(source: InventorySource, given: Mapping[str, bool]) -> tuple[list[str], str]:
    """The given cluster flags (flag -> given) that `discover` ignores with this source, and why."""
    unused = [flag for flag, was_given in given.items() if was_given and flag not in _FLAGS_READ[source]]
    return unused, _WHY_UNUSED[source]


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
    """The inventory from the source `choose_inventory_source` picks."""
    cluster = cluster or ClusterTarget()
    source = choose_inventory_source(
        nodes_file=nodes_file, pods_file=pods_file, ray_address=ray_address,
        kubeconfig=cluster.kubeconfig, local_fallback=local_fallback, kube=kube,
    )  # fmt: skip
    if source == "file":
        assert nodes_file is not None
        read = load_node_file(nodes_file, pods_file)
        return inventory_from_nodes(read.nodes, read.pods, tolerations=tolerations, source="file", devices=read.devices)
    if source == "ray":
        from raybridge.gpu import probe_ray_cluster

        return probe_ray_cluster(None if ray_address == "auto" else ray_address, connect_timeout=cluster.request_timeout)
    if source == "kubernetes":
        from raybridge.core.inventory import DeviceSources
        from raybridge.kube.dra import list_dra_objects
        from raybridge.kube.objects import list_nodes, list_pods_all_namespaces

        kube = kube or cluster.connect()
        nodes = list_nodes(kube)
        pods = list_pods_all_namespaces(kube)
        dra = list_dra_objects(kube)
        devices = DeviceSources.read(dra.slices, dra.classes, dra.claims)
        inventory = inventory_from_nodes(nodes, pods, tolerations=tolerations, source="kubernetes", devices=devices)
        notes = dra.notes + (("free GPUs unknown: no permission to list pods",) if pods is None else ())
        return replace(inventory, notes=inventory.notes + notes) if notes else inventory
    from raybridge.gpu import local_inventory

    local = local_inventory()
    return replace(local, notes=("no cluster configured: sizing for this machine's own GPUs",) + tuple(local.notes))


def submission_inventory(backend: str, options: Any, tolerations: Sequence[Any] = (), kube: Any = None) -> Optional[Inventory]:
    """What a submission on `backend` sizes against (`options`: a `SubmitOptions`).

    None on the local backend with a Ray address: that cluster places the work
    itself (it may autoscale), so the request goes on unsized. This machine for
    a private local head (`--nodes` describes a cluster, not this machine). On
    Kubernetes, the `--nodes` file or the cluster, never this machine.
    """
    if backend == "local":
        if ray_address(options.address):
            return None
        from raybridge.gpu import local_inventory

        return local_inventory()
    return discover_inventory(
        nodes_file=options.nodes_file, pods_file=options.pods_file, cluster=options.cluster,
        tolerations=tolerations, local_fallback=False, kube=kube,
    )  # fmt: skip
