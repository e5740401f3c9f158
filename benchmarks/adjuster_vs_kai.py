"""raybridge's node-scale-adjuster against KAI's rule, on the same seeded traces, in a simulated cluster.

Both policies run the real planning code (`plan_placeholders` and `kai_pass`)
on Pod and Node JSON built from the simulation, round after round:

* a trace: bursts of fractional pods (mixed fractions, multi-device,
  gpu-memory of several sizes, NVIDIA node pools with selectors and taints: KAI
  shares no AMD GPU), arriving at given times; every pool starts with one node whose GPUs
  other work fills, so the planner knows each pool's shape but no pod fits;
* a scheduler (KAI's, simplified) that places pending pods, in arrival order, into free slices:
  `devices` distinct GPUs of one Ready node of its pool with room for its
  fraction (a gpu-memory pod's fraction of that node's GPU memory floored to
  100 MiB, as KAI reads it), best fit; a pod that
  does not fit is marked PodScheduled=False/Unschedulable at that time;
* placeholder pods bound by the default scheduler onto whole free GPUs of a
  matching node; they exit at once (Succeeded), as KAI's scaling pod does;
* a cluster autoscaler that, for pending placeholders, adds 8-GPU nodes of the
  pool whose vendor key, labels and taints match, packing the placeholders into
  new nodes first-fit as its estimator does; the nodes are Ready after a
  provisioning delay and the placeholders waiting for them bind there first;
* raybridge's policy: its controller's own decision, `adjuster/decision/reconcile.reconcile`
  (which calls `plan_placeholders`), on every change, every 30 s and when a
  pod's 10 s grace period ends, as the controller reconciles: a placeholder
  waiting for a node keeps covering its pods (and, in the room its whole GPUs
  leave, later pods of its group); one that landed covers the pods the room
  left on its node holds until they land or the provision timeout passes; only
  pods nothing covers are planned anew, and the placeholders created and
  deleted are what the controller would create and delete;
* KAI's policy: one `Adjust()` pass per reconcile with its scaling pods, a 60 s
  cooldown after any deletion, no grace period.

Reported per policy: GPUs provisioned against the lower bound on the optimum
(exact packing of every pod of a pool into 8-GPU nodes), scale-up rounds
(the autoscaler adding nodes; additions less than a minute apart are one round), time until every pod runs, pods
never placed, pod-hours waited and idle GPU-hours (new GPUs not used by pods,
up to the same horizon for both). Seeded and deterministic.

    python benchmarks/adjuster_vs_kai.py [--seeds 3] [--delay 120] [--markdown] [--per-seed]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raybridge.adjuster.decision.consts import DEFAULT_PROVISION_TIMEOUT_SECONDS  # noqa: E402
from raybridge.adjuster.decision.plan import AdjusterSettings  # noqa: E402
from raybridge.kai.node_scale_adjuster import kai_pass  # noqa: E402
from raybridge.adjuster.decision.packing import PackItem, pack  # noqa: E402
from raybridge.core.placement import matches_node_selector, untolerated_taints  # noqa: E402
from raybridge.adjuster.decision.placeholders import PENDING, PROVIDED, ExistingPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile

EPOCH = datetime(2025, 6, 1, tzinfo=timezone.utc)
#: What a node has beside its GPUs: enough that CPU never decides here (each pod asks for 1 CPU), as on an H100 node.
NODE_CPU, NODE_MEMORY = "192", "2Ti"
NODE_GPUS = 8
TICK = 5  # seconds
RECONCILE_EVERY = 30  # seconds, besides every change and every grace period's end
GRACE = 10  # seconds: the grace period these traces were measured with (`adjuster run` now has none, and a batch window this model does not play)
SCALE_NS = "kai-scale-adjust"


@dataclass(frozen=True)
class Pool:
    name: str
    vendor: str
    memory_mib: int
    taint: Optional[dict[str, str]] = None

    @property
    def resource_key(self) -> str:
        return {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}[self.vendor]

    @property
    def labels(self) -> dict[str, str]:
        memory_label = "amd.com/gpu.vram" if self.vendor == "amd" else "nvidia.com/gpu.memory"
        memory = f"{self.memory_mib // 1024}G" if self.vendor == "amd" else str(self.memory_mib)
        return {"pool": self.name, memory_label: memory}


POOLS = {
    "h100": Pool("h100", "nvidia", 81559),
    "a100": Pool("a100", "nvidia", 40960, {"key": "spot", "value": "true", "effect": "NoSchedule"}),
    "mi300x": Pool("mi300x", "amd", 196608, {"key": "amd.com/gpu", "effect": "NoSchedule"}),
}


@dataclass
class SimPod:
    name: str
    pool: Pool
    devices: int
    arrival: float
    fraction: Optional[Fraction] = None  # gpu-fraction, or None for a gpu-memory pod
    memory_mib: Optional[int] = None
    unschedulable_since: Optional[float] = None
    node: Optional["SimNode"] = None
    started: Optional[float] = None

    @property
    def key(self) -> str:
        return f"team/{self.name}"

    def size_on(self, node: "SimNode") -> Fraction:
        """Its share of a GPU as KAI fits it: gpu-memory against the GPU's memory floored to 100 MiB (node_info.go)."""
        if self.fraction is not None:
            return self.fraction
        return Fraction(self.memory_mib or 0, node.pool.memory_mib - node.pool.memory_mib % 100)

    def tolerations(self) -> list[dict[str, str]]:
        t = self.pool.taint
        return [{"key": t["key"], "operator": "Exists", "effect": t["effect"]}] if t else []

    def to_json(self) -> dict[str, Any]:
        annotations = {"gpu-fraction": str(self.fraction)} if self.fraction is not None else {"gpu-memory": str(self.memory_mib)}
        if self.fraction is not None:
            annotations["gpu-fraction"] = _decimal(self.fraction)
        if self.devices > 1:
            annotations["gpu-fraction-num-devices"] = str(self.devices)
        spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "nodeSelector": {"pool": self.pool.name}, "tolerations": self.tolerations(),
                                "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}  # fmt: skip
        status: dict[str, Any] = {"phase": "Pending"}
        if self.node is not None:
            spec["nodeName"] = self.node.name
            status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
        elif self.unschedulable_since is not None:
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "lastTransitionTime": _stamp(self.unschedulable_since)}]  # fmt: skip
        metadata = {"name": self.name, "namespace": "team", "annotations": annotations, "creationTimestamp": _stamp(self.arrival)}
        return {"metadata": metadata, "spec": spec, "status": status}


