"""Where tests import the simulated Kueue and KubeRay controllers from, and a whole simulated cluster.

Why this module exists: the simulated controllers live in `sim_kueue.py`
(FakeKueue), `sim_kuberay.py` (FakeKubeRay) and `sim_common.py` (what both
share); their docstrings say what each simulates and what it deliberately
leaves out. This module keeps the names the tests import, so that a test does
not need to know which of the three a name lives in.

`simulated_cluster` stands for a cluster with Kueue and KubeRay installed:
kube-apiserver (server.py), GPU nodes as their kubelets register them
(sim_gpu.py), the Kueue and KubeRay controllers.

What it deliberately does not do: define or change any controller. It only
re-exports them, including `_pending_summary`, the old name of
`sim_kueue.pending_summary`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from kubesim.sim_common import (
    condition_is_true,
    find_condition,
    format_quantity,
    merge_patch_for,
    parse_quantity,
    pod_requests,
)
from kubesim.sim_kuberay import FakeKubeRay, validate_rayjob
from kubesim.sim_kueue import (
    FakeKueue,
    assign_flavors,
    kueue_create_errors,
    pending_summary,
    ray_podsets,
    workload_name,
)

_pending_summary = pending_summary  # the name tests used before the split

__all__ = [
    "FakeKubeRay",
    "FakeKueue",
    "assign_flavors",
    "condition_is_true",
    "find_condition",
    "format_quantity",
    "kueue_create_errors",
    "merge_patch_for",
    "parse_quantity",
    "pending_summary",
    "pod_requests",
    "ray_podsets",
    "simulated_cluster",
    "validate_rayjob",
    "workload_name",
]


@contextlib.contextmanager
def simulated_cluster(dashboard_address: str, kubeconfig: Path, gpu_nodes: int = 2) -> Iterator[tuple[Any, str, Any, Any]]:
    """The newest releases with `gpu_nodes` 8-GPU NVIDIA nodes, the simulated Kueue and KubeRay (its clusters' Ray
    jobs run on the real head at `dashboard_address`): (server, kubeconfig path, kueue, kuberay); all stopped after."""
    from kubesim.server import KubeApiServer
    from kubesim.sim_gpu import register_gpu_node

    server = KubeApiServer().start()
    try:
        path = server.write_kubeconfig(kubeconfig)
        for i in range(gpu_nodes):
            register_gpu_node(server, f"gpu-{i}", gpus=8)
        kueue = FakeKueue(server).start()
        try:
            kuberay = FakeKubeRay(server, dashboard_address=dashboard_address).start()
            try:
                yield server, str(path), kueue, kuberay
            finally:
                kuberay.stop()
        finally:
            kueue.stop()
    finally:
        server.stop()
