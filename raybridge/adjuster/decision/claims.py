"""Pending pods whose GPUs come through ResourceClaims: how many whole devices of which class each one waits for.

Why it exists: a pod of the adjuster's scheduler may ask for GPUs as DRA devices (`spec.resourceClaims`, each naming
a ResourceClaim or a ResourceClaimTemplate the resourceclaim controller makes one from) instead of a device plugin's
`nvidia.com/gpu`. The autoscalers of today do not see those (Karpenter v1.14.1 skips every pod with DRA requirements
unless run with `--ignore-dra-requests=false`, pkg/operator/options/options.go and provisioning/scheduling/
scheduler.go; cluster-autoscaler reads them only with `--enable-dynamic-resource-allocation`, off by default before
1.35), so the adjuster counts them as demand: whole devices per claim, a claim shared by several pods once (its
devices are allocated once and every pod reserving it uses them).

This module reads the claims (`read_claims`) and judges one pod's claims (`ClaimReader.devices_of`): the devices of
its GPU claims not counted for an earlier pod, or why it is not demand. Which group of nodes it goes to and what the
placeholder asks for is demand.py's business. Pure; no I/O. It evaluates no CEL: a claim's selectors are not read,
so a claim that selects some GPUs of its class is planned as any GPUs of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from raybridge.core.dra import DeviceRequest, gpu_classes_of, pod_claims, read_claim_spec, read_device_class
from raybridge.core.kubeobjects import as_dict, as_list
from raybridge.core.views import Pod

#: Why a pod's claims are not demand (IgnoredPod codes).
CLAIM_UNKNOWN = "claim-unknown"  # a claim it names is not there (yet)
CLAIM_UNPLANNABLE = "claim-unplannable"  # all devices of a class, alternatives, GPUs of two vendors or classes
CLAIM_ALLOCATED = "claim-allocated"  # its GPU claims hold devices already: it waits for their node
CLAIM_SHARED = "claim-shared"  # its GPU claims are another waiting pod's too, counted for that one
CLAIMS_SEEN = "claims-seen-by-autoscaler"  # the autoscaler reads DRA: it sees the claims itself


@dataclass(frozen=True)
class ClaimFacts:
    """One ResourceClaim read once: its device requests, and whether devices are allocated to it."""

    key: str
    requests: tuple[DeviceRequest, ...]
    allocated: bool


@dataclass(frozen=True)
class Claims:
    """A cluster's ResourceClaims (by namespace/name) and which DeviceClasses select a known driver's whole GPUs."""

    by_key: Mapping[str, ClaimFacts] = field(default_factory=dict)
    #: DeviceClass name -> vendor.
    gpu_classes: Mapping[str, str] = field(default_factory=dict)


def read_claims(claims: Iterable[Any], classes: Iterable[Any]) -> Claims:
    """The claims and GPU classes as listed (objects of the wrong shape read as absent)."""
    found: dict[str, ClaimFacts] = {}
    for claim in claims:
        meta = as_dict(as_dict(claim).get("metadata"))
        name, namespace = meta.get("name"), meta.get("namespace")
        if not isinstance(name, str) or not isinstance(namespace, str):
            continue
        key = f"{namespace}/{name}"
        allocation = as_dict(as_dict(as_dict(claim).get("status")).get("allocation"))
        found[key] = ClaimFacts(key, read_claim_spec(as_dict(claim).get("spec")), bool(allocation))
    return Claims(found, gpu_classes_of(read_device_class(c) for c in classes))


@dataclass(frozen=True)
class ClaimDemand:
    """What a pod's claims add: `devices` whole GPUs of `vendor` through DeviceClass `device_class`."""

    devices: int
    vendor: str
    device_class: str


