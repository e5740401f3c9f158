"""Where the GPU inventory comes from: a file, the cluster, a Ray cluster or this machine.

The service that picks the source, in the order a user would expect
(explicit file, explicit Ray address, the configured cluster, the local
node), and returns one `Inventory`. The parsing itself is pure
(`raybridge.core.inventory`); the probes are adapters (`raybridge.gpu`).
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from raybridge.core.inventory import Inventory, inventory_from_nodes, items_of
from raybridge.errors import BadInput
from raybridge.files import read_user_file


def _read_json_or_yaml(path: str, what: str) -> Any:
    text = read_user_file(path, what)
    try:
        return json.loads(text)
    except ValueError:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise BadInput(f"{what} file {path!r} is neither JSON nor YAML") from None


def load_objects(path: str, kind: str) -> list[dict[str, Any]]:
    document = _read_json_or_yaml(path, f"--{kind.lower()}s")
    try:
        return items_of(document, kind)
    except ValueError as exc:
        raise BadInput(f"--{kind.lower()}s {path!r}: {exc}") from None


def discover_inventory(
    *,
    nodes_file: Optional[str] = None,
    pods_file: Optional[str] = None,
    ray_address: Optional[str] = None,
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
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

        return probe_ray_cluster(None if ray_address == "auto" else ray_address)
    from raybridge.kube.client import cluster_configured

    if kube is not None or cluster_configured(kubeconfig) or not local_fallback:
        from raybridge.kube.client import connect, list_nodes, list_pods_all_namespaces

        kube = kube or connect(kubeconfig, context)
        nodes = list_nodes(kube)
        pods = list_pods_all_namespaces(kube)
        inventory = inventory_from_nodes(nodes, pods, tolerations=tolerations, source="kubernetes")
        if pods is None:
            return Inventory(inventory.nodes, inventory.source, ("free GPUs unknown: no permission to list pods",))
        return inventory
    from raybridge.gpu import local_inventory

    local = local_inventory()
    return Inventory(local.nodes, local.source, ("no cluster configured: this machine's GPUs",) + tuple(local.notes))
