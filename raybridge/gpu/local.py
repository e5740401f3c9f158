"""This machine's GPUs as inventory records.

Runs the node-side scan (`raybridge.gpu.scan`: NVML for NVIDIA, amdsmi for
AMD) and turns its plain answer into the `NodeGpus` / `Inventory` records the
rest of raybridge sizes from, so a laptop, a GPU box and a Ray cluster all
look the same to sizing. The Ray probe reuses `records_from_scan` for the
answers it collects from other nodes.

A machine without drivers or libraries is a normal answer: a single record
with no GPUs, and notes saying why. Nothing here raises for that.

Deliberately not here: which GPUs are in use (the records carry no `free`
count), eligibility (every record is eligible), and loading any vendor
library at import time: `import raybridge.gpu` imports neither pynvml nor
amdsmi.
"""

from __future__ import annotations

import socket
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

from raybridge.core.inventory import GpuDevice, Inventory, NodeGpus
from raybridge.gpu.scan import DEFAULT_PROBES, NodeScan, VendorProbe, VendorScan, scan_node


@dataclass(frozen=True)
class LocalGpus:
    """One node's GPU records (at least one, `vendor=None` when it has none) and the probe notes."""

    node: str
    records: tuple[NodeGpus, ...]
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.records)


def _devices(scan: VendorScan) -> tuple[GpuDevice, ...]:
    return tuple(
        GpuDevice(index=d["index"], model=d.get("model"), memory_mib=d.get("memoryMiB"))
        for d in scan.get("devices") or []
    )


def _common_model(devices: Sequence[GpuDevice]) -> Optional[str]:
    """The model every device reports; several models (rare) are listed, most common first."""
    counts = Counter(d.model for d in devices if d.model)
    if not counts:
        return None
    return " / ".join(model for model, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _smallest_memory(devices: Sequence[GpuDevice]) -> Optional[int]:
    """Per-GPU memory for sizing: the smallest device, so a worker fits on any of them."""
    sizes = [d.memory_mib for d in devices if d.memory_mib]
    return min(sizes) if sizes else None


def _vendor_record(name: str, scan: VendorScan) -> Optional[NodeGpus]:
    devices = _devices(scan)
    if not devices:
        return None
    return NodeGpus(
        name=name,
        vendor=scan["vendor"],
        gpus=len(devices),
        model=_common_model(devices),
        memory_mib=_smallest_memory(devices),
        devices=devices,
    )


def records_from_scan(scan: NodeScan, node_name: Optional[str] = None) -> LocalGpus:
    """Records for one node's scan, named `node_name` or else the scanned hostname."""
    name = node_name or scan.get("hostname") or "localhost"
    vendor_scans = scan.get("scans") or []
    records = [r for r in (_vendor_record(name, s) for s in vendor_scans) if r is not None]
    notes = tuple(note for s in vendor_scans for note in s.get("notes") or [])
    if not records:
        records = [NodeGpus(name=name, vendor=None, gpus=0)]
    return LocalGpus(node=name, records=tuple(records), notes=notes)


def discover_local(
    node_name: Optional[str] = None,
    probes: Sequence[VendorProbe] = DEFAULT_PROBES,
) -> LocalGpus:
    """This machine's GPUs, one record per vendor found; named `node_name` or the hostname.

    `probes` are the vendor probes to run (tests hand in probes over fake
    libraries, e.g. `lambda: probe_nvidia(lambda: fake_pynvml)`).
    """
    return records_from_scan(scan_node(probes), node_name or socket.gethostname())


def local_inventory(
    node_name: Optional[str] = None,
    probes: Sequence[VendorProbe] = DEFAULT_PROBES,
) -> Inventory:
    """This machine as a one-node inventory (source "local"); the notes say why a vendor is absent."""
    found = discover_local(node_name, probes)
    return Inventory(nodes=found.records, source="local", notes=found.notes)
