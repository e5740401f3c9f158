"""`adjuster run` at scale: a burst of pending fractional-GPU pods on a cluster of full GPU nodes.

A real kube-apiserver (testcluster's stack: etcd, the API server, kube-scheduler, the controller manager, kwok
playing every node's kubelet) holds `--nodes` 8-GPU nodes, each full (one running pod holding its 8 GPUs), so
every pod of the burst waits. The adjuster runs as an admin runs it, `python -m raybridge adjuster run` in its own
process against that API server, and the script reports:

* burst -> placeholders: the burst is in the API server when the controller starts (as after a burst faster
  than its debounce, or a restart); from its process start to ready (the lists), and from ready to every
  placeholder of the plan created (the plan computed offline from the same pods and nodes);
* the controller's peak memory (VmHWM of its process);
* the reconcile time per change: after the burst, `--changes` single pods created one at a time, each
  waited for until a reconcile pass has run after it; the mean and the largest pass time over those
  passes, from the controller's own histogram (raybridge_adjuster_reconcile_duration_seconds: the decision
  and its API calls), and the decision alone (`decide` on the final state, in this process, best of 3).

No KAI scheduler and no autoscaler run: the burst's pods (KAI's scheduler's) stay pending, written as KAI leaves
them (PodScheduled=False, Unschedulable), and kube-scheduler finds no room for the placeholders, which is the
state being measured. The stack's programs share the machine with the controller, so the times are upper bounds.
It needs the test cluster's programs (Go and the Go module proxy, or the built binaries in testcluster's cache).

    python benchmarks/adjuster_scale.py [--pods 10000] [--nodes 2000] [--changes 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raybridge.adjuster.decision import consts  # noqa: E402
from raybridge.adjuster.decision.scale_adjuster import decide  # noqa: E402
from raybridge.adjuster.decision.settings import RunSettings  # noqa: E402
from raybridge.adjuster.decision.plan import plan_placeholders  # noqa: E402
from raybridge.adjuster.decision.demand import AdjusterSettings, ClusterSnapshot  # noqa: E402
from tests.builders import h100_node  # noqa: E402
from tests.helpers import free_port  # noqa: E402
from kubesim.sim_gpu import fraction_pod  # noqa: E402

WORK = "work"
FRACTIONS = ("0.25", "0.3", "0.5", "0.75")
_SLIM = ("import runpy, sys\n"
         "for name in ('ray', 'rich', 'pynvml', 'amdsmi'): sys.modules[name] = None\n"
         "sys.argv = ['raybridge'] + sys.argv[1:]\n"
         "runpy.run_module('raybridge', run_name='__main__', alter_sys=True)\n")


def _pending_pod(name: str, fraction: str, since: datetime) -> dict[str, Any]:
    pod = fraction_pod(name, WORK, fraction=fraction, cpu="1", memory="2Gi")
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ"), "message": "0/1 nodes are available"}]}
    return pod


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def _wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(1.0)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _full_pod(i: int) -> dict[str, Any]:
    """The running pod that holds node gpu-`i`'s 8 GPUs (bound: kwok runs it)."""
    requests = {"nvidia.com/gpu": "8"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"full-{i}", "namespace": WORK},
            "spec": {"nodeName": f"gpu-{i}", "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}}  # fmt: skip


def run(pods: int, nodes: int, changes: int, timeout: float) -> dict[str, Any]:
    from testcluster.client import ClusterClient
    from testcluster.stack import Stack, StackOptions

    rng = random.Random(16)
    since = datetime.now(timezone.utc) - timedelta(seconds=60)
    started_stack = time.monotonic()
    with Stack(StackOptions(operators=(), nodes=[h100_node(f"gpu-{i}", 8) for i in range(nodes)], progress=_say)) as stack:
        _say(f"stack with {nodes} nodes ready in {time.monotonic() - started_stack:.0f} s")
        client = ClusterClient(stack.kubeconfig)
        stack.apply([
            *({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in (WORK, consts.DEFAULT_NAMESPACE)),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS},
             "value": -1, "preemptionPolicy": "Never"},
        ])  # fmt: skip
        _wait(lambda: client.get_object("v1", "ServiceAccount", "default", WORK) is not None, 60, f"namespace {WORK}'s ServiceAccount")
        for i in range(nodes):
            client.create_object(_full_pod(i))

        def running() -> int:
            return sum(1 for p in client.list_objects("v1", "Pod", WORK) if (p.get("status") or {}).get("phase") == "Running")

        _wait(lambda: running() >= nodes, timeout, f"kwok to run the {nodes} pods that fill the nodes")
        burst = [_pending_pod(f"p-{i}", rng.choice(FRACTIONS), since) for i in range(pods)]
        settings = AdjusterSettings(grace_period_seconds=0.0, node_gpus=8)
        expected = len(plan_placeholders([*burst, *client.list_objects("v1", "Pod", WORK)], client.list_objects("v1", "Node"),
                                         settings, datetime.now(timezone.utc)).placeholders)
        first = time.monotonic()
        for pod in burst:
            client.create_object(pod)  # and its status, through the status subresource
        burst_seconds = time.monotonic() - first
        port = free_port()
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", _SLIM, "adjuster", "run", "--kubeconfig", str(stack.kubeconfig), "--grace-period", "0",
                                 "--node-gpus", "8", "--leader-election", "false", "--metrics-port", str(port)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(lambda: _ready(port), timeout, "the controller ready")
            ready = time.monotonic()

            def created() -> int:
                return len(client.list_objects("v1", "Pod", consts.DEFAULT_NAMESPACE, label_selector=consts.PLACEHOLDER_SELECTOR))

            _wait(lambda: created() >= expected, timeout, f"{expected} placeholders")
            done = time.monotonic()
            passes: list[float] = []
            for i in range(changes):
                count = _metric(port, "raybridge_adjuster_reconcile_duration_seconds_count")
                total = _metric(port, "raybridge_adjuster_reconcile_duration_seconds_sum")
                client.create_object(_pending_pod(f"change-{i}", rng.choice(FRACTIONS), since))
                _wait(lambda: _metric(port, "raybridge_adjuster_reconcile_duration_seconds_count") > count, 600, "a reconcile")
                new_count = _metric(port, "raybridge_adjuster_reconcile_duration_seconds_count")
                passes.append((_metric(port, "raybridge_adjuster_reconcile_duration_seconds_sum") - total) / (new_count - count))
            peak = _peak_rss_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(60)
        # The decision alone (no API calls), on the final state: what each pass computes before it acts.
        all_pods, all_nodes = client.list_objects("v1", "Pod"), client.list_objects("v1", "Node")
        client.close()
        decisions = []
        for _ in range(3):
            tick = time.perf_counter()
            decide(ClusterSnapshot.read(all_pods, all_nodes, datetime.now(timezone.utc)), RunSettings(planner=settings))
            decisions.append(time.perf_counter() - tick)
    return {
        "pods": pods, "nodes": nodes, "placeholders": expected,
        "burst_created_seconds": round(burst_seconds, 1),
        "start_to_ready_seconds": round(ready - started, 1),
        "ready_to_placeholders_seconds": round(done - ready, 1),
        "controller_peak_rss_mib": round(peak, 1),
        "reconcile_pass_after_a_change_mean_seconds": round(sum(passes) / len(passes), 3) if passes else None,
        "reconcile_pass_after_a_change_max_seconds": round(max(passes), 3) if passes else None,
        "decision_alone_seconds": round(min(decisions), 3),
    }


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args.pods, args.nodes, args.changes, args.timeout)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
