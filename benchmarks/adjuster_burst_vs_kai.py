"""A burst of pending fractional-GPU pods -> all of them running: raybridge's adjuster against KAI's rule.

Both run against the same cluster, one scenario at a time, from an empty GPU pool: testcluster's real
kube-apiserver, kube-scheduler and kwok (every node's kubelet), with the controllers that cannot be built here
simulated as its clients (tests/sims_on_real_api.py): kubesim/sim_gpu.py's KAI scheduler and binder with its
reservation pods, and sim_autoscaler.py's cluster autoscaler with its expendable cutoff of -10, a system node
with CPU and memory beside the GPU pool. The placeholders run at the shipped PriorityClass (-1,
configs/adjuster/) and exit at once, as KAI's rule's scaling pods do (kwok Stages):

* raybridge: `raybridge.adjuster.Controller` (placeholders, exact packing, no cooldown);
* KAI: a loop that runs `kai/node_scale_adjuster.kai_pass` (one `Adjust()` of KAI's node-scale-adjuster)
  on every change and creates/deletes its scaling pods as KAI does, with its 60 s cooldown after a
  deletion.

The autoscaler looks at unschedulable pods every 10 s (the cluster autoscaler's default
--scan-interval) and adds the nodes it decides on 90 s later.

Time is scaled: 1 s of wall time stands for `--scale` seconds (default 100), so KAI's 60 s cooldown
is 0.6 s, a 90 s node provisioning 0.9 s, raybridge's 1 s / 10 s batch window 0.01 s / 0.1 s (pods' timestamps
are whole wall seconds, so at this scale the window waits only for pods KAI has not looked at). The real programs
are not scaled: what kube-scheduler and kwok take (tens of milliseconds a pod) counts `--scale` times. The table
gives the time from the burst to all pods running (a watch of every pod), the GPUs asked for (every placeholder or
scaling pod created) and the nodes added, in simulated seconds.

    python benchmarks/adjuster_burst_vs_kai.py [--scale 100] [--provisioning 90] [--timeout 1800]

Run it on a quiet machine: at this scale a busy CPU adds whole simulated minutes to both sides. It needs the test
cluster's programs (Go and the Go module proxy, or the built binaries in testcluster's cache).

`--stack real` runs the same scenarios on the real programs instead (benchmarks/adjuster_burst_real.py: the real
KAI scheduler and Karpenter of testcluster/, and KAI's own node-scale-adjuster binary rather than a loop of its
rule), in wall seconds, `--runs` times each with the medians. `--scenario NAME` (repeatable) runs only those
scenarios, in either mode.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raybridge.adjuster.decision import consts  # noqa: E402
from raybridge.adjuster.controller import Controller  # noqa: E402
from raybridge.adjuster.decision.settings import RunSettings  # noqa: E402
from raybridge.core.consts import ADJUSTER_DEFAULT_GRACE_SECONDS  # noqa: E402
from raybridge.kai.names import KAI_COOLDOWN_SECONDS, KAI_GPU_MEMORY_LABEL, KAI_SCALING_POD_NAME_LABEL, KAI_SCALING_POD_NAMESPACE_LABEL  # noqa: E402
from raybridge.adjuster.decision.demand import AdjusterSettings  # noqa: E402
from raybridge.kai.node_scale_adjuster import kai_pass  # noqa: E402
from raybridge.kube.client import Kube  # noqa: E402
from kubesim.sim_gpu import RESERVATION_NAMESPACE, GpuSim, fraction_pod  # noqa: E402

WORK = "work"
KAI_NS = "kai-scale-adjust"
#: The cluster autoscaler looks at unschedulable pods this often (its --scan-interval default).
CA_SCAN_SECONDS = 10.0


@dataclass(frozen=True)
class Scenario:
    name: str
    pods: list[dict[str, Any]]


def scenarios() -> list[Scenario]:
    return [
        Scenario("40 pods x 0.5 GPU", [fraction_pod(f"half-{i}", WORK, fraction="0.5") for i in range(40)]),
        Scenario("30 pods x 0.6 GPU", [fraction_pod(f"six-{i}", WORK, fraction="0.6") for i in range(30)]),
        Scenario("20 pods x 40 GiB of 80 GiB", [fraction_pod(f"mem-{i}", WORK, memory_mib=40960) for i in range(20)]),
        Scenario("8 pods x 2 devices x 0.5", [fraction_pod(f"multi-{i}", WORK, fraction="0.5", devices=2) for i in range(8)]),
    ]


class KaiLoop:
    """KAI's node-scale-adjuster: one kai_pass per tick, its scaling pods created and deleted for real."""

    def __init__(self, client: Any, cooldown: float, interval: float = 0.02) -> None:
        from kubernetes import client as k8s

        # Through HTTP and the official client, as the controller it is compared with.
        self.api_client = client.api_client(retries=False)
        self.core = k8s.CoreV1Api(self.api_client)
        self.cooldown = cooldown
        self.interval = interval
        self.last_delete = -1e9
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "KaiLoop":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        self.api_client.close()

    def _run(self) -> None:
        from testcluster.kai import SCALING_POD_APP

        while not self.stop.wait(self.interval):
            pods = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False, _request_timeout=10).data)["items"]
            cooling = time.monotonic() - self.last_delete < self.cooldown
            result = kai_pass(pods, "kai-scheduler", 0.1, KAI_NS, in_cooldown=cooling, cooldown_seconds=self.cooldown)
            for name, _ in result.deleted:
                try:
                    self.core.delete_namespaced_pod(name, KAI_NS, _preload_content=False, _request_timeout=10)
                except Exception:  # noqa: BLE001 - gone already
                    pass
                self.last_delete = time.monotonic()
            for scaling in result.created:
                namespace, name = scaling.target.split("/", 1)
                spec: dict[str, Any] = {
                    "restartPolicy": "Never",
                    "containers": [{"name": "scaling", "image": "busybox", "command": ["/bin/true"],
                                    "resources": {"requests": {"nvidia.com/gpu": str(scaling.devices)},
                                                  "limits": {"nvidia.com/gpu": str(scaling.devices)}}}],
                }
                if scaling.node_selector:
                    spec["nodeSelector"] = dict(scaling.node_selector)
                labels = {"app": SCALING_POD_APP, KAI_SCALING_POD_NAME_LABEL: name, KAI_SCALING_POD_NAMESPACE_LABEL: namespace}
                self.core.create_namespaced_pod(KAI_NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": scaling.name, "namespace": KAI_NS, "labels": labels}, "spec": spec}, _preload_content=False, _request_timeout=10)


def start_stack() -> Any:
    """The real API server, kube-scheduler and kwok; cluster-autoscaler's ProvisioningRequest CRD (the simulated
    autoscaler reads its requests) and KAI's CRDs (raybridge reads PodGroups, as on a KAI cluster); placeholders and scaling pods exit at once (kwok Stages); the namespaces, KAI's
    reservation service account (the API server refuses a pod whose service account is missing) and raybridge's
    PriorityClass."""
    from adjuster_burst_real import _say, placeholder_stages
    from testcluster.kai import scaling_pod_stage
    from testcluster.stack import Stack, StackOptions

    options = StackOptions(operators=(), crds_only=("autoscaler", "kai"), stages=[*placeholder_stages(), scaling_pod_stage()], progress=_say)
    stack = Stack(options).start()
    try:
        stack.apply([
            *({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in (WORK, KAI_NS, consts.DEFAULT_NAMESPACE, RESERVATION_NAMESPACE)),
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": RESERVATION_NAMESPACE, "namespace": RESERVATION_NAMESPACE}},
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS},
             "value": -1, "preemptionPolicy": "Never"},
        ])  # fmt: skip
    except BaseException:
        stack.stop()
        raise
    return stack


