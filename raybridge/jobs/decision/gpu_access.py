"""How a job's pods ask for their GPUs: the device plugin's resource (`nvidia.com/gpu`) or DRA devices of a class.

Why it exists: one worker group has one pod template, so its pods ask for GPUs one way. On a cluster whose
nodes publish a vendor's GPUs through a device plugin, through a DRA driver's ResourceSlices, or both (the
inventory, `core/inventory.py`), the way that reaches more of the vendor's schedulable GPUs is chosen (the
device plugin on a tie: it needs no claim), and the nodes the other way cannot reach stop counting as
capacity, with a warning that says how many GPUs that leaves out. Sizing then applies the same rules to the
nodes that are left.

A job that shares GPUs through KAI (`gpusPerReplica` below 1) asks the device plugin's way only: KAI's
GPU sharing places fractions on device-plugin GPUs (KAI v0.12.0 counts a node's GPUs from its allocatable,
`node_info.go`), and newer KAI refuses fractional pods on DRA-only nodes ("fractional/shared GPU pods are
not yet supported on DRA-only nodes", v0.17.0 `node_info.go` `PredicateByNodeResourcesType`).

What it deliberately does not do: size (`sizing.py`), or render claims (`manifests.py`). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.core.inventory import Inventory, NodeGpus


@dataclass(frozen=True)
class GpuAccess:
    """The chosen way (a DeviceClass for DRA devices, None for the device plugin's resource), the inventory with
    the nodes the other way ineligible, and what that costs, in words."""

    device_class: Optional[str]
    inventory: Inventory
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _left_out(nodes: list[NodeGpus], reason: str) -> tuple[list[NodeGpus], int]:
    return [replace(n, eligible=False, reasons=n.reasons + (reason,)) for n in nodes], sum(n.gpus for n in nodes)


def choose_gpu_access(inventory: Inventory, vendor: str, shared: bool = False) -> GpuAccess:
    """The way `vendor`'s GPUs are asked for (`shared`: through KAI's GPU sharing), and the inventory sized against."""
    mine = [n for n in inventory.nodes if n.vendor == vendor and n.gpus > 0 and n.eligible]
    by_plugin = [n for n in mine if n.device_plugin]
    by_dra = [n for n in mine if "dra" in n.sources and n.device_class]
    if not by_dra:
        return GpuAccess(device_class=None, inventory=inventory)
    key = GPU_RESOURCE_KEYS[vendor]
    plugin_total, dra_total = sum(n.gpus for n in by_plugin), sum(n.gpus for n in by_dra)
    if shared or plugin_total >= dra_total:
        device_class = None
        if shared:
            reason = "its GPUs are DRA devices only, and KAI shares device-plugin GPUs only"
        else:
            reason = f"its GPUs are DRA devices only; this job asks for {key}, which reaches more of them"
        outside = [n for n in mine if not n.device_plugin]
    else:
        device_class = by_dra[0].device_class
        reason = f"its GPUs are counted by the device plugin only; this job asks for DRA devices of class {device_class}"
        outside = [n for n in mine if n not in by_dra]
    if not outside:
        chosen = f"DRA devices of class {device_class}" if device_class else key
        return GpuAccess(device_class=device_class, inventory=inventory, notes=(f"{vendor} GPUs asked for as {chosen}",))
    dropped, gpus = _left_out(outside, reason)
    replaced = {n.name: d for n, d in zip(outside, dropped)}
    nodes = tuple(replaced.get(n.name, n) if n.vendor == vendor else n for n in inventory.nodes)
    way = f"as DRA devices of class {device_class}" if device_class else f"through the device plugin ({key})"
    warning = (
        f"{_plural(gpus, vendor + ' GPU')} on {_plural(len(outside), 'node')} left out ({', '.join(n.name for n in outside[:5])}"
        f"{', ...' if len(outside) > 5 else ''}): a worker group asks for its GPUs one way, here {way}"
    )
    return GpuAccess(device_class=device_class, inventory=replace(inventory, nodes=nodes), warnings=(warning,))
