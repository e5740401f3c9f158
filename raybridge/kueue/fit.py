"""Whether Kueue could ever admit a workload, from its pod sets and the ClusterQueue's quota.

Kueue leaves a workload that can never fit pending forever (reason
`ExceedsMaxQuota`, or no flavor at all), so a user would wait out the whole
timeout. Before creating anything, raybridge asks this module and refuses at
once, with the arithmetic, when admission is impossible:

- a requested resource that no resource group of the ClusterQueue covers;
- a pod set that no flavor of a resource group can ever take whole: Kueue
  gives a pod set one flavor for all the resources of a group
  (`flavorassigner.go`, findFlavorForPodSetResource), so CPU that fits only
  flavor A and GPUs that fit only flavor B never fit; a flavor is also out
  when the pod set's nodeSelector contradicts its node labels or it has a
  taint the pod set does not tolerate, or (for GPUs) no node has its labels;
- all pod sets together asking more of a resource than all flavors could hold;
- a ClusterQueue whose cohorts' parents form a loop (Kueue schedules nothing
  from it).

"Could ever hold" is Kueue's potential availability (`potentialAvailable` in
`pkg/cache/scheduler/resource_node.go`) over the whole cohort forest
(`QuotaForest`): a ClusterQueue's nominal quota plus what its cohort can lend;
a cohort's pool is its own nominal quota (a `Cohort` object may carry one) plus
what its children lend (each lends all but `subtree - lendingLimit`), and a
cohort with a `parentName` borrows from its parent's pool in turn;
`borrowingLimit` caps what any node takes from its parent. A cohort name
without a Cohort object is a cohort with no quota and no parent, as in Kueue.
When the ClusterQueues or Cohorts could not be read, what the cohort lends is
unknown: only the queue's own `borrowingLimit` bounds it, so the check errs
towards "may fit" and never refuses what Kueue could admit.

Pure: plain dicts in (the rendered object, ClusterQueues, Cohorts,
ResourceFlavors, Nodes; a ClusterQueue's or Cohort's quota is read once into its view,
`kueue/cluster_queue.py`), sentences out. It does not model usage (only whether
admission is ever possible), flavor fungibility, preemption, required node
affinity terms or topology-aware scheduling: each of those can only make a
workload wait, never admit one that this refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Mapping, Optional

from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.core import kubeobjects
from raybridge.core.dra import pod_claims
from raybridge.core.kubeobjects import as_dict
from raybridge.kueue.cluster_queue import QuotaHolder, ResourceGroup, ResourceQuota, read_quota_holder

_GPU_KEYS = frozenset(GPU_RESOURCE_KEYS.values())
#: What a cohort can lend when the ClusterQueues or Cohorts could not be read.
UNLIMITED = Decimal("Infinity")


@dataclass(frozen=True)
class PodSetRequest:
    """One pod set as Kueue counts it: `count` pods, each requesting `requests`, placed by its selector and tolerations."""

    name: str
    count: int
    requests: Mapping[str, Decimal]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def total(self, resource: str) -> Decimal:
        return self.requests.get(resource, Decimal(0)) * self.count


def pod_requests(template: Optional[Mapping[str, Any]]) -> dict[str, Decimal]:
    """Requests of one pod of a pod template, as Kueue totals a pod set (`core/kubeobjects.py` pod_requests)."""
    return kubeobjects.pod_requests(as_dict(template).get("spec"))


def _placement(template: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    spec = (template or {}).get("spec") or {}
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    tolerations = tuple(t for t in spec.get("tolerations") or [] if isinstance(t, Mapping))
    return {"node_selector": selector, "tolerations": tolerations}


def ray_podsets(obj: Mapping[str, Any], claim_templates: Optional[Mapping[str, Mapping[str, Decimal]]] = None) -> list[PodSetRequest]:
    """The pod sets Kueue builds for a RayJob or RayCluster: `head`, then one per worker group (and a K8sJobMode
    RayJob's `submitter`).

    `claim_templates`: what each ResourceClaimTemplate a pod names counts as per pod (the resource the Kueue
    Configuration maps its DeviceClass to, and its devices), added to the pod's requests as Kueue's DRA
    integration adds them before multiplying by the count (kueue@v0.19.2 pkg/dra/claims.go,
    pkg/workload/workload.go)."""
    spec = obj.get("spec") or {}
    cluster = spec.get("rayClusterSpec") if obj.get("kind") == "RayJob" else spec
    cluster = cluster or {}
    head = (cluster.get("headGroupSpec") or {}).get("template") or {}
    podsets = [PodSetRequest("head", 1, _with_claims(head, claim_templates), **_placement(head))]
    for group in cluster.get("workerGroupSpecs") or []:
        count = int(group.get("replicas") or 0) * int(group.get("numOfHosts") or 1)
        template = group.get("template") or {}
        podsets.append(PodSetRequest(str(group.get("groupName")), count, _with_claims(template, claim_templates), **_placement(template)))
    if obj.get("kind") == "RayJob" and spec.get("submissionMode") == "K8sJobMode":
        # Kueue counts KubeRay's submitter pod too (kueue@v0.13.10 pkg/controller/jobs/rayjob/rayjob_controller.go PodSets,
        # "submitter": the RayJob's submitterPodTemplate, else KubeRay's default of 500m CPU and 200Mi memory).
        template = spec.get("submitterPodTemplate") or {"spec": {"containers": [{"resources": {"requests": {"cpu": "500m", "memory": "200Mi"}}}]}}
        podsets.append(PodSetRequest("submitter", 1, _with_claims(template, None), **_placement(template)))
    return podsets


def _with_claims(template: Mapping[str, Any], claim_templates: Optional[Mapping[str, Mapping[str, Decimal]]]) -> dict[str, Decimal]:
    requests = pod_requests(template)
    for claim in pod_claims(as_dict(as_dict(template).get("spec"))):
        for resource, amount in ((claim_templates or {}).get(claim.template_name or "") or {}).items():
            requests[resource] = requests.get(resource, Decimal(0)) + amount
    return requests


def holder(obj: Any) -> QuotaHolder:
    """`obj` as a quota view: itself when it is one, else read (`kueue/cluster_queue.py`)."""
    return obj if isinstance(obj, QuotaHolder) else read_quota_holder(obj)


def cohort_of(cq: Any) -> Optional[str]:
    """The cohort a ClusterQueue belongs to (`cohortName` in v1beta2, `cohort` in v1beta1)."""
    return holder(cq).cohort


class QuotaForest:
    """The ClusterQueues and Cohorts that lend to each other, and the most each ClusterQueue could ever hold.

    `cluster_queues`: any ClusterQueues (those outside a queue's cohort tree are ignored);
    `cohorts`: every Cohort object, or None when they could not be read; `complete`: False
    when the ClusterQueues could not all be listed. Unknown lending is `UNLIMITED`, capped
    only by the queue's own borrowingLimit.
    """

    def __init__(
        self,
        cluster_queues: Iterable[Any],
        cohorts: Optional[Iterable[Any]] = (),
        *,
        complete: bool = True,
    ) -> None:
        self.queues = {q.name: q for q in map(holder, cluster_queues)}
        self.cohorts = {c.name: c for c in map(holder, cohorts or ())}
        self.known = complete and cohorts is not None
        self._subtree: dict[tuple[str, tuple[str, str]], Decimal] = {}

    def add(self, cq: Any) -> "QuotaForest":
        """The forest with `cq` in it (the queue asked about may be missing from a partial list)."""
        view = holder(cq)
        self.queues[view.name] = view
        self._subtree.clear()
        return self

    def _parent(self, cohort: str) -> Optional[str]:
        found = self.cohorts.get(cohort)
        return found.parent if found is not None else None

    def _quota(self, cohort: str, fr: tuple[str, str]) -> Optional[ResourceQuota]:
        found = self.cohorts.get(cohort)
        return found.quota(*fr) if found is not None else None

    def parents(self, cq: Any) -> list[str]:
        """The cohorts above a ClusterQueue, nearest first; a loop ends the list at the first repeat."""
        chain: list[str] = []
        name = holder(cq).cohort
        while name is not None and name not in chain:
            chain.append(name)
            name = self._parent(name)
        if name is not None:
            chain.append(name)  # the repeat shows the loop
        return chain

    def loop(self, cq: Any) -> Optional[list[str]]:
        """The cohorts that form a loop of parents above `cq`, or None (Kueue schedules nothing from such a queue)."""
        chain = self.parents(cq)
        if len(chain) > 1 and chain[-1] in chain[:-1]:
            return chain[chain.index(chain[-1]) :]
        return None

    def _local(self, quota: Optional[ResourceQuota], subtree: Decimal) -> Decimal:
        lending = quota.lending_limit if quota is not None else None
        return max(Decimal(0), subtree - lending) if lending is not None else Decimal(0)

    def _cohort_subtree(self, cohort: str, fr: tuple[str, str]) -> Decimal:
        """SubtreeQuota of a cohort: its own nominal quota plus what its children make visible (accumulateFromChild)."""
        key = (cohort, fr)
        if key not in self._subtree:
            self._subtree[key] = Decimal(0)  # a loop adds nothing more
            own = self._quota(cohort, fr)
            total = own.nominal if own is not None else Decimal(0)
            for name, child in self.cohorts.items():
                if child.parent == cohort and name != cohort:
                    sub = self._cohort_subtree(name, fr)
                    total += sub - self._local(child.quota(*fr), sub)
            for queue in self.queues.values():
                if queue.cohort == cohort:
                    quota = queue.quota(*fr)
                    nominal = quota.nominal if quota is not None else Decimal(0)
                    total += nominal - self._local(quota, nominal)
            self._subtree[key] = total
        return self._subtree[key]

    def _cohort_potential(self, cohort: str, fr: tuple[str, str], seen: frozenset[str] = frozenset()) -> Decimal:
        parent = self._parent(cohort)
        subtree = self._cohort_subtree(cohort, fr)
        if parent is None or parent in seen:
            return subtree
        quota = self._quota(cohort, fr)
        most = self._local(quota, subtree) + self._cohort_potential(parent, fr, seen | {cohort})
        borrowing = quota.borrowing_limit if quota is not None else None
        return min(subtree + borrowing, most) if borrowing is not None else most

    def potential(self, cq: Any, flavor: str, resource: str) -> Decimal:
        """potentialAvailable: the most of `resource` in `flavor` the ClusterQueue could ever hold (no usage anywhere)."""
        view = holder(cq)
        fr = (flavor, resource)
        quota = view.quota(flavor, resource)
        if quota is None:
            return Decimal(0)
        nominal = quota.nominal
        cohort = view.cohort
        if cohort is None:
            return nominal
        borrowing = quota.borrowing_limit
        if not self.known:
            return nominal + borrowing if borrowing is not None else UNLIMITED
        if view.name not in self.queues:
            self.add(view)
        most = self._local(quota, nominal) + self._cohort_potential(cohort, fr)
        return min(nominal + borrowing, most) if borrowing is not None else most


def potential_available(
    cq: Mapping[str, Any],
    cluster_queues: Iterable[Mapping[str, Any]],
    flavor: str,
    resource: str,
    cohorts: Optional[Iterable[Mapping[str, Any]]] = (),
) -> Decimal:
    """The most of `resource` in `flavor` this ClusterQueue could ever hold (no usage anywhere).

    `cluster_queues` are the other ClusterQueues (any; only its cohort tree counts) and
    `cohorts` the Cohort objects (None: not readable, so what the cohorts lend is unknown).
    """
    return QuotaForest([*cluster_queues, cq], cohorts).potential(cq, flavor, resource)


def _flavor_has_nodes(flavor: Optional[Mapping[str, Any]], node_labels: Optional[list[Mapping[str, str]]]) -> bool:
    if flavor is None or node_labels is None:
        return True  # unknown: assume it may
    wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return any(all(labels.get(k) == v for k, v in wanted.items()) for labels in node_labels)


def _selector_conflict(ps: PodSetRequest, flavor: Optional[Mapping[str, Any]], label_keys: set[str]) -> Optional[str]:
    """flavorSelector: the pod set's nodeSelector, on the label keys of the group's flavors, against the flavor's labels."""
    if flavor is None:
        return None
    labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
    wrong = sorted(k for k, v in ps.node_selector.items() if k in label_keys and labels.get(k) != v)
    if not wrong:
        return None
    return "nodeSelector " + ", ".join(f"{k}={ps.node_selector[k]}" for k in wrong) + " does not match its node labels"


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def _untolerated_taint(ps: PodSetRequest, flavor: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The first NoSchedule/NoExecute taint of the flavor that neither the pod set nor the flavor tolerates."""
    spec = (flavor or {}).get("spec") or {}
    tolerations = [*ps.tolerations, *(spec.get("tolerations") or [])]
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"untolerated taint {taint.get('key')}{value}:{taint.get('effect')}"
    return None


def _show(value: Decimal, resource: str) -> str:
    if value == UNLIMITED:
        return "unlimited"
    if resource == "memory":
        gib = value / (1 << 30)
        return f"{gib.normalize():f}Gi" if gib == gib.to_integral_value() else f"{value.normalize():f} bytes"
    return f"{value.normalize():f}"


def _asks(ps: PodSetRequest, resource: str) -> str:
    return f"{_show(ps.total(resource), resource)} {resource} ({ps.count} x {_show(ps.requests[resource], resource)})"


_QUOTA_WORDS = "nominal quota plus what its cohorts can lend"


def admission_problems(
    podsets: list[PodSetRequest],
    cluster_queue: Any,
    cohort_members: Iterable[Mapping[str, Any]] = (),
    flavors: Optional[Mapping[str, Mapping[str, Any]]] = None,
    nodes: Optional[list[Mapping[str, str]]] = None,
    cohorts: Optional[Iterable[Mapping[str, Any]]] = (),
    *,
    members_complete: bool = True,
) -> list[str]:
    """Why Kueue could never admit these pod sets into `cluster_queue`; [] when it might.

    `cohort_members` are the other ClusterQueues (any; those outside its cohort tree do
    not count) and `members_complete` whether that list is all of them; `cohorts` the
    Cohort objects (None: not readable); `flavors` the ResourceFlavors by name and
    `nodes` the label sets of the Nodes, when known (None: not checked).
    """
    cluster_queue = holder(cluster_queue)
    name = cluster_queue.name or "?"
    forest = QuotaForest([*cohort_members, cluster_queue], cohorts, complete=members_complete)
    loop = forest.loop(cluster_queue)
    if loop is not None:
        return [
            f"the cohorts above ClusterQueue {name} form a loop of parents ({' -> '.join(loop)}): "
            "Kueue admits nothing from it until the loop is broken"
        ]
    groups = cluster_queue.groups
    covered = cluster_queue.covered
    asked = sorted({r for ps in podsets for r, v in ps.requests.items() if v > 0 and ps.count > 0})
    problems: list[str] = []
    for resource in asked:
        if resource not in covered:
            what = ", ".join(sorted(covered)) or "nothing"
            problems.append(f"ClusterQueue {name} does not cover {resource} (it covers {what}): Kueue can never admit the job")
    for group in groups:
        label_keys = {k for f in group.flavors for k in (((flavors or {}).get(f) or {}).get("spec") or {}).get("nodeLabels") or {}}
        refused: set[str] = set()  # resources a pod set of this group was already refused for
        for ps in podsets:
            wanted = [r for r in group.covered if ps.requests.get(r, Decimal(0)) > 0 and ps.count > 0]
            problem = _pod_set_problem(name, ps, wanted, group, forest, cluster_queue, flavors, nodes, label_keys) if wanted else None
            if problem is not None:
                problems.append(problem)
                refused.update(wanted)
        for resource in [r for r in group.covered if r in asked and r not in refused]:
            usable = [f for f in group.flavors if resource not in _GPU_KEYS or _flavor_has_nodes((flavors or {}).get(f), nodes)]
            capacity = {f: forest.potential(cluster_queue, f, resource) for f in usable}
            total = sum((ps.total(resource) for ps in podsets), Decimal(0))
            if capacity and total > sum(capacity.values()):
                where = ", ".join(f"flavor {f}: {_show(v, resource)}" for f, v in capacity.items())
                problems.append(
                    f"the job asks for {_show(total, resource)} {resource} in all, more than ClusterQueue {name} can ever hold "
                    f"({where}; {_QUOTA_WORDS})"
                )
    return list(dict.fromkeys(problems))


def _pod_set_problem(
    name: str,
    ps: PodSetRequest,
    wanted: list[str],
    group: ResourceGroup,
    forest: QuotaForest,
    cluster_queue: QuotaHolder,
    flavors: Optional[Mapping[str, Mapping[str, Any]]],
    nodes: Optional[list[Mapping[str, str]]],
    label_keys: set[str],
) -> Optional[str]:
    """None when some flavor of the group could take the whole pod set; else why none can, flavor by flavor."""
    gpus = [r for r in wanted if r in _GPU_KEYS]
    misplaced: dict[str, list[str]] = {}  # flavor -> why the pod set cannot go there at all
    nodeless: dict[str, bool] = {}  # flavor -> no node has its labels (a GPU pod set could not run there)
    short: dict[str, list[str]] = {}  # flavor -> the resources it can never hold enough of
    capacity: dict[tuple[str, str], Decimal] = {}
    for flavor in group.flavors:
        obj = (flavors or {}).get(flavor)
        misplaced[flavor] = [w for w in (_selector_conflict(ps, obj, label_keys), _untolerated_taint(ps, obj)) if w]
        nodeless[flavor] = bool(gpus) and not _flavor_has_nodes(obj, nodes)
        for resource in wanted:
            capacity[(flavor, resource)] = forest.potential(cluster_queue, flavor, resource)
        short[flavor] = [r for r in wanted if ps.total(r) > capacity[(flavor, r)]]
        if not misplaced[flavor] and not nodeless[flavor] and not short[flavor]:
            return None
    if group.flavors and all(nodeless[f] and not misplaced[f] and not short[f] for f in group.flavors):
        labels = "; ".join(f"{f}: {((flavors or {}).get(f) or {}).get('spec', {}).get('nodeLabels')}" for f in group.flavors)
        return f"no node has the labels of any flavor that ClusterQueue {name} offers for {', '.join(gpus)} ({labels})"
    alike = {tuple(short[f]) for f in group.flavors}
    if len(alike) == 1 and len(next(iter(alike))) == 1 and not any(misplaced[f] or nodeless[f] for f in group.flavors):
        resource = next(iter(alike))[0]  # every flavor falls short of the same one resource, whatever the grouping
        where = ", ".join(f"flavor {f}: {_show(capacity[(f, resource)], resource)}" for f in group.flavors)
        return (
            f"pod set {ps.name} asks for {_asks(ps, resource)}, more than ClusterQueue {name} can ever hold "
            f"in one flavor ({where}; {_QUOTA_WORDS})"
        )
    reasons = []
    for flavor in group.flavors:
        parts = list(misplaced[flavor])
        if nodeless[flavor]:
            parts.append(f"no node has its labels {((flavors or {}).get(flavor) or {}).get('spec', {}).get('nodeLabels')}")
        parts += [f"{r} {_show(ps.total(r), r)} > {_show(capacity[(flavor, r)], r)} it can ever hold" for r in short[flavor]]
        reasons.append(f"flavor {flavor}: {', '.join(parts)}")
    text = f"pod set {ps.name} asks for {', '.join(_asks(ps, r) for r in wanted)} and no flavor of ClusterQueue {name} can ever take it"
    text += f" ({'; '.join(reasons) or 'the resource group has no flavors'})"
    if len(wanted) > 1:
        text += f"; Kueue gives a pod set one flavor for all of {', '.join(wanted)} (they are one resource group)"
    if any(short.values()):
        text += f" (what a flavor can ever hold: {_QUOTA_WORDS})"
    return text
