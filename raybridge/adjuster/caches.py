"""The informers a leading controller reads: `LeaderCaches`, with the DRA ones as `DraCaches`.

Split from controller.py, which builds and starts them (`Controller._caches`) and decides on what they hold. Here
only what they are together: which a pass reads, all of them to start and stop, and whether all have synced.
What it deliberately does not do: list, watch or decide anything (`kube.informer.Informer` does the first two).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raybridge.kube.informer import Informer


@dataclass(frozen=True)
class DraCaches:
    """The informers of the DRA objects (resource.k8s.io/v1): the ResourceSlices nodes publish their GPUs in, the
    DeviceClasses that claim them, the ResourceClaims pods name. Optional: a cluster that does not serve them (before
    Kubernetes 1.34) or forbids listing them has no GPU the adjuster sees as a device."""

    slices: Informer
    classes: Informer
    claims: Informer

    def objects(self) -> dict[str, Any]:
        """`ClusterSnapshot.read`'s `slices`, `classes` and `claims` (None: claims not readable)."""
        return {"slices": self.slices.snapshot(), "classes": self.classes.snapshot(),
                "claims": None if self.claims.unavailable else self.claims.snapshot()}


class LeaderCaches:
    """The leader's informers: pods, nodes, PodGroups, the DRA objects; ProvisioningRequests and PodTemplates in that mode."""

    def __init__(self, pods: Informer, nodes: Informer, pod_groups: Informer,
                 requests: Optional[Informer] = None, templates: Optional[Informer] = None, dra: Optional[DraCaches] = None,
                 events: Optional[Informer] = None, node_pools: Optional[Informer] = None) -> None:
        self.pods, self.nodes, self.pod_groups, self.requests, self.templates = pods, nodes, pod_groups, requests, templates
        self.dra = dra
        #: The Events in the adjuster's namespace (what the autoscaler says of the placeholders) and Karpenter's NodePools.
        self.events, self.node_pools = events, node_pools

    @property
    def all(self) -> list[Informer]:
        dra = (self.dra.slices, self.dra.classes, self.dra.claims) if self.dra is not None else ()
        return [i for i in (self.pods, self.nodes, self.pod_groups, self.requests, self.templates, *dra, self.events, self.node_pools)
                if i is not None]

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.all)
