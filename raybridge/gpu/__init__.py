"""GPU discovery adapters: this machine (`local_inventory`) and a Ray cluster (`probe_ray_cluster`).

Both fill the same `raybridge.core.inventory` records that the Kubernetes
path fills, so sizing does not care where the numbers came from.
Importing this package imports none of ray, pynvml or amdsmi; each is
loaded only when a probe runs. Re-exports only, lazily: importing one
adapter does not load the others.
"""

from raybridge.core.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "DEFAULT_PROBES": ".scan",
    "LocalGpus": ".local",
    "discover_local": ".local",
    "local_inventory": ".local",
    "probe_amd": ".scan",
    "probe_nvidia": ".scan",
    "probe_ray_cluster": ".ray_probe",
    "quiet_output": ".scan",
    "records_from_scan": ".local",
    "scan_node": ".scan",
})
