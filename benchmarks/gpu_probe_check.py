"""Check the local GPU probe on a machine that has an NVIDIA GPU.

Not a benchmark: a standalone script to run by hand (or in CI) on a GPU box,
where the unit tests can only use fake libraries. It prints
`local_inventory().to_dict()` as JSON on stdout and exits 0 when at least one
NVIDIA GPU was found with a model name and a memory size, 1 otherwise (the
reason goes to stderr). It does not check AMD GPUs, Ray, or Kubernetes.

    python benchmarks/gpu_probe_check.py
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from raybridge.core.inventory import Inventory, NodeGpus  # noqa: E402
from raybridge.gpu import local_inventory  # noqa: E402


def _complete_nvidia(inventory: Inventory) -> list[NodeGpus]:
    """NVIDIA records where every device has a model and a memory size."""
    return [
        node
        for node in inventory.nodes
        if node.vendor == "nvidia"
        and node.gpus > 0
        and node.model
        and node.memory_mib
        and all(d.model and d.memory_mib for d in node.devices)
    ]


def main() -> int:
    inventory = local_inventory()
    print(json.dumps(inventory.to_dict(), indent=2))
    found = _complete_nvidia(inventory)
    if not found:
        print("FAIL: no NVIDIA GPU with a model and memory found; notes: "
              + ("; ".join(inventory.notes) or "none"), file=sys.stderr)
        return 1
    gpus = sum(n.gpus for n in found)
    print(f"OK: {gpus} NVIDIA GPU(s): {found[0].model}, {found[0].memory_mib} MiB each", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
