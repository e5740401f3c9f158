"""What the node-scale-adjuster's end-to-end tests do to a cluster and read back, whichever programs run beside it.

Why this module exists: the tests with the simulated cluster-autoscaler and KAI (tests/e2e/ca_on_real_api.py and the
modules on its stack), those with the real KAI and Karpenter (test_adjuster_real.py, test_adjuster_karpenter_real.py,
tests/kai_karpenter_world.py) and the offline test_adjuster_settings.py share the same pieces: a burst of KAI
GPU-sharing pods, the controller's settings and clock, the slim CLI the adjuster's image runs, and the pods,
placeholders, requests and templates they count. `client` is anything with `testcluster.client.ClusterClient`'s
method names.
What it deliberately does not do: start a cluster, a simulation or a controller, or wait.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings

#: The adjuster's namespace (its placeholders, requests and templates), and the one the tests' pods wait in.
NS = consts.DEFAULT_NAMESPACE
WORK = "work"
#: The planner's grace period in `run_settings`.
GRACE_PERIOD = 0.2
PR_API = "autoscaling.x-k8s.io/v1"

#: The adjuster's image has neither Ray nor the CLI's other dependencies (see the Dockerfile): every test that runs
#: `adjuster run` as a process runs it with them made unimportable (`python -c SLIM_ADJUSTER adjuster run ...`).
SLIM_ADJUSTER = ("import runpy, sys\n"
                 "for name in ('ray', 'rich', 'pynvml', 'amdsmi'): sys.modules[name] = None\n"
                 "sys.argv = ['raybridge'] + sys.argv[1:]\n"
                 "runpy.run_module('raybridge', run_name='__main__', alter_sys=True)\n")  # fmt: skip


def run_settings(**extra: Any) -> RunSettings:
    """A controller that acts at once: grace period GRACE_PERIOD, 8-GPU nodes, fast resyncs, no leader election."""
    values: dict[str, Any] = dict(
        planner=AdjusterSettings(grace_period_seconds=GRACE_PERIOD, node_gpus=8),
        provision_timeout=20.0, resync=0.2, debounce=0.05, request_timeout=5.0, leader_election=False, metrics_port=0,
    )  # fmt: skip
    values.update(extra)
    return RunSettings(**values)


def past_grace() -> datetime:
    """A controller clock a second ahead of real time (more than the grace period): a pod already Unschedulable
    is past its grace period at the controller's next pass, without the test waiting it out."""
    return datetime.now(timezone.utc) + timedelta(seconds=1 + GRACE_PERIOD)


def burst(client: Any, count: int, fraction: str, prefix: str = "p") -> None:
    """`count` KAI pods asking for `fraction` of a GPU each, `prefix`-0 to `prefix`-(count-1), in WORK. On a real
    cluster each test names its own prefix: kube-controller-manager's pod GC, acting late on a deleted pod, marked a
    new pod of the same name Failed."""
    from kubesim.sim_gpu import fraction_pod

    for i in range(count):
        client.create_object(fraction_pod(f"{prefix}-{i}", WORK, fraction=fraction))


def running(client: Any) -> int:
    return sum(1 for p in client.list_objects("v1", "Pod", WORK) if p.get("status", {}).get("phase") == "Running")


def unschedulable(client: Any) -> int:
    return sum(1 for p in client.list_objects("v1", "Pod", WORK)
               if any(c.get("reason") == "Unschedulable" for c in p.get("status", {}).get("conditions") or []))  # fmt: skip


def placeholders(client: Any) -> list[dict[str, Any]]:
    return client.list_objects("v1", "Pod", NS, label_selector=consts.PLACEHOLDER_SELECTOR)


def requests(client: Any) -> list[dict[str, Any]]:
    return client.list_objects(PR_API, "ProvisioningRequest", NS)


def templates(client: Any) -> list[dict[str, Any]]:
    return client.list_objects("v1", "PodTemplate", NS)


def request_pods(request: dict[str, Any]) -> list[str]:
    """The pods a ProvisioningRequest was made for, as the adjuster wrote them on it."""
    return json.loads(request["metadata"]["annotations"][consts.PODS_ANNOTATION])


def deleted_by_reason(controller: Any) -> dict[str, int]:
    """The placeholders the controller deleted, counted by the reason it gave (its metrics)."""
    found: dict[str, int] = {}
    for metric in controller.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == "raybridge_adjuster_placeholder_actions_total" and sample.labels.get("action") == "delete" and sample.value:
                found[sample.labels["reason"]] = int(sample.value)
    return found
