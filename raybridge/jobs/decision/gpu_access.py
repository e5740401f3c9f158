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

`gpuModel` and `gpuMemory` narrow the GPUs first (`GpuChoice`): a node whose GPUs are of another model or
have less memory each stops counting, and the pods are pinned to the GPUs chosen (the DRA devices' product
names in the claim's CEL selector, or the nodes' product label in a node affinity).

What it deliberately does not do: size (`sizing.py`), or render claims (`manifests.py`). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.core.inventory import Inventory, NodeGpus, product_label


#: The longest GPU model name a spec may give (product names are tens of characters).
MAX_MODEL_CHARS = 128
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
#: What a model name may hold: what vendors' product names do (letters, digits, spaces and . _ - / ( ) +).
MODEL_NAME = re.compile(r"[A-Za-z0-9 ._/()+-]+")


def model_name_problem(value: object) -> Optional[str]:
    """Why `value` is no GPU model name, or None."""
    if not isinstance(value, str) or not MODEL_NAME.fullmatch(value) or not model_key(value) or len(value) > MAX_MODEL_CHARS:
        return (f"must be a GPU model name of letters, digits, spaces and . _ - / ( ) +, at most {MAX_MODEL_CHARS} characters "
                f"(got {value!r})")  # fmt: skip
    return None


def model_key(name: str) -> str:
    """A model name compared the way people write it: lower case, any run of other characters one dash
    ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3" and "nvidia_h100_80gb_hbm3" are one model)."""
    return _NOT_ALNUM.sub("-", name.lower()).strip("-")


def model_matches(wanted: str, model: Optional[str]) -> bool:
    """True when `model` is `wanted`, or names it as a whole part ("H100" in "NVIDIA-H100-80GB-HBM3", not "H10")."""
    if not model:
        return False
    return f"-{model_key(wanted)}-" in f"-{model_key(model)}-"


@dataclass(frozen=True)
class GpuChoice:
    """Which of a vendor's GPUs a job may have: a model (`gpuModel`) and a least memory per GPU (`gpuMemory`)."""

    model: Optional[str] = None
    memory_mib: Optional[int] = None

    def problem(self, node: NodeGpus) -> Optional[str]:
        """Why the node's GPUs are not what the job asks for (None: they are)."""
        if self.model and not model_matches(self.model, node.model):
            return f"its GPUs are {node.model or 'of no known model'}, not {self.model} (gpuModel)"
        if self.memory_mib and (node.memory_mib or 0) < self.memory_mib:
            have = f"{node.memory_mib} MiB" if node.memory_mib else "an unknown amount of memory"
            return f"its GPUs have {have}, below {self.memory_mib} MiB (gpuMemory)"
        return None


@dataclass(frozen=True)
class GpuAccess:
    """The chosen way (a DeviceClass for DRA devices, None for the device plugin's resource), the inventory with
    the nodes the other way (or of another model or less memory) ineligible, what that costs, in words, and what
    pins the pods to the GPUs chosen: the DRA devices' product names, or the nodes' product labels."""

    device_class: Optional[str]
    inventory: Inventory
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: Product names of the chosen DRA devices (a claim's CEL selector), when `gpuModel` narrowed them.
    device_models: tuple[str, ...] = ()
    #: (label, value) pairs of the chosen device-plugin nodes' product label (node affinity), when narrowed.
    node_models: tuple[tuple[str, str], ...] = ()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _left_out(nodes: list[NodeGpus], reason: str) -> tuple[list[NodeGpus], int]:
    return [replace(n, eligible=False, reasons=n.reasons + (reason,)) for n in nodes], sum(n.gpus for n in nodes)


def narrow_to(inventory: Inventory, vendor: str, choice: GpuChoice) -> tuple[Inventory, list[NodeGpus]]:
    """The inventory with `vendor`'s nodes whose GPUs are not the chosen ones ineligible (saying why), and the
    nodes left eligible."""
    if not choice.model and not choice.memory_mib:
        return inventory, [n for n in inventory.nodes if n.vendor == vendor and n.gpus > 0 and n.eligible]
    nodes, kept = [], []
    for node in inventory.nodes:
        problem = choice.problem(node) if node.vendor == vendor and node.gpus > 0 else None
        if problem:
            node = replace(node, eligible=False, reasons=node.reasons + (problem,))
        elif node.vendor == vendor and node.gpus > 0 and node.eligible:
            kept.append(node)
        nodes.append(node)
    return replace(inventory, nodes=tuple(nodes)), kept


def choose_gpu_access(inventory: Inventory, vendor: str, shared: bool = False, choice: GpuChoice = GpuChoice()) -> GpuAccess:
    """The way `vendor`'s GPUs are asked for (`shared`: through KAI's GPU sharing), and the inventory sized against:
    only the GPUs of `choice`, and those the chosen way reaches."""
    access = _choose_way(*narrow_to(inventory, vendor, choice), vendor, shared)
    if not choice.model and not choice.memory_mib:
        return access
    chosen = [n for n in access.inventory.nodes if n.vendor == vendor and n.gpus > 0 and n.eligible]
    if access.device_class is not None:
        # gpuMemory alone is a selector of its own (the devices' memory capacity): no product names, so a new node
        # of another model with enough memory qualifies too.
        return replace(access, device_models=tuple(sorted({n.model for n in chosen if n.model})) if choice.model else ())
    labels = {n.name: product_label(n.labels, vendor) for n in chosen}
    unlabelled = sorted(name for name, label in labels.items() if label is None)
    warnings = access.warnings
    if unlabelled:
        warnings += (
            f"nodes {', '.join(unlabelled[:5])}{', ...' if len(unlabelled) > 5 else ''} have no GPU product label: "
            "the pods cannot be kept to the GPUs gpuModel and gpuMemory chose on them",
        )
    return replace(access, warnings=warnings, node_models=tuple(sorted({label for label in labels.values() if label is not None})))


def _choose_way(inventory: Inventory, mine: list[NodeGpus], vendor: str, shared: bool) -> GpuAccess:
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
