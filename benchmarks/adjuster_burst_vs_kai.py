"""A burst of pending fractional-GPU pods -> all of them running: raybridge's adjuster against KAI's rule.

Both run against the same simulation (the test API server, kubesim/sim_gpu.py's kube-scheduler,
KAI scheduler and binder with its reservation pods, kubelet, and sim_autoscaler.py's cluster autoscaler with
its expendable cutoff of -10, a system node with CPU and memory beside the GPU pool), one scenario at a
time, from an empty GPU pool. The placeholders run at the shipped PriorityClass (-1, configs/adjuster/):

* raybridge: `raybridge.adjuster.Controller` (placeholders, exact packing, no cooldown);
* KAI: a loop that runs `kai/node_scale_adjuster.kai_pass` (one `Adjust()` of KAI's node-scale-adjuster)
  on every change and creates/deletes its scaling pods as KAI does, with its 60 s cooldown after a
  deletion.

The autoscaler looks at unschedulable pods every 10 s (the cluster autoscaler's default
--scan-interval) and adds the nodes it decides on 90 s later.

Time is scaled: 1 s of wall time stands for `--scale` seconds (default 100), so KAI's 60 s cooldown
is 0.6 s, a 90 s node provisioning 0.9 s, raybridge's 1 s / 10 s batch window 0.01 s / 0.1 s (pods' timestamps
are whole wall seconds, so at this scale the window waits only for pods KAI has not looked at). The table gives the
time from the burst to all pods running, the GPUs asked for and the nodes added, in simulated
seconds.

    python benchmarks/adjuster_burst_vs_kai.py [--scale 100] [--provisioning 90] [--timeout 1800]

Run it on a quiet machine: at this scale a busy CPU adds whole simulated minutes to both sides.

`--stack real` runs the same scenarios on the real programs instead (benchmarks/adjuster_burst_real.py: the real
KAI scheduler and Karpenter of testcluster/, and KAI's own node-scale-adjuster binary rather than a loop of its
rule), in wall seconds, `--runs` times each with the medians; it needs Go and the Go module proxy (or the built
binaries in testcluster's cache). `--scenario NAME` (repeatable) runs only those scenarios, in either mode.
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
from kubesim.server import KubeApiServer  # noqa: E402
from kubesim.sim_gpu import GpuSim, fraction_pod  # noqa: E402

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

    def __init__(self, server: KubeApiServer, cooldown: float, interval: float = 0.02) -> None:
        from kubernetes import client

        self.server = server
        # Through HTTP and the official client, as the controller it is compared with.
        self.core = client.CoreV1Api(server.api_client(retries=False))
        self.cooldown = cooldown
        self.interval = interval
        self.last_delete = -1e9
        self.asked = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "KaiLoop":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)

    def _run(self) -> None:
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
                self.core.create_namespaced_pod(KAI_NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": scaling.name, "namespace": KAI_NS,
                    "labels": {KAI_SCALING_POD_NAME_LABEL: name, KAI_SCALING_POD_NAMESPACE_LABEL: namespace}}, "spec": spec},
                    _preload_content=False, _request_timeout=10)
                self.asked += scaling.devices


def run_one(scenario: Scenario, policy: str, scale: float, provisioning: float, timeout: float) -> dict[str, Any]:
    with KubeApiServer() as server:
        for ns in (WORK, KAI_NS, consts.DEFAULT_NAMESPACE):
            server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        server.create_object({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS}, "value": -1, "preemptionPolicy": "Never"})
        asked: list[int] = []

        def hook(obj: dict[str, Any], operation: str) -> None:
            labels = obj.get("metadata", {}).get("labels") or {}
            if operation == "CREATE" and consts.GPUS_LABEL in labels:
                asked.append(int(labels[consts.GPUS_LABEL]))

        server.add_mutating_hook("", "Pod", hook)
        # The node group's template carries the GPU memory label its nodes have (a scaled-from-zero group's template has
        # only the labels it is given, e.g. an ASG's tags): placeholders for gpu-memory pods require it.
        with GpuSim(server, provisioning_delay=provisioning / scale, node_gpus=8, interval=0.02, scan_interval=CA_SCAN_SECONDS / scale,
                    node_labels={KAI_GPU_MEMORY_LABEL: "81559"}) as sim:
            # Each side is running before the burst, as in a cluster (the controller's informers synced, a pass made).
            if policy == "raybridge":
                settings = RunSettings(planner=AdjusterSettings(grace_period_seconds=ADJUSTER_DEFAULT_GRACE_SECONDS / scale, node_gpus=8),
                                       batch_idle=consts.DEFAULT_BATCH_IDLE_SECONDS / scale, batch_max=consts.DEFAULT_BATCH_MAX_SECONDS / scale,
                                       provision_timeout=300 / scale * 10, resync=0.05, debounce=0.02,
                                       leader_election=False, metrics_port=0)
                kube = Kube(server.api_client(retries=False), settings.namespace, False, request_timeout=settings.request_timeout)
                controller = Controller(settings, kube)
                thread = threading.Thread(target=controller.run, daemon=True)
                thread.start()
                stop: Callable[[], None] = lambda: (controller.stop.set(), thread.join(10))  # noqa: E731
                kai: Optional[KaiLoop] = None
            else:
                kai = KaiLoop(server, cooldown=KAI_COOLDOWN_SECONDS / scale).__enter__()
                stop = lambda: kai.__exit__()  # noqa: E731
            if policy == "raybridge":
                ready = time.monotonic() + 30
                while controller.passes < 1 and time.monotonic() < ready:
                    time.sleep(0.01)
            started = time.monotonic()
            for pod in scenario.pods:
                server.create_object(pod)
            done = None
            try:
                while time.monotonic() - started < timeout / scale:
                    running = sum(1 for p in server.list_objects("v1", "Pod", WORK) if p.get("status", {}).get("phase") == "Running")
                    if running == len(scenario.pods):
                        done = time.monotonic() - started
                        break
                    time.sleep(0.02)
            finally:
                stop()
            return {
                "scenario": scenario.name,
                "policy": policy,
                "seconds": None if done is None else round(done * scale),
                "asked": sum(asked) if policy == "raybridge" else (kai.asked if kai else 0),
                "nodes": len(sim.added_nodes),
            }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=("sim", "real"), default="sim",
                        help="sim: the simulated cluster (default); real: testcluster's real programs (adjuster_burst_real.py)")
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
    print("| scenario | policy | burst -> all running (s) | GPUs asked | nodes added |")
    print("|---|---|---|---|---|")
    for scenario in chosen:
        for policy in ("raybridge", "kai"):
            row = run_one(scenario, policy, args.scale, args.provisioning, args.timeout)
            seconds = row["seconds"] if row["seconds"] is not None else f"> {int(args.timeout)}"
            print(f"| {row['scenario']} | {row['policy']} | {seconds} | {row['asked']} | {row['nodes']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
