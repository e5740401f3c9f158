"""A ClusterQueue's or a Cohort's quota read once into a view: its resource groups, each flavor's quotas, its cohort.

Why it exists: Kueue keeps quota in `spec.resourceGroups` of both kinds (kueue@v0.17.0
apis/kueue/v1beta2/clusterqueue_types.go ResourceGroup, FlavorQuotas, ResourceQuota; cohort_types.go
CohortSpec), and the fit arithmetic (`kueue/fit.py`), `explain` and the submit preflight all walk it.
`read_quota_holder` walks it once, checking each entry's type as it goes: a group, flavor or resource that is
not an object, or has no name, is left out; a quota that is not a quantity reads as absent (nominal 0, no
limit). Objects come from the API server and from files a user hands to `explain -f`, so nothing here raises.

What it deliberately does not do: say what the quotas mean for a job (`kueue/fit.py`), or read usage
(`core/kubeobjects.cluster_queue_usage`: what a ClusterQueue has reserved is status, not quota).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping, Optional

from raybridge.core.kubeobjects import as_dict, as_list, quantity_or_none
from raybridge.core.views import is_object, read_meta


@dataclass(frozen=True)
class ResourceQuota:
    """One resource's quota in one flavor (`nominalQuota`, `borrowingLimit`, `lendingLimit`; None: no limit)."""

    nominal: Decimal = Decimal(0)
    borrowing_limit: Optional[Decimal] = None
    lending_limit: Optional[Decimal] = None


@dataclass(frozen=True)
class ResourceGroup:
    """One of `spec.resourceGroups`: the resources it covers and its flavors, in Kueue's order of trying them."""

    covered: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True)
class QuotaHolder:
    """A ClusterQueue or a Cohort, as far as quota goes."""

    name: str
    #: The cohort a ClusterQueue lends to and borrows from (`cohortName` in v1beta2, `cohort` in v1beta1).
    cohort: Optional[str]
    #: The parent a Cohort names (`spec.parentName`); None for a root.
    parent: Optional[str]
    groups: tuple[ResourceGroup, ...]
    #: (flavor, resource) -> its quota.
    quotas: Mapping[tuple[str, str], ResourceQuota] = field(default_factory=dict)

    @property
    def covered(self) -> frozenset[str]:
        """Every resource some resource group covers."""
        return frozenset(r for group in self.groups for r in group.covered)

    def quota(self, flavor: str, resource: str) -> Optional[ResourceQuota]:
        """The quota of `resource` in `flavor`, or None where the flavor does not list it."""
        return self.quotas.get((flavor, resource))


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def read_quota_holder(obj: Any) -> QuotaHolder:
    """The view of a ClusterQueue or Cohort object (of anything: a non-object reads as one without quota)."""
    spec = as_dict(obj.get("spec")) if is_object(obj) else {}
    groups: list[ResourceGroup] = []
    quotas: dict[tuple[str, str], ResourceQuota] = {}
    for group in as_list(spec.get("resourceGroups")):
        if not is_object(group):
            continue
        flavors = [f for f in as_list(group.get("flavors")) if is_object(f) and _text(f.get("name"))]
        listed: list[str] = []
        for flavor in flavors:
            for res in as_list(flavor.get("resources")):
                name = _text(res.get("name")) if is_object(res) else None
                if name is None:
                    continue
                listed.append(name)
                quotas[(flavor["name"], name)] = ResourceQuota(
                    quantity_or_none(res.get("nominalQuota")) or Decimal(0),
                    quantity_or_none(res.get("borrowingLimit")),
                    quantity_or_none(res.get("lendingLimit")),
                )
        covered = tuple(str(r) for r in as_list(group.get("coveredResources")) if isinstance(r, str)) or tuple(sorted(set(listed)))
        groups.append(ResourceGroup(covered, tuple(f["name"] for f in flavors)))
    return QuotaHolder(
        name=read_meta(obj).name,
        cohort=_text(spec.get("cohortName")) or _text(spec.get("cohort")),
        parent=_text(spec.get("parentName")),
        groups=tuple(groups),
        quotas=quotas,
    )