def claim_names(pod: Pod) -> list[tuple[str, Optional[str], bool]]:
    """(the pod's name for each claim, the ResourceClaim it uses or None where none is known, whether it comes from a
    template). A template's claim is the one the resourceclaim controller records in `status.resourceClaimStatuses`
    (core/v1 PodResourceClaimStatus)."""
    made = {}
    for entry in as_list(pod.status.get("resourceClaimStatuses")):
        entry = as_dict(entry)
        if isinstance(entry.get("name"), str) and isinstance(entry.get("resourceClaimName"), str):
            made[entry["name"]] = entry["resourceClaimName"]
    return [(c.name, c.claim_name or (made.get(c.name) if c.template_name else None), bool(c.template_name)) for c in pod_claims(pod.spec)]


#: A claim's GPU requests, as (namespace/name of the claim, the request).
Wanted = list[tuple[str, DeviceRequest]]


class ClaimReader:
    """Reads pods' claims, and counts them in the order the scheduler takes the pods, each claim for the first."""

    def __init__(self, claims: Claims) -> None:
        self.claims = claims
        #: namespace/name of a claim -> the pod it was counted for.
        self.counted: dict[str, str] = {}

    def gpu_requests(self, pod: Pod) -> tuple[Optional[tuple[str, str]], Wanted]:
        """((code, reason) where a claim it names cannot be read, or None; the GPU requests of its claims: none where it
        asks for no GPU through them)."""
        namespace = pod.meta.namespace or ""
        wanted: Wanted = []
        for own_name, claim_name, from_template in claim_names(pod):
            if claim_name is None and not from_template:
                return (CLAIM_UNKNOWN, f"its claim {own_name!r} names neither a ResourceClaim nor a ResourceClaimTemplate"), []
            if claim_name is None:
                return (CLAIM_UNKNOWN, f"its claim {own_name!r} comes from a ResourceClaimTemplate and none is made from it yet "
                                       "(the resourceclaim controller of kube-controller-manager makes it)"), []
            facts = self.claims.by_key.get(f"{namespace}/{claim_name}")
            if facts is None:
                return (CLAIM_UNKNOWN, f"its ResourceClaim {namespace}/{claim_name} is not there (or the adjuster may not "
                                       "list resourceclaims)"), []
            wanted += [(facts.key, request) for request in facts.requests if request.device_class in self.claims.gpu_classes]
        return None, wanted

    def count(self, pod: Pod, wanted: Wanted) -> tuple[Optional[tuple[str, str]], Optional[ClaimDemand]]:
        """((code, reason) why its GPU claims are not demand, or None; the devices they add, counted once per claim)."""
        for claim_key, request in wanted:
            if request.all_devices or request.alternatives:
                how = "all devices of its class (allocationMode All)" if request.all_devices else "one of several alternatives (firstAvailable)"
                return (CLAIM_UNPLANNABLE, f"its ResourceClaim {claim_key} asks for {how} in request {request.name!r}: how many GPUs "
                                           "that is depends on the node, so no placeholder can say it"), None
        classes = {request.device_class or "" for _, request in wanted}
        if len(classes) > 1:
            return (CLAIM_UNPLANNABLE, f"its claims ask for GPUs of several DeviceClasses ({', '.join(sorted(classes))}): one "
                                       "placeholder asks for one kind"), None
        device_class = classes.pop()
        unallocated = [(key, request) for key, request in wanted if not self.claims.by_key[key].allocated]
        if not unallocated:
            return (CLAIM_ALLOCATED, f"its ResourceClaim {wanted[0][0]} holds devices already: it waits for the node they are on, "
                                     "not for a new one"), None
        devices = 0
        shared_with: Optional[str] = None
        for claim_key, request in unallocated:
            holder = self.counted.setdefault(claim_key, pod.key)
            if holder != pod.key:
                shared_with = shared_with or f"{claim_key} (counted for {holder})"
                continue
            devices += request.count
        if not devices:
            return (CLAIM_SHARED, f"its GPUs come from ResourceClaim {shared_with}, which another waiting pod uses too: a claim's "
                                  "devices are allocated once"), None
        return None, ClaimDemand(devices, self.claims.gpu_classes[device_class], device_class)
