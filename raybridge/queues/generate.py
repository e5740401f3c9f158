"""Queue configs from the cluster's nodes: the service behind `raybridge queues generate`.

Reads the Nodes (a `kubectl get nodes -o json` file, or the cluster through
the official client) and the GPUs they publish as DRA devices, groups them into pools and hands them to the pure
generator (`raybridge.queues.decision.configs`). Returns the objects and the
lines that explain them; printing is the CLI's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from raybridge.queues.decision.configs import KaiOptions, KueueOptions, kai_configs, kai_summary, kueue_configs, kueue_summary, node_pools
from raybridge.errors import BadInput


@dataclass(frozen=True)
class GeneratedConfigs:
    objects: tuple[dict[str, Any], ...]
    #: What the objects were sized from and how they behave, one sentence each.
    summary: tuple[str, ...]


def generate_queue_configs(
    options: Union[KueueOptions, KaiOptions],
    *,
    nodes_file: Optional[str] = None,
    kube: Any = None,
) -> GeneratedConfigs:
    """Kueue (KueueOptions) or KAI (KaiOptions) queue objects sized from the nodes."""
    if nodes_file:
        from raybridge.files import load_node_file

        read = load_node_file(nodes_file)
        nodes, devices = read.nodes, read.devices
    elif kube is not None:
        from raybridge.core.inventory import DeviceSources
        from raybridge.kube.dra import list_dra_objects
        from raybridge.kube.objects import list_nodes

        nodes = list_nodes(kube)
        dra = list_dra_objects(kube)
        devices = DeviceSources.read(dra.slices, dra.classes)
    else:
        raise BadInput("give --nodes FILE or --from-cluster")
    pools = node_pools(nodes, devices)
    try:
        if isinstance(options, KaiOptions):
            return GeneratedConfigs(tuple(kai_configs(pools, options)), tuple(kai_summary(pools, options)))
        return GeneratedConfigs(tuple(kueue_configs(pools, options)), tuple(kueue_summary(pools, options)))
    except ValueError as exc:
        where = f"--nodes {nodes_file}" if nodes_file else "the cluster"
        raise BadInput(f"{where}: {exc}", *pools.notes) from None
