"""Kueue's flavor assignment and a Ray job's pod sets, as Kueue computes them: what the shipped queue configs are judged by.

Why this module exists: `tests/unit/test_configs.py` checks that the Kueue configurations raybridge ships admit the
jobs raybridge renders, with Kueue's own rules for a job's pod sets (kueue@v0.17.0
pkg/controller/jobs/rayjob/rayjob_controller.go PodSets, raycluster_controller.go) and for choosing a flavor per
resource group (pkg/scheduler/flavorassigner/flavorassigner.go: every resource of a group in one flavor, flavors in
order, node labels and untolerated taints): pure functions, no controller. The real Kueue admits the end-to-end
tests' jobs (testcluster/).

What it deliberately does not do: simulate Kueue's controllers, webhooks, queues, cohorts or preemption (the real
Kueue runs in the test cluster: testcluster/kueue.py), or anything raybridge's code decides.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Mapping, Optional

from kubesim.sim_common import Obj, format_quantity, parse_quantity, pod_requests

#: The resources a pod set's requests are counted in.
TRACKED_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "amd.com/gpu")


def ray_cluster_spec_of(kind: str, job: Mapping[str, Any]) -> Obj:
    spec = job.get("spec") or {}
    return (spec.get("rayClusterSpec") or {}) if kind == "RayJob" else dict(spec)


def _podset_template(template: Mapping[str, Any]) -> Obj:
    meta = template.get("metadata") or {}
    out: Obj = {"spec": copy.deepcopy(template.get("spec") or {})}
    kept = {k: copy.deepcopy(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    if kept:
        out["metadata"] = kept
    return out


def default_submitter_template(cluster_spec: Mapping[str, Any]) -> Obj:
    """KubeRay's GetDefaultSubmitterTemplate: the head image, 500m/200Mi requested, 1/1Gi limits."""
    head_containers = (((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or [{}]
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": head_containers[0].get("image", "rayproject/ray"),
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                        "limits": {"cpu": "1", "memory": "1Gi"},
                    },
                }
            ],
        }
    }


def ray_podsets(kind: str, job: Mapping[str, Any]) -> list[Obj]:
    """Workload podSets for a RayJob/RayCluster: head, one per worker group, submitter in K8sJobMode."""
    cluster = ray_cluster_spec_of(kind, job)
    podsets = [
        {
            "name": "head",
            "count": 1,
            "template": _podset_template((cluster.get("headGroupSpec") or {}).get("template") or {}),
        }
    ]
    for group in cluster.get("workerGroupSpecs") or []:
        count = int(group.get("replicas", 0)) * int(group.get("numOfHosts", 1) or 1)
        podsets.append(
            {"name": group["groupName"], "count": count, "template": _podset_template(group.get("template") or {})}
        )
    spec = job.get("spec") or {}
    if kind == "RayJob" and spec.get("submissionMode", "K8sJobMode") == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        podsets.append(
            {
                "name": "submitter",
                "count": 1,
                "template": _podset_template(template) if template else default_submitter_template(cluster),
            }
        )
    return podsets


@dataclass(frozen=True)
class FlavorFit:
    """The outcome of assigning flavors to a workload's podSets in one ClusterQueue."""

    pod_set_assignments: Optional[list[Obj]]  # status.admission.podSetAssignments when it fits
    reason: str = ""  # granular QuotaReserved=False reason when it does not fit
    message: str = ""
    usage: dict[tuple[str, str], Decimal] = field(default_factory=dict)  # (flavor, resource) -> amount

    @property
    def fits(self) -> bool:
        return self.pod_set_assignments is not None


_REASON_SEVERITY = {"WaitingForQuota": 1, "ExceedsMaxQuota": 2, "NoMatchingFlavor": 3}


def _worse(a: str, b: str) -> str:
    return a if _REASON_SEVERITY.get(a, 0) >= _REASON_SEVERITY.get(b, 0) else b


def _selector_matches(node_selector: Mapping[str, str], node_labels: Mapping[str, str], label_keys: Iterable[str]) -> bool:
    """flavorSelector (kueue@v0.13.10 flavorassigner.go): the nodeSelector, on the label keys of the resource
    group's flavors only, must hold for a node carrying the flavor's labels."""
    keys = set(label_keys)
    return all(k in node_labels and node_labels[k] == v for k, v in node_selector.items() if k in keys)