def clean_up(client: Any, timeout: float = 120.0) -> None:
    """Back to an empty GPU pool: every pod of the run's namespaces and the nodes the autoscaler added, gone."""
    from kubernetes import client as k8s

    from testcluster.processes import wait_until

    namespaces = (WORK, KAI_NS, consts.DEFAULT_NAMESPACE, RESERVATION_NAMESPACE)
    api = client.api_client()
    try:
        core = k8s.CoreV1Api(api)
        for namespace in namespaces:
            core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        for node in client.list_objects("v1", "Node"):
            if node["metadata"]["name"].startswith("sim-gpu-node-"):
                client.delete_object("v1", "Node", node["metadata"]["name"])

        def empty() -> bool:
            pods = any(client.list_objects("v1", "Pod", namespace) for namespace in namespaces)
            return not pods and not any(n["metadata"]["name"].startswith("sim-gpu-node-") for n in client.list_objects("v1", "Node"))

        wait_until(empty, timeout, "the run's pods and the autoscaler's nodes gone")
    finally:
        api.close()


def run_one(client: Any, scenario: Scenario, policy: str, scale: float, provisioning: float, timeout: float, run: int = 0) -> dict[str, Any]:
    """One burst from an empty GPU pool with `policy`'s side running; its pods named for `run` (kube-controller-
    manager's pod GC, acting late on a deleted pod, could mark a new pod of the same name Failed)."""
    from adjuster_burst_real import PodLog

    from tests.sims_on_real_api import RealApi

    pods = [{**pod, "metadata": {**pod["metadata"], "name": f"{pod['metadata']['name']}-r{run}"}} for pod in scenario.pods]
    api_client = client.api_client(retries=False)
    try:
        # The node group's template carries the GPU memory label its nodes have (a scaled-from-zero group's template has
        # only the labels it is given, e.g. an ASG's tags): placeholders for gpu-memory pods require it.
        with PodLog(api_client) as log, GpuSim(RealApi(client), provisioning_delay=provisioning / scale, node_gpus=8, interval=1.0 / scale,
                                               scan_interval=CA_SCAN_SECONDS / scale, node_labels={KAI_GPU_MEMORY_LABEL: "81559"}) as sim:
            deadline = time.monotonic() + 30
            while not log.listed and time.monotonic() < deadline:
                time.sleep(0.01)
            # Each side is running before the burst, as in a cluster (the controller's informers synced, a pass made).
            if policy == "raybridge":
                settings = RunSettings(planner=AdjusterSettings(grace_period_seconds=ADJUSTER_DEFAULT_GRACE_SECONDS / scale, node_gpus=8),
                                       batch_idle=consts.DEFAULT_BATCH_IDLE_SECONDS / scale, batch_max=consts.DEFAULT_BATCH_MAX_SECONDS / scale,
                                       provision_timeout=300 / scale * 10, resync=0.05, debounce=0.02,
                                       leader_election=False, metrics_port=0)
                kube = Kube(api_client, settings.namespace, False, request_timeout=settings.request_timeout)
                controller = Controller(settings, kube)
                thread = threading.Thread(target=controller.run, daemon=True)
                thread.start()
                stop: Callable[[], None] = lambda: (controller.stop.set(), thread.join(10))  # noqa: E731
                ready = time.monotonic() + 30
                while controller.passes < 1 and time.monotonic() < ready:
                    time.sleep(0.01)
            else:
                kai = KaiLoop(client, cooldown=KAI_COOLDOWN_SECONDS / scale).__enter__()
                stop = lambda: kai.__exit__()  # noqa: E731
            started = time.monotonic()
            for pod in pods:
                client.create_object(pod)
            done = None
            try:
                while time.monotonic() - started < timeout / scale:
                    if len(log.running) == len(pods):
                        done = max(log.running.values()) - started
                        break
                    time.sleep(0.02)
            finally:
                stop()
            errors = list(sim.errors)
        if errors:
            print(f"{scenario.name}, {policy}: the simulation failed: {errors[:3]}", file=sys.stderr, flush=True)
        return {
            "scenario": scenario.name,
            "policy": policy,
            "seconds": None if done is None else round(done * scale),
            "asked": sum(log.asked.values()),
            "nodes": len(sim.added_nodes),
        }
    finally:
        api_client.close()
        clean_up(client)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=("sim", "real"), default="sim",
                        help="sim: the simulated autoscaler and KAI on the real API server (default); real: testcluster's "
                             "real KAI and Karpenter (adjuster_burst_real.py)")
    parser.add_argument("--scale", type=float, default=100.0, help="sim: simulated seconds per wall second")
    parser.add_argument("--provisioning", type=float, default=90.0, help="sim: simulated seconds a new node takes")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds before a run is given up (sim: simulated, default 1800; real: wall, default 400)")
    parser.add_argument("--runs", type=int, default=2, help="real: runs per scenario and side (the table gives the median)")
    parser.add_argument("--scenario", action="append", default=None, metavar="NAME", help="only this scenario (repeatable)")
    args = parser.parse_args(argv)
    chosen = scenarios()
    if args.scenario:
        unknown = sorted(set(args.scenario) - {s.name for s in chosen})
        if unknown:
            parser.error(f"no scenario {', '.join(map(repr, unknown))}; there are: {', '.join(repr(s.name) for s in chosen)}")
        chosen = [s for s in chosen if s.name in args.scenario]
    if args.stack == "real":
        if args.runs < 1:
            parser.error("--runs must be at least 1")
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import adjuster_burst_real

        adjuster_burst_real.run_real(chosen, args.runs, 400.0 if args.timeout is None else args.timeout)
        return 0
    args.timeout = 1800.0 if args.timeout is None else args.timeout
    from testcluster.client import ClusterClient

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    stack = start_stack()
    client = ClusterClient(stack.kubeconfig)
    try:
        print("| scenario | policy | burst -> all running (s) | GPUs asked | nodes added |")
        print("|---|---|---|---|---|")
        for run, (scenario, policy) in enumerate((s, p) for s in chosen for p in ("raybridge", "kai")):
            row = run_one(client, scenario, policy, args.scale, args.provisioning, args.timeout, run)
            seconds = row["seconds"] if row["seconds"] is not None else f"> {int(args.timeout)}"
            print(f"| {row['scenario']} | {row['policy']} | {seconds} | {row['asked']} | {row['nodes']} |", flush=True)
    finally:
        client.close()
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
