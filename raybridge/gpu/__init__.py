"""GPU discovery adapters: this machine (`local_inventory`) and a Ray cluster (`probe_ray_cluster`).

Both fill the same `raybridge.core.inventory` records that the Kubernetes
path fills, so sizing does not care where the numbers came from.

Importing this package imports none of ray, pynvml or amdsmi; each is
loaded only when a probe runs.
"""

from __future__ import annotations

from raybridge.gpu.local import LocalGpus, discover_local, local_inventory, records_from_scan
from raybridge.gpu.ray_probe import probe_ray_cluster
from raybridge.gpu.scan import DEFAULT_PROBES, probe_amd, probe_nvidia, quiet_output, scan_node

__all__ = [
    "DEFAULT_PROBES",
    "LocalGpus",
    "discover_local",
    "local_inventory",
    "probe_amd",
    "probe_nvidia",
    "probe_ray_cluster",
    "quiet_output",
    "records_from_scan",
    "scan_node",
]
