"""Conversion of custom objects between the served versions of a multi-version CRD.

A real API server stores a custom object in the CRD's storage version and
converts it to the version a client asks for through the CRD's conversion
webhook. Kueue (v0.15 and later) serves `kueue.x-k8s.io/v1beta1` and
`v1beta2` and stores v1beta2; its webhook converts these fields:

| kind | v1beta1 | v1beta2 |
|---|---|---|
| ClusterQueue | `spec.cohort` | `spec.cohortName` |
| LocalQueue | `status.flavorUsage` | `status.flavorsUsage` |
| Workload | `spec.priorityClassSource` + `spec.priorityClassName` | `spec.priorityClassRef{group,kind,name}` |
| Workload | `status.accumulatedPastExexcutionTimeSeconds` | `status.accumulatedPastExecutionTimeSeconds` |

Every other field with the same name in both versions is kept as it is.

What this deliberately does not convert, and drops when going to a version
without the field, as Kueue's generated conversion does for fields with no
peer: ClusterQueue v1beta1 `spec.admissionChecks`, `status.pendingWorkloadsStatus`
and `status.fairSharing.admissionFairSharingStatus`; LocalQueue v1beta1
`status.flavors`; Workload v1beta1 `status.admission.podSetAssignments[].topologyAssignment.domains`
and v1beta2 `...topologyAssignment.slices`, `spec.preemptionGates`,
`status.preemptionGates`; AdmissionCheck v1beta1 `spec.retryDelayMinutes`.
Fields a version lacks are removed by the server's pruning after conversion.
Other groups (KubeRay's v1alpha1 and v1) are served without any conversion
beyond `apiVersion`, which is what KubeRay's CRDs declare (`strategy: None`).
"""

from __future__ import annotations

import copy
from typing import Any

KUEUE_GROUP = "kueue.x-k8s.io"
_WPC = ("kueue.x-k8s.io/workloadpriorityclass", "kueue.x-k8s.io", "WorkloadPriorityClass")
_POD_PC = ("scheduling.k8s.io/priorityclass", "scheduling.k8s.io", "PriorityClass")


def convert(group: str, kind: str, obj: dict[str, Any], to_version: str) -> dict[str, Any]:
    """`obj` (any served version, per its apiVersion) in `to_version`; a new dict when anything changes."""
    from_version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    if from_version == to_version or group != KUEUE_GROUP:
        return obj
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{group}/{to_version}"
    if (from_version, to_version) == ("v1beta1", "v1beta2"):
        _up(kind, out)
    elif (from_version, to_version) == ("v1beta2", "v1beta1"):
        _down(kind, out)
    return out


def _rename(parent: Any, old: str, new: str) -> None:
    if isinstance(parent, dict) and old in parent:
        parent[new] = parent.pop(old)


def _up(kind: str, obj: dict[str, Any]) -> None:
    spec, status = obj.get("spec"), obj.get("status")
    if kind == "ClusterQueue" and isinstance(spec, dict):
        _rename(spec, "cohort", "cohortName")
    elif kind == "LocalQueue" and isinstance(status, dict):
        _rename(status, "flavorUsage", "flavorsUsage")
    elif kind == "Workload":
        if isinstance(spec, dict):
            source = spec.pop("priorityClassSource", None)
            name = spec.pop("priorityClassName", None)
            for source_name, ref_group, ref_kind in (_WPC, _POD_PC):
                if source == source_name:
                    spec["priorityClassRef"] = {"group": ref_group, "kind": ref_kind, "name": name or ""}
        _rename(status, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")


def _down(kind: str, obj: dict[str, Any]) -> None:
    spec, status = obj.get("spec"), obj.get("status")
    if kind == "ClusterQueue" and isinstance(spec, dict):
        _rename(spec, "cohortName", "cohort")
    elif kind == "LocalQueue" and isinstance(status, dict):
        _rename(status, "flavorsUsage", "flavorUsage")
    elif kind == "Workload":
        if isinstance(spec, dict):
            ref = spec.pop("priorityClassRef", None)
            if isinstance(ref, dict):
                for source_name, ref_group, ref_kind in (_WPC, _POD_PC):
                    if (ref.get("group"), ref.get("kind")) == (ref_group, ref_kind):
                        spec["priorityClassSource"] = source_name
                        spec["priorityClassName"] = ref.get("name", "")
        _rename(status, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