def _taint_string(taint: Mapping[str, Any]) -> str:
    """core/v1 Taint.ToString: key=value:Effect, key:Effect without a value."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def _untolerated_taint(
    pod_tolerations: list[Mapping[str, Any]], flavor_spec: Mapping[str, Any]
) -> Optional[Mapping[str, Any]]:
    """FindMatchingUntoleratedTaint over the flavor's NoSchedule/NoExecute nodeTaints (flavorassigner.go)."""
    tolerations = [*pod_tolerations, *(flavor_spec.get("tolerations") or [])]
    for taint in flavor_spec.get("nodeTaints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def assign_flavors(
    cluster_queue: Mapping[str, Any],
    podsets: list[Mapping[str, Any]],
    used: Mapping[tuple[str, str], Decimal],
    flavor_node_labels: Optional[Mapping[str, Mapping[str, str]]] = None,
    limits: Optional[Mapping[tuple[str, str], tuple[Decimal, Decimal]]] = None,
    flavor_specs: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> FlavorFit:
    """Pick a flavor per podSet and resource group, first fit in the ClusterQueue's flavor order.

    kueue@v0.13.10 pkg/scheduler/flavorassigner/flavorassigner.go (assignFlavors,
    findFlavorForPodSetResource, fitsResourceQuota); the same at v0.15.8 and main. One flavor
    takes every resource of the group a pod set asks for. `used` is what admitted workloads
    already hold per (flavor, resource). `limits`: (maximum capacity, available) per (flavor,
    resource) where a cohort lends (`quota_limits`); without it, the nominal quota alone.
    `flavor_specs`: the ResourceFlavors' specs, for their taints and tolerations. Messages are
    Kueue's flavorassigner messages.
    """
    flavor_node_labels = flavor_node_labels or {}
    flavor_specs = flavor_specs or {}
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    covered = {r for g in groups for r in g.get("coveredResources") or []}
    assumed: dict[tuple[str, str], Decimal] = {}
    assignments: list[Obj] = []
    for podset in podsets:
        name, count = podset["name"], int(podset.get("count", 1))
        template_spec = (podset.get("template") or {}).get("spec") or {}
        per_pod = pod_requests(template_spec)
        requests = {
            r: q * count
            for r, q in sorted(per_pod.items())
            if q > 0 and count > 0 and (r in TRACKED_RESOURCES or r in covered)
        }
        prefix = f"couldn't assign flavors to pod set {name}: "
        for resource in requests:
            if resource not in covered:
                return FlavorFit(None, "NoMatchingFlavor", f"{prefix}resource {resource} unavailable in ClusterQueue")
        chosen_flavors: dict[str, str] = {}
        for group in groups:
            group_requests = {r: q for r, q in requests.items() if r in (group.get("coveredResources") or [])}
            if not group_requests:
                continue
            reasons: list[str] = []
            reason = ""
            chosen = None
            label_keys = {k for f in group.get("flavors") or [] for k in flavor_node_labels.get(f["name"]) or {}}
            for flavor in group.get("flavors") or []:
                flavor_name = flavor["name"]
                selector = template_spec.get("nodeSelector") or {}
                taint = _untolerated_taint(template_spec.get("tolerations") or [], flavor_specs.get(flavor_name) or {})
                if taint is not None:
                    reasons.append(f"untolerated taint {_taint_string(taint)} in flavor {flavor_name}")
                    reason = _worse(reason, "NoMatchingFlavor")
                    continue
                if not _selector_matches(selector, flavor_node_labels.get(flavor_name) or {}, label_keys):
                    reasons.append(f"flavor {flavor_name} doesn't match node affinity")
                    reason = _worse(reason, "NoMatchingFlavor")
                    continue
                nominal = {q["name"]: parse_quantity(q["nominalQuota"]) for q in flavor.get("resources") or []}
                fits = True
                for resource, amount in group_requests.items():
                    before = assumed.get((flavor_name, resource), Decimal(0))
                    wanted = before + amount
                    capacity = nominal.get(resource, Decimal(0))
                    available = capacity - used.get((flavor_name, resource), Decimal(0))
                    if limits is not None and (flavor_name, resource) in limits:
                        capacity, available = limits[(flavor_name, resource)]
                    if wanted > capacity:
                        fits = False
                        reason = _worse(reason, "ExceedsMaxQuota")
                        reasons.append(
                            f"insufficient quota for {resource} in flavor {flavor_name}, previously considered "
                            f"podsets requests ({format_quantity(before)}) + current podset request "
                            f"({format_quantity(amount)}) > maximum capacity ({format_quantity(capacity)})"
                        )
                    elif wanted > available:
                        fits = False
                        reason = _worse(reason, "WaitingForQuota")
                        reasons.append(
                            f"insufficient unused quota for {resource} in flavor {flavor_name}, "
                            f"{format_quantity(wanted - available)} more needed"
                        )
                if fits:
                    chosen = flavor_name
                    break
            if chosen is None:
                return FlavorFit(None, reason or "NoMatchingFlavor", prefix + ", ".join(reasons))
            for resource, amount in group_requests.items():
                chosen_flavors[resource] = chosen
                assumed[(chosen, resource)] = assumed.get((chosen, resource), Decimal(0)) + amount
        assignments.append(
            {
                "name": name,
                "flavors": chosen_flavors,
                "resourceUsage": {r: format_quantity(q) for r, q in requests.items()},
                "count": count,
            }
        )
    return FlavorFit(assignments, usage=assumed)


