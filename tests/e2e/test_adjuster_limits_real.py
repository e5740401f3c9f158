"""On the real Karpenter, a NodePool at its limits: the pods left waiting are told why, and no placeholder churns.

Why: with a NodePool limited to 16 GPUs, 24 pods of 0.6 GPU (a GPU each) can get 2 of the 3 nodes they need.
Before, the adjuster said nothing of it, and the placeholder the limit kept out was bound to GPUs the other two had
brought up, counted for nothing and made again (5 placeholders for 3 nodes' worth). Karpenter v1.14.1 says it: a
Warning FailedScheduling on the placeholder ("no instance type has enough resources": the limit leaves only the CPU
type). `adjuster run` now relays it to the pods (ScaleUpRefused) and holds the group's new placeholders back.

Runs on testcluster's stack of the real programs (`benchmarks/adjuster_burst_real.py`: KAI v0.12.0, Karpenter
v1.14.1 with its kwok provider, gpu-4x and gpu-8x types), the controller in a thread with the shipped settings.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from testcluster.pytest_plugin import _unavailable
from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import adjuster_burst_real as real  # noqa: E402

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group("testcluster-adjuster-limits-real"),
    pytest.mark.timeout(900),
]

PODS = 24
LIMIT_GPUS = "16"


def test_pods_a_nodepool_limit_keeps_waiting_are_told_and_no_placeholder_churns() -> None:
    from kubernetes import client

    from kubesim.sim_gpu import fraction_pod

    stack = real.start_stack()
    try:
        api = stack.api_client()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "default", {"spec": {"limits": {"nvidia.com/gpu": LIMIT_GPUS}}})
        with real.PodLog(api) as log, real.raybridge_side(stack, api):
            real.wait_until(lambda: log.listed, 30, "the pod watch's first list")
            for i in range(PODS):
                core.create_namespaced_pod(real.WORK, real.on_real_stack(fraction_pod(f"six-{i}", real.WORK, fraction="0.6")),
                                           _preload_content=False)
            real.wait_until(lambda: len(log.running) == 16, 120, "16 pods running (the 2 nodes the limit allows)")
            time.sleep(30)  # what churns, churns in this time: each placeholder made again within seconds, before
            events: list[dict[str, Any]] = real.json.loads(core.list_namespaced_event(real.WORK, _preload_content=False).data)["items"]
            refused = [e for e in events if e.get("reason") == "ScaleUpRefused"]
            claims = real._claims(custom)
        assert len(log.running) == 16, log.running
        assert len(claims) == 2, [c["metadata"]["name"] for c in claims]
        assert refused and all(e["type"] == "Warning" and "Karpenter brings no node for placeholder" in e["message"] for e in refused), refused
        # Said once to each pod of the refused placeholder (the pods it was for; KAI may place others of the burst on
        # the nodes that came). The NodePool's limits are not named here: Karpenter refuses before its status.resources
        # counts the nodes it launched (raybridge names them only where that status shows the limit bound).
        told = [e["involvedObject"]["name"] for e in refused]
        assert len(told) == len(set(told)) and len(told) <= PODS - 16 + 8, told
        assert len(log.asked) <= 3, f"{len(log.asked)} placeholders for 3 nodes' worth of pods: they churned"
    finally:
        stack.stop()
