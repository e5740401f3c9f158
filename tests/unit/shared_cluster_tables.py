"""The tables of the shared-cluster decision test: generated clusters in, every decision the adjuster makes out.

Each table is a cluster of `benchmarks/adjuster_shared_cluster.py` (pending pods over many constraint groups, busy
nodes, pools scaled to zero) and what the adjuster decides on it:

* the offline plan (`plan_placeholders`: placeholders, groups with their packing and proof, ignored pods, notes);
* three passes of the controller (`decide`): the first with no placeholder; the second with those placeholders
  pending, a tenth more pods arrived and one pod in twenty gone; the third with the first third of them bound to
  new nodes made like a node of their group (the nodes the autoscaler brought), the rest still pending.

`record()` writes what the code imported now decides; the frozen file in fixtures/ was written by the code before
the planner was made fast for many groups (issue 41), and `test_adjuster_shared_cluster_decisions.py` checks that
today's code decides the same. Run `python -m tests.unit.shared_cluster_tables` from a tree of the commit whose
decisions are to be frozen to write it again.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from adjuster_shared_cluster import make_cluster  # noqa: E402

FROZEN = Path(__file__).resolve().parent / "fixtures" / "adjuster" / "shared_cluster_decisions.json.gz"
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)

#: (name, constraint groups, pending pods, nodes, seed)
TABLES = (
    ("3-groups", 3, 600, 120, 1),
    ("40-groups", 40, 800, 150, 2),
    ("150-groups", 150, 1000, 200, 3),
    ("400-groups", 400, 1500, 300, 4),
    ("1239-groups-full-size", 1239, 10_000, 2_000, 1),
)


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pass_out(result: Any) -> dict[str, Any]:
    decision = result.decision
    return {
        "create": [{"name": p.name, "placeholder": p.placeholder.to_dict(), "avoid": list(p.placeholder.avoid_nodes)} for p in decision.create],
        "delete": [list(d) for d in decision.delete],
        "keep": list(decision.keep),
        "covered": sorted(decision.covered_pods),
        "providedGpus": decision.provided_gpus,
        "pendingGpus": decision.pending_gpus,
        "held": sorted(decision.held_nodes),
        "notes": list(decision.notes),
        "plan": decision.plan.to_dict(),
    }


def _placeholder_pod(planned: Any, settings: Any, created: datetime) -> dict[str, Any]:
    from raybridge.adjuster.decision.scale_adjuster import placeholder_manifest

    pod = placeholder_manifest(planned, settings)
    pod["metadata"]["creationTimestamp"] = _stamp(created)
    pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                         "lastTransitionTime": _stamp(created)}]}
    return pod


def _node_like(node: dict[str, Any], name: str, created: datetime) -> dict[str, Any]:
    """A new node of the same pool and taints as `node` (what the autoscaler brings for its group)."""
    new = copy.deepcopy(node)
    new["metadata"]["name"] = name
    new["metadata"]["labels"]["kubernetes.io/hostname"] = name
    new["metadata"]["creationTimestamp"] = _stamp(created)
    return new


def decisions(name: str, groups: int, pods: int, nodes: int, seed: int, kept_views: bool = False) -> dict[str, Any]:
    """Every decision on one table (see the module's docstring). `kept_views`: the passes read the pods as the
    controller does, each unchanged object's view kept from the pass before (`adjuster/kept_views.py`); a pod that
    changes is a new object, as in the controller's cache."""
    from raybridge.adjuster.decision.demand import ClusterSnapshot
    from raybridge.adjuster.kept_views import KeptPodViews
    from raybridge.core.views import read_pods
    from raybridge.adjuster.decision.plan import plan_placeholders
    from raybridge.adjuster.decision.scale_adjuster import decide
    from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings
    from raybridge.core.placement import admits

    pod_objects, node_objects = make_cluster(groups, pods, nodes, seed, kubectl=False)
    out: dict[str, Any] = {"plan": plan_placeholders(pod_objects, node_objects, AdjusterSettings(), NOW).to_dict()}
    settings = RunSettings()
    pod_views = KeptPodViews().pods if kept_views else read_pods
    first = decide(ClusterSnapshot.read(pod_objects, node_objects, NOW, pod_views=pod_views), settings)
    out["pass1"] = _pass_out(first)

    rng = random.Random(seed)
    later = NOW + timedelta(seconds=40)
    placeholders = [_placeholder_pod(p, settings, NOW + timedelta(seconds=1)) for p in first.decision.create]
    pending = [p for p in pod_objects if not p["spec"].get("nodeName")]
    gone = {id(p) for p in rng.sample(pending, len(pending) // 20)}
    arrived = []
    for i, pod in enumerate(rng.sample(pending, len(pending) // 10)):
        twin = copy.deepcopy(pod)
        twin["metadata"]["name"] = f"late-{i}-worker"
        twin["metadata"]["uid"] = f"late-{i}"
        twin["metadata"]["creationTimestamp"] = _stamp(NOW + timedelta(seconds=5))
        twin["status"]["conditions"][0]["lastTransitionTime"] = _stamp(NOW + timedelta(seconds=6))
        arrived.append(twin)
    second_pods = [p for p in pod_objects if id(p) not in gone] + arrived + placeholders
    second = decide(ClusterSnapshot.read(second_pods, node_objects, later, pod_views=pod_views), settings)
    out["pass2"] = _pass_out(second)

    # The first third of the placeholders kept or made now got new nodes like one their group may use.
    later = later + timedelta(seconds=60)
    names_now = {p["metadata"]["name"] for p in placeholders}
    third_placeholders = [p for p in placeholders if p["metadata"]["name"] in set(second.decision.keep)]
    third_placeholders += [_placeholder_pod(p, settings, later - timedelta(seconds=50)) for p in second.decision.create
                           if p.name not in names_now]
    new_nodes = []
    for index, placeholder in enumerate(third_placeholders[: len(third_placeholders) // 3]):
        placeholder = third_placeholders[index] = copy.deepcopy(placeholder)  # a pod that changes is a new object
        spec = placeholder["spec"]
        terms = spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        key = next(iter(spec["containers"][0]["resources"]["requests"]))
        like = [n for n in node_objects if key in n["status"]["allocatable"]
                and admits(spec.get("nodeSelector", {}), terms, spec.get("tolerations", []), n["metadata"]["labels"], "", n["spec"].get("taints", []))]
        if not like:
            continue
        node = _node_like(like[0], f"new-{index}", later - timedelta(seconds=20 + index % 40))
        new_nodes.append(node)
        placeholder["spec"]["nodeName"] = node["metadata"]["name"]
        placeholder["status"] = {"phase": "Succeeded", "conditions": [{"type": "PodScheduled", "status": "True",
                                                                        "lastTransitionTime": _stamp(later - timedelta(seconds=15))}]}
    placeholder_ids = {id(p) for p in placeholders}
    third_pods = [p for p in second_pods if id(p) not in placeholder_ids] + third_placeholders
    third = decide(ClusterSnapshot.read(third_pods, node_objects + new_nodes, later, pod_views=pod_views), settings)
    out["pass3"] = _pass_out(third)
    return out


def record(path: Path = FROZEN) -> None:
    tables = {name: decisions(name, *shape) for name, *shape in TABLES}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as out:
        json.dump(tables, out, sort_keys=True, separators=(",", ":"))


@functools.cache
def frozen() -> dict[str, Any]:
    """The recorded decisions, read once a process, when a test first asks (0.5 CPU-s: not at collection)."""
    with gzip.open(FROZEN, "rt", encoding="utf-8") as source:
        return json.load(source)


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else FROZEN)