@dataclass
class SimNode:
    name: str
    pool: Pool
    ready_at: float
    free: list[Fraction] = field(default_factory=lambda: [Fraction(1)] * NODE_GPUS)
    added: bool = True  # False for the pool's initial node

    def to_json(self) -> dict[str, Any]:
        spec = {"taints": [self.pool.taint]} if self.pool.taint else {}
        return {"metadata": {"name": self.name, "labels": self.pool.labels}, "spec": spec,
                "status": {"allocatable": {self.pool.resource_key: str(NODE_GPUS), "cpu": NODE_CPU, "memory": NODE_MEMORY},
                           "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip


@dataclass
class SimPlaceholder:
    name: str
    gpus: int
    resource_key: str
    node_selector: dict[str, Any]
    tolerations: list[dict[str, Any]]
    pods: tuple[str, ...]
    created: float
    target: Optional[str] = None  # KAI: the pod it stands for
    waiting_for: Optional[SimNode] = None
    landed: Optional[float] = None
    group: Optional[str] = None  # raybridge: the plan's constraint group
    node_name: Optional[str] = None  # the node it landed on

    def matches(self, pool: Pool) -> bool:
        if pool.resource_key != self.resource_key or not matches_node_selector(self.node_selector, pool.labels):
            return False
        return not untolerated_taints([pool.taint] if pool.taint else [], self.tolerations)

    def to_json(self) -> dict[str, Any]:
        target_ns, target_name = (self.target or "/").split("/", 1)
        return {
            "metadata": {"name": self.name, "namespace": SCALE_NS, "labels": {"shared-gpu-pod-name": target_name, "shared-gpu-pod-namespace": target_ns}},
            "spec": {"nodeSelector": self.node_selector, "tolerations": self.tolerations,
                     "containers": [{"name": "scaling-pod", "resources": {"requests": {"nvidia.com/gpu": str(self.gpus)}}}]},
            "status": {"phase": "Succeeded" if self.landed is not None else "Pending"},
        }  # fmt: skip


def _stamp(t: float) -> str:
    return (EPOCH + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _decimal(value: Fraction) -> str:
    return f"{float(value):.6g}"


# --- traces -------------------------------------------------------------------------------------


def trace(name: str, seed: int) -> list[SimPod]:
    rng = random.Random(f"{name}-{seed}")
    pods: list[SimPod] = []

    def add(count: int, at: float, pool: str, kinds: list[tuple[str, Any, int]]) -> None:
        for _ in range(count):
            kind, value, devices = rng.choice(kinds)
            pod = SimPod(f"{pool}-{len(pods)}", POOLS[pool], devices, at + rng.uniform(0, 10))
            if kind == "f":
                pod.fraction = Fraction(value)
            else:
                pod.memory_mib = int(POOLS[pool].memory_mib * Fraction(value))
            pods.append(pod)

    mixed = [("f", "0.1", 1), ("f", "0.25", 1), ("f", "0.33", 1), ("f", "0.5", 1), ("f", "0.6", 1), ("f", "0.75", 1), ("f", "0.5", 2), ("f", "0.3", 4)]
    memory = [("m", "0.2", 1), ("m", "0.45", 1), ("m", "0.7", 1), ("m", "0.95", 1), ("m", "0.5", 2)]
    if name == "one burst, mixed fractions":
        add(120, 0, "h100", mixed)
    elif name == "gpu-memory pods":
        add(60, 0, "h100", memory)
        add(20, 0, "a100", memory)
    elif name == "three bursts, two pools":
        # NVIDIA only: KAI shares no AMD GPU (its reservation pod asks for nvidia.com/gpu), so AMD pods that ask for a
        # share wait whatever nodes come, and raybridge asks for none
        for at in (0, 900, 1800):
            add(40, at, "h100", mixed + memory)
            add(30, at, "a100", mixed)
    else:
        raise ValueError(name)
    return sorted(pods, key=lambda p: (p.arrival, p.name))


TRACES = ("one burst, mixed fractions", "gpu-memory pods", "three bursts, two pools")


# --- the simulation ----------------------------------------------------------------------------


@dataclass
class Result:
    gpus: int
    optimum: int
    rounds: int
    all_running_s: Optional[float]
    never: int
    wait_pod_hours: float
    idle_gpu_hours: float


class Cluster:
    def __init__(self, pods: list[SimPod], policy: str, delay: float) -> None:
        self.pods = pods
        self.policy = policy
        self.delay = delay
        self.nodes: list[SimNode] = []
        for pool in POOLS.values():  # one full node per pool: its shape is known, its GPUs are taken
            self.nodes.append(SimNode(f"{pool.name}-base", pool, 0, [Fraction(0)] * NODE_GPUS, added=False))
        self.placeholders: list[SimPlaceholder] = []
        self.scale_up_times: set[float] = set()
        self.last_kai_deletion: Optional[float] = None
        self.counter = 0
        self.dirty = True

    # scheduler: real pods into slices, best fit
    def schedule_pods(self, t: float) -> None:
        for pod in self.pods:
            if pod.node is not None or pod.arrival > t:
                continue
            best: Optional[tuple[Fraction, SimNode, list[int]]] = None
            for node in self.nodes:
                if node.pool is not pod.pool or node.ready_at > t:
                    continue
                size = pod.size_on(node)
                fits = sorted((node.free[g], g) for g in range(NODE_GPUS) if node.free[g] >= size)
                if len(fits) >= pod.devices:
                    chosen = [g for _, g in fits[: pod.devices]]
                    slack = sum(node.free[g] - size for g in chosen)
                    if best is None or slack < best[0]:
                        best = (slack, node, chosen)
            if best is None:
                if pod.unschedulable_since is None:
                    pod.unschedulable_since = t
                    self.dirty = True
                continue
            _, node, chosen = best
            for g in chosen:
                node.free[g] -= pod.size_on(node)
            pod.node, pod.started = node, t
            self.dirty = True

    # default scheduler: placeholders onto whole free GPUs (those waiting for a new node go there first)
    def schedule_placeholders(self, t: float) -> None:
        for ph in self.placeholders:
            if ph.landed is not None:
                continue
            candidates = [n for n in self.nodes if n.ready_at <= t and ph.matches(n.pool)]
            if ph.waiting_for is not None and ph.waiting_for.ready_at <= t:
                candidates.insert(0, ph.waiting_for)
            for node in candidates:
                if sum(1 for f in node.free if f == 1) >= ph.gpus:
                    ph.landed, ph.node_name = t, node.name  # it exits at once: its GPUs stay free
                    self.dirty = True
                    break

    # cluster autoscaler: pending placeholders -> new nodes of a matching pool, first fit
    def autoscale(self, t: float) -> None:
        upcoming: dict[int, int] = {}  # id(node) -> GPUs promised
        for ph in self.placeholders:
            if ph.landed is None and ph.waiting_for is not None:
                upcoming[id(ph.waiting_for)] = upcoming.get(id(ph.waiting_for), 0) + ph.gpus
        for ph in sorted((p for p in self.placeholders if p.landed is None and p.waiting_for is None), key=lambda p: -p.gpus):
            pools = [pool for pool in POOLS.values() if ph.matches(pool)]
            if not pools or ph.gpus > NODE_GPUS or ph.gpus <= 0:
                continue  # no node group can host it: the autoscaler can do nothing
            pool = pools[0]
            target = next((n for n in self.nodes if n.pool is pool and n.ready_at > t and upcoming.get(id(n), 0) + ph.gpus <= NODE_GPUS), None)
            if target is None:
                target = SimNode(f"{pool.name}-{len(self.nodes)}", pool, t + self.delay)
                self.nodes.append(target)
                self.scale_up_times.add(t)
            ph.waiting_for = target
            upcoming[id(target)] = upcoming.get(id(target), 0) + ph.gpus

    def reconcile(self, t: float) -> None:
        if self.policy == "kai":
            self._reconcile_kai(t)
        else:
            self._reconcile_exact(t)

    def _reconcile_exact(self, t: float) -> None:
        """The controller's decision (`reconcile`) on the cluster as it is now; its creates and deletes applied."""
        now = EPOCH + timedelta(seconds=t)
        existing = [
            ExistingPlaceholder(ph.name, ph.group or "", ph.gpus, PENDING if ph.landed is None else PROVIDED, ph.pods,
                                provided_at=None if ph.landed is None else EPOCH + timedelta(seconds=ph.landed), node=ph.node_name)
            for ph in self.placeholders
        ]  # fmt: skip
        decision = reconcile(
            [p.to_json() for p in self.pods if p.arrival <= t], [n.to_json() for n in self.nodes if n.ready_at <= t], existing,
            AdjusterSettings(), now, provision_timeout_seconds=DEFAULT_PROVISION_TIMEOUT_SECONDS, name_prefix="ph",
        )  # fmt: skip
        gone = {name for name, _ in decision.delete}
        self.placeholders = [ph for ph in self.placeholders if ph.name not in gone]
        for planned in decision.create:
            spec = planned.placeholder
            self.placeholders.append(SimPlaceholder(planned.name, spec.gpus, spec.resource_key, dict(spec.node_selector),
                                                    [dict(x) for x in spec.tolerations], spec.pods, t, group=spec.group))  # fmt: skip

    def _reconcile_kai(self, t: float) -> None:
        in_cooldown = self.last_kai_deletion is not None and t - self.last_kai_deletion < 60
        objects = [p.to_json() for p in self.pods if p.arrival <= t] + [ph.to_json() for ph in self.placeholders]
        result = kai_pass(objects, "kai-scheduler", 0.1, SCALE_NS, in_cooldown=in_cooldown)
        if result.deleted:
            gone = {name for name, _ in result.deleted}
            self.placeholders = [ph for ph in self.placeholders if ph.name not in gone]
            self.last_kai_deletion = t
        for s in result.created:
            self.placeholders.append(SimPlaceholder(s.name, s.devices, "nvidia.com/gpu", dict(s.node_selector), [dict(x) for x in s.tolerations], (s.target,), t, target=s.target))

    def run(self, horizon: float) -> Result:
        t = 0.0
        last_reconcile = -math.inf
        ready_seen = 0
        while t <= horizon:
            ready = sum(1 for n in self.nodes if n.ready_at <= t)
            if ready != ready_seen:
                ready_seen, self.dirty = ready, True
            # a pod whose grace period ends now becomes demand now: the controller requeues for that moment
            if any(p.node is None and p.unschedulable_since is not None and t - TICK < p.unschedulable_since + GRACE <= t for p in self.pods):
                self.dirty = True
            self.schedule_placeholders(t)
            self.schedule_pods(t)
            if self.dirty or t - last_reconcile >= RECONCILE_EVERY:
                self.dirty = False
                self.reconcile(t)
                last_reconcile = t
            self.schedule_placeholders(t)
            self.autoscale(t)
            if all(p.node is not None for p in self.pods) and all(n.ready_at <= t for n in self.nodes):
                break
            t += TICK
        return self.result(horizon)

    def result(self, horizon: float) -> Result:
        added = [n for n in self.nodes if n.added]
        running = [p for p in self.pods if p.started is not None]
        all_running = max(p.started for p in running) if len(running) == len(self.pods) else None
        wait = sum(((p.started if p.started is not None else horizon) - p.arrival) for p in self.pods) / 3600
        idle = 0.0
        for node in added:
            if node.ready_at > horizon:
                continue
            # after the last pod lands nothing changes: the free capacity now is the free capacity to the horizon
            idle += float(sum(node.free)) * (horizon - max(node.ready_at, _last_change(self.pods, node))) / 3600
            idle += _idle_while_filling(self.pods, node) / 3600
        return Result(len(added) * NODE_GPUS, optimum(self.pods), waves(self.scale_up_times), all_running, len(self.pods) - len(running), wait, idle)


def waves(times: set[float]) -> int:
    """Scale-up rounds: scale-ups less than a minute after the previous one belong to its round."""
    count, last = 0, -math.inf
    for t in sorted(times):
        if t - last > 60:
            count += 1
        last = t
    return count


def _last_change(pods: list[SimPod], node: SimNode) -> float:
    starts = [p.started for p in pods if p.node is node and p.started is not None]
    return max(starts, default=node.ready_at)


def _idle_while_filling(pods: list[SimPod], node: SimNode) -> float:
    """GPU-seconds free on `node` between its ready time and its last pod landing."""
    events = sorted((p.started, p.size_on(node) * p.devices) for p in pods if p.node is node and p.started is not None)
    free, t, total = Fraction(NODE_GPUS), node.ready_at, 0.0
    for at, used in events:
        total += float(free) * (at - t)
        free -= used
        t = at
    return total


def optimum(pods: list[SimPod]) -> int:
    """A lower bound on the GPUs any adjuster must add: per pool, the exact packing bound in 8-GPU nodes."""
    gpus = 0
    for pool in POOLS.values():
        probe = SimNode("probe", pool, 0)
        items = [PackItem(p.key, p.size_on(probe), p.devices) for p in pods if p.pool is pool]
        if items:
            packing = pack(items, NODE_GPUS, budget=20_000)
            gpus += NODE_GPUS * math.ceil(packing.lower_bound / NODE_GPUS)
    return gpus


def simulate(name: str, seed: int, policy: str, delay: float) -> Result:
    pods = trace(name, seed)
    horizon = max(p.arrival for p in pods) + 4 * 3600
    return Cluster(pods, policy, delay).run(horizon)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=120, help="node provisioning delay in seconds (default 120)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (default: aligned columns)")
    parser.add_argument("--per-seed", action="store_true", help="one row per seed instead of sums over the seeds")
    args = parser.parse_args()
    if args.seeds < 1 or not math.isfinite(args.delay) or args.delay < 0:
        parser.error("--seeds must be at least 1 and --delay a number of seconds >= 0")
    print(f"seeds 1..{args.seeds}, provisioning delay {args.delay:g} s, 8-GPU nodes; " + ("per seed" if args.per_seed else "sums over the seeds (time: the mean)") + "\n")
    header = ("trace", "policy", "GPUs added", "lower bound on the optimum", "scale-up rounds", "all pods running after",
              "pods never placed", "pod-hours waited", "idle GPU-hours")  # fmt: skip
    rows = []
    for name in TRACES:
        for policy, label in (("exact", "raybridge (exact)"), ("kai", "KAI rule")):
            results = [simulate(name, seed, policy, args.delay) for seed in range(1, args.seeds + 1)]
            batches = [([r], f"{name} (seed {seed})") for seed, r in enumerate(results, 1)] if args.per_seed else [(results, name)]
            for batch, title in batches:
                times = [r.all_running_s for r in batch if r.all_running_s is not None]
                when = f"{sum(times) / len(times) / 60:.1f} min" if len(times) == len(batch) else f"never in {len(batch) - len(times)} of {len(batch)} runs"
                rows.append((title, label, sum(r.gpus for r in batch), sum(r.optimum for r in batch), sum(r.rounds for r in batch), when,
                             sum(r.never for r in batch), f"{sum(r.wait_pod_hours for r in batch):.1f}", f"{sum(r.idle_gpu_hours for r in batch):.1f}"))  # fmt: skip
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(str(c) for c in row) + " |")
    else:
        widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
        for row in (header, *rows):
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
