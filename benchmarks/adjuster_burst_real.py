"""The burst benchmark on the real programs: raybridge's adjuster against KAI's own node-scale-adjuster.

Why: `adjuster_burst_vs_kai.py` judges both on a simulation written from the autoscaler's and KAI's source. Here
the same scenarios run on testcluster's stack of the upstream programs (testcluster/): the real kube-apiserver
and kube-scheduler, KAI scheduler v0.12.0 (scheduler, binder, pod grouper, admission), Karpenter v1.14.1 with its
kwok cloud provider (instance types gpu-4x, gpu-8x and cpu-16x, the cheapest that fits launched), kwok nodes, and
a CPU node `system-0` beside the GPU pool. KAI's binder carries its v0.12.19 fix of the reservation pod race
(kubesim/FIDELITY.md), which the proxy does not serve. The two sides:

* raybridge: `raybridge.adjuster.Controller` in a thread, with the shipped settings (no grace period, the batch
  window, resync 1 s) but `--node-gpus 8` (the largest GPU type), its placeholders at the shipped
  PriorityClass (-1);
* KAI: KAI's node-scale-adjuster itself, the binary built from github.com/NVIDIA/KAI-scheduler v0.12.0
  `cmd/nodescaleadjuster`, started with the flags KAI's operator gives it (`kai.start_node_scale_adjuster`):
  its scaling pods in `kai-scale-adjust`, its 60 s cooldown after a deletion (a constant of the program).

Each scenario, side and run starts from an empty GPU pool (the previous run's pods and NodeClaims deleted, their
nodes gone) with the side's adjuster freshly started. Measured from the first pod of the burst created: the wall
seconds until every pod of the burst is Running (a watch of all pods), the GPUs the side asked for (the GPUs of
every placeholder or scaling pod it created), and the NodeClaims Karpenter made, their instance types and the
launch rounds (NodeClaims more than 5 s apart). Placeholders and scaling pods exit at once, as their images do on
a node (kwok Stages: `testcluster.stack.completing_stage`, `testcluster.kai.scaling_pod_stage`).

What it does not do: no cloud delay. Karpenter's kwok provider creates the Node at once, so nodes come 1 to 2 s
after the decision, not the minutes of a cloud; the times are the adjusters' own delays (raybridge's batch
window, KAI's cooldown) and the rounds each needs, not a production scale-up time. No cluster-autoscaler (the
Go module proxy does not serve it). No pod requests CPU or memory (as in the simulation), so Karpenter sizes
nodes by GPUs alone. Wall time on the machine it runs on, shared with every program of the stack.

    python benchmarks/adjuster_burst_vs_kai.py --stack real [--runs 2] [--scenario NAME] [--timeout 400]
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raybridge.adjuster.decision import consts  # noqa: E402
from raybridge.adjuster.controller import Controller  # noqa: E402
from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings  # noqa: E402
from raybridge.kube.client import Kube  # noqa: E402
from testcluster.processes import wait_until  # noqa: E402

WORK = "work"
#: The leaf queue KAI's chart creates (testcluster/kai.py): the burst's pods name it.
QUEUE = "default-queue"
SIDES = ("raybridge", "kai")
SIDE_NAMES = {"raybridge": "raybridge", "kai": "KAI node-scale-adjuster"}
#: A CPU node beside the GPU pool: the burst's pods (no CPU or memory requests) fit it by their requests, so
#: Karpenter launches nothing for them but for what the adjusters ask.
SYSTEM_NODE_RESOURCES = {"cpu": "16", "memory": "64Gi", "pods": "110"}
#: NodeClaims made this far apart belong to different launch rounds.
ROUND_GAP_SECONDS = 5.0
#: After every pod runs: how long to wait for the side's pending placeholders or scaling pods to go (or get their
#: nodes), so that what Karpenter launches for them is counted.
SETTLE_SECONDS = 30.0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def system_node() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "system-0", "labels": {"kubernetes.io/hostname": "system-0"}},
            "status": {"capacity": SYSTEM_NODE_RESOURCES, "allocatable": SYSTEM_NODE_RESOURCES}}  # fmt: skip


def on_real_stack(pod: dict[str, Any]) -> dict[str, Any]:
    """A scenario's pod as the real KAI takes it: in its chart's queue (the simulation names any queue)."""
    found = copy.deepcopy(pod)
    found["metadata"]["namespace"] = WORK
    found["metadata"].setdefault("labels", {})["kai.scheduler/queue"] = QUEUE
    return found


class PodLog:
    """A watch of every pod: the GPUs of each placeholder or scaling pod created, and when each burst pod was first
    seen Running (monotonic). A broken watch is listed again (a pod seen then counts from that moment)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        from testcluster.kai import SCALE_ADJUST_NAMESPACE

        self.core = client.CoreV1Api(api_client)
        self.scaling_namespace = SCALE_ADJUST_NAMESPACE
        self.asked: dict[str, int] = {}  # pod uid -> GPUs
        self.running: dict[str, float] = {}  # burst pod name -> first seen Running
        self.listed = False  # the first list is in: the watch runs
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PodLog":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(20)

    def _see(self, pod: dict[str, Any], now: float) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        namespace, labels = meta.get("namespace"), meta.get("labels") or {}
        if namespace == consts.DEFAULT_NAMESPACE and consts.GPUS_LABEL in labels:
            self.asked[meta["uid"]] = int(labels[consts.GPUS_LABEL])
        elif namespace == self.scaling_namespace:
            self.asked[meta["uid"]] = sum(int((c.get("resources") or {}).get("requests", {}).get("nvidia.com/gpu", 0))
                                          for c in spec.get("containers") or ())  # fmt: skip
        elif namespace == WORK and status.get("phase") == "Running" and spec.get("nodeName"):
            self.running.setdefault(meta["name"], now)

    def _run(self) -> None:
        from kubernetes.watch.watch import iter_resp_lines

        version: Optional[str] = None
        while not self.stop.is_set():
            try:
                if version is None:
                    listed = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False, _request_timeout=30).data)
                    now = time.monotonic()
                    for pod in listed["items"]:
                        self._see(pod, now)
                    version = listed["metadata"]["resourceVersion"]
                    self.listed = True
                response = self.core.list_pod_for_all_namespaces(
                    watch=True, resource_version=version, allow_watch_bookmarks=True, timeout_seconds=5,
                    _preload_content=False, _request_timeout=30,
                )  # fmt: skip
                try:
                    for line in iter_resp_lines(response):
                        event = json.loads(line)
                        if event["type"] == "ERROR":  # 410 Gone: list again
                            version = None
                            break
                        version = event["object"]["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._see(event["object"], time.monotonic())
                        if self.stop.is_set():
                            break
                finally:
                    response.close()
                    response.release_conn()
            except Exception as exc:  # noqa: BLE001 - a broken watch: list again
                _say(f"pod watch broke ({type(exc).__name__}: {exc}); listing again")
                version = None
                self.stop.wait(0.5)


@contextmanager
def raybridge_side(stack: Any, api_client: Any) -> Iterator[None]:
    """`adjuster run`'s controller in a thread: the shipped settings, 8 GPUs per node, no leader election."""
    settings = RunSettings(planner=AdjusterSettings(node_gpus=8), leader_election=False, metrics_port=0)
    kube = Kube(api_client, settings.namespace, False, request_timeout=settings.request_timeout)
    controller = Controller(settings, kube, clock=lambda: datetime.now(timezone.utc))
    thread = threading.Thread(target=controller.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        controller.stop.set()
        thread.join(30)
        if thread.is_alive():
            raise RuntimeError("raybridge's controller did not stop within 30 s")


@contextmanager
def kai_side(stack: Any, api_client: Any) -> Iterator[None]:
    """KAI's node-scale-adjuster binary, started fresh (no cooldown carried over), stopped after."""
    from testcluster.kai import start_node_scale_adjuster

    process = start_node_scale_adjuster(stack)
    try:
        yield
    finally:
        process.stop()


SIDE_RUNNERS = {"raybridge": raybridge_side, "kai": kai_side}


def _adjuster_namespaces() -> tuple[str, ...]:
    from testcluster.kai import SCALE_ADJUST_NAMESPACE

    return (consts.DEFAULT_NAMESPACE, SCALE_ADJUST_NAMESPACE)


def _claims(custom: Any) -> list[dict[str, Any]]:
    return json.loads(custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", _preload_content=False).data)["items"]


def _pods(core: Any, namespace: str) -> list[dict[str, Any]]:
    return json.loads(core.list_namespaced_pod(namespace, _preload_content=False, _request_timeout=30).data)["items"]


def _gpu_nodes(core: Any) -> list[dict[str, Any]]:
    nodes = json.loads(core.list_node(_preload_content=False).data)["items"]
    return [n for n in nodes if ((n.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu") not in (None, "0")]


def clean_up(core: Any, custom: Any, timeout: float = 180.0) -> None:
    """Back to an empty GPU pool: the burst, the adjusters' pods, KAI's reservation pods and PodGroups, then
    Karpenter's NodeClaims (their nodes go with them); waits until all of it is gone."""
    from testcluster.kai import RESERVATION_NAMESPACE

    namespaces = (WORK, *_adjuster_namespaces(), RESERVATION_NAMESPACE)
    for namespace in namespaces:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    custom.delete_collection_namespaced_custom_object("scheduling.run.ai", "v2alpha2", WORK, "podgroups")
    custom.delete_collection_namespaced_custom_object("scheduling.run.ai", "v1alpha2", WORK, "bindrequests")
    for claim in _claims(custom):
        custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"])

    def empty() -> bool:
        return not _claims(custom) and not _gpu_nodes(core) and not any(_pods(core, ns) for ns in namespaces)

    wait_until(empty, timeout, "the GPU nodes and the run's pods gone")


def _rounds(claims: list[dict[str, Any]]) -> int:
    created = sorted(datetime.fromisoformat(c["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp() for c in claims)
    return sum(1 for i, t in enumerate(created) if i == 0 or t - created[i - 1] > ROUND_GAP_SECONDS)


def run_once(stack: Any, api_client: Any, scenario: Any, side: str, timeout: float) -> dict[str, Any]:
    """One burst from an empty GPU pool with `side`'s adjuster running; the row of the table."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    pods = [on_real_stack(pod) for pod in scenario.pods]
    seconds: Optional[float] = None
    with PodLog(api_client) as log, SIDE_RUNNERS[side](stack, api_client):
        wait_until(lambda: log.listed, 30, "the pod watch's first list")
        started = time.monotonic()
        for pod in pods:
            core.create_namespaced_pod(WORK, pod, _preload_content=False)
        deadline = started + timeout
        while time.monotonic() < deadline:
            if len(log.running) == len(pods):
                seconds = max(log.running.values()) - started
                break
            time.sleep(0.2)
        # What the side still has pending may yet bring nodes: wait for it to go, or for Karpenter to settle.
        settle_until, last, stable_since = time.monotonic() + SETTLE_SECONDS, -1, time.monotonic()
        while time.monotonic() < settle_until:
            pending = any(p.get("status", {}).get("phase") == "Pending" for ns in _adjuster_namespaces() for p in _pods(core, ns))
            count = len(_claims(custom))
            if count != last:
                last, stable_since = count, time.monotonic()
            if not pending and time.monotonic() - stable_since > 3:
                break
            time.sleep(0.5)
    claims = _claims(custom)
    types = sorted((c["metadata"].get("labels") or {}).get("node.kubernetes.io/instance-type", "?") for c in claims)
    return {
        "scenario": scenario.name, "policy": side, "seconds": None if seconds is None else round(seconds, 1),
        "asked": sum(log.asked.values()), "nodes": len(claims), "types": types, "rounds": _rounds(claims),
        "running": len(log.running), "pods": len(pods),
    }  # fmt: skip


def _types_text(types: Sequence[str]) -> str:
    counted: dict[str, int] = {}
    for name in types:
        counted[name] = counted.get(name, 0) + 1
    return ", ".join(f"{n} x {name}" for name, n in sorted(counted.items())) or "none"


def row_text(row: dict[str, Any], timeout: float) -> str:
    seconds = f"{row['seconds']:.1f}" if row["seconds"] is not None else f"> {timeout:.0f} ({row['running']}/{row['pods']} running)"
    return (f"| {row['scenario']} | {SIDE_NAMES[row['policy']]} | {seconds} | {row['asked']} | {row['nodes']} "
            f"({_types_text(row['types'])}) | {row['rounds']} |")  # fmt: skip


def summary(rows: list[dict[str, Any]], timeout: float) -> str:
    """The median per scenario and side (a run that gave up counts as the timeout), each run's seconds beside it."""
    lines = [
        "| scenario | side | burst -> all Running, s (median; each run) | GPUs asked | nodes added (types) | launch rounds |",
        "|---|---|---|---|---|---|",
    ]
    keys = list(dict.fromkeys((r["scenario"], r["policy"]) for r in rows))
    for scenario, side in keys:
        runs = [r for r in rows if r["scenario"] == scenario and r["policy"] == side]
        seconds = [r["seconds"] if r["seconds"] is not None else float("inf") for r in runs]
        median = statistics.median(seconds)
        each = ", ".join(f"{s:.1f}" if s != float("inf") else f">{timeout:.0f}" for s in seconds)
        shown = f"{median:.1f}" if median != float("inf") else f"> {timeout:.0f}"
        asked = "/".join(str(r["asked"]) for r in runs) if len({r["asked"] for r in runs}) > 1 else str(runs[0]["asked"])
        types = {_types_text(r["types"]) for r in runs}
        nodes = " / ".join(f"{r['nodes']} ({_types_text(r['types'])})" for r in runs) if len(types) > 1 else f"{runs[0]['nodes']} ({types.pop()})"
        rounds = "/".join(str(r["rounds"]) for r in runs) if len({r["rounds"] for r in runs}) > 1 else str(runs[0]["rounds"])
        lines.append(f"| {scenario} | {SIDE_NAMES[side]} | {shown} ({each}) | {asked} | {nodes} | {rounds} |")
    return "\n".join(lines)


def placeholder_stages() -> list[dict[str, Any]]:
    """kwok Stages that play the placeholder's container: `true` exits at once; the `sleep` of a placeholder of
    replicas that must not share a host (consts.KEEP_APART_COMMAND) exits after consts.KEEP_APART_SECONDS."""
    from testcluster.stack import completing_stage

    ours = {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE, consts.COMPONENT_LABEL: consts.PLACEHOLDER_COMPONENT}
    keeps_apart = f'.metadata.labels["{consts.KEEP_APART_LABEL}"]'
    at_once = completing_stage("placeholder-exits", ours)
    at_once["spec"]["selector"]["matchExpressions"].append({"key": keeps_apart, "operator": "DoesNotExist"})
    lingering = completing_stage("placeholder-sleeps-then-exits", {**ours, consts.KEEP_APART_LABEL: "true"})
    lingering["spec"]["delay"] = {"durationMilliseconds": int(consts.KEEP_APART_SECONDS * 1000)}
    return [at_once, lingering]


def start_stack(progress: Callable[[str], None] = _say) -> Any:
    """The stack both sides run on: KAI and Karpenter, the CPU node, placeholders and scaling pods that exit at once,
    raybridge's namespace and PriorityClass."""
    from testcluster.kai import scaling_pod_stage
    from testcluster.stack import Stack, StackOptions

    options = StackOptions(operators=("kai", "karpenter"), nodes=[system_node()], stages=[*placeholder_stages(), scaling_pod_stage()],
                           progress=progress)  # fmt: skip
    stack = Stack(options).start()
    try:
        stack.apply([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": consts.DEFAULT_NAMESPACE}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK}},
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": consts.DEFAULT_PRIORITY_CLASS},
             "value": -1, "preemptionPolicy": "Never"},
        ])  # fmt: skip
    except BaseException:
        stack.stop()
        raise
    return stack


def run_real(scenarios: Sequence[Any], runs: int, timeout: float, out: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Every scenario, `runs` times each side (raybridge then KAI, alternating), on one stack; the rows. Prints each
    run's row as it ends, then the medians."""
    started = time.monotonic()
    stack = start_stack()
    _say(f"stack ready in {time.monotonic() - started:.0f} s")
    rows: list[dict[str, Any]] = []
    try:
        api_client = stack.api_client()
        from kubernetes import client

        core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
        out("| scenario | side | burst -> all Running (s) | GPUs asked | nodes added (types) | launch rounds |")
        out("|---|---|---|---|---|---|")
        for scenario in scenarios:
            for _ in range(runs):
                for side in SIDES:
                    try:
                        rows.append(run_once(stack, api_client, scenario, side, timeout))
                        out(row_text(rows[-1], timeout))
                    finally:
                        clean_up(core, custom)
        out("")
        out(f"Median of {runs} run(s) per scenario and side:")
        out("")
        out(summary(rows, timeout))
        api_client.close()
    finally:
        stack.stop()
    return rows
