"""Plain words and the arithmetic for "why is my job pending?" in Kueue.

Pure functions from a RayJob/RayCluster, its Kueue Workload, the queue
position and (when readable) the ClusterQueue, its cohort, the
ResourceFlavors, the Nodes and the Workload's ProvisioningRequests to data
(`KueueExplanation`) and sentences: which queue and cohort, which condition
and reason, what each pod set asks of each flavor (the assigned one, or
every candidate while pending) against that flavor's nominal quota, usage,
borrowing limit and what the cohorts can lend (`kueue.fit.QuotaForest`,
the one home of that arithmetic), whether it could ever fit (a flavor with
enough quota, a node big enough for one pod), the position, and the
admission checks with their ProvisioningRequest's state. The launcher prints
`progress_line` while a job waits; `explain` prints
`KueueExplanation.lines()`, `status` its `summary()`. What a Workload's own
fields say (its state, a deactivation, its pod sets) is read by
`raybridge.kueue.workload`.

Nothing here reads the cluster. What the cohorts lend comes from
`kueue.fit.QuotaForest` (Cohort objects and their parents included); when the
ClusterQueues or Cohorts could not be read it is unknown, shown as such, and
nothing is called "never" on its account. It does not model Kueue's flavor
fungibility policies, preemption, flavor taints or topology-aware scheduling:
what it says "could fit" Kueue may still refuse for those reasons, never the
other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional, Sequence

from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.kueue.names import KUEUE_QUEUE_LABEL
from raybridge.core.kubeobjects import as_dict, cluster_queue_usage, quantity_or_none
from raybridge.core.views import Node, is_object, read_meta, read_node
from raybridge.autoscalers.provisioning_request import read_provisioning_state
from raybridge.kueue.cluster_queue import ResourceQuota, read_quota_holder
from raybridge.kuberay.rayjob import ray_state
from raybridge.kueue.fit import UNLIMITED, QuotaForest, cohort_of
from raybridge.kueue.multikueue import dispatched_by_multikueue, where_it_runs
from raybridge.kueue.workload import (
    PodSet,
    Workload,
    WorkloadLike,
    position_words,
    quota_holders,
    read_workload,
    reason_words,
    workload_view,
)

RESOURCES_SHOWN = (GPU_RESOURCE_KEYS["nvidia"], GPU_RESOURCE_KEYS["amd"], "cpu", "memory")




def _fmt(value: Decimal, resource: str) -> str:
    if value == UNLIMITED:
        return "an unknown amount"
    if resource == "memory":
        return f"{value / (1 << 30):.1f}Gi"
    return f"{value.normalize():f}"


# --- the per-flavor arithmetic ------------------------------------------------------------------

#: Row verdicts, from best to worst.
FITS = "fits"  # within the flavor's unused nominal quota
WAITS = "waits-for-quota"  # within the nominal quota, but part of it is in use
BORROWS = "needs-borrowing"  # above the nominal quota, within what the cohort can lend
NEVER = "never-fits"  # above the most the flavor can ever hold here


def _number(value: Optional[Decimal]) -> Any:
    """A Decimal as JSON: an int when whole, else a float; None stays None."""
    if value is None or value == UNLIMITED:
        return None
    if value == value.to_integral_value():
        return int(value)
    return float(value)


@dataclass(frozen=True)
class FlavorRequest:
    """What one pod set asks of one resource in one flavor, against that flavor's quota in the ClusterQueue."""

    pod_set: str
    count: int
    flavor: str
    resource: str
    per_pod: Decimal
    requested: Decimal
    nominal: Decimal
    used: Decimal
    borrowing_limit: Optional[Decimal]
    lending_limit: Optional[Decimal]
    #: The most this ClusterQueue could ever hold of it (nominal plus what the cohort can lend, capped by the borrowing limit).
    potential: Decimal
    #: What the cohort can lend on top of the nominal quota (None: no cohort).
    cohort_can_lend: Optional[Decimal]
    #: True: Kueue assigned this flavor; False: a candidate while pending.
    assigned: bool
    verdict: str
    #: The largest allocatable of the resource on a node with the flavor's labels (None: nodes not known).
    largest_node: Optional[Decimal] = None

    @property
    def fits_a_node(self) -> Optional[bool]:
        if self.largest_node is None:
            return None
        return self.per_pod <= self.largest_node

    def to_dict(self) -> dict[str, Any]:
        return {
            "podSet": self.pod_set,
            "count": self.count,
            "flavor": self.flavor,
            "resource": self.resource,
            "assigned": self.assigned,
            "perPod": _number(self.per_pod),
            "requested": _number(self.requested),
            "nominalQuota": _number(self.nominal),
            "used": _number(self.used),
            "borrowingLimit": _number(self.borrowing_limit),
            "lendingLimit": _number(self.lending_limit),
            "cohortCanLend": _number(self.cohort_can_lend),
            "potentialAvailable": _number(self.potential),
            "verdict": self.verdict,
            "largestNode": _number(self.largest_node),
            "fitsANode": self.fits_a_node,
        }

    def sentence(self) -> str:
        r = self.resource
        text = f"{r}: {_fmt(self.requested, r)} of {_fmt(self.nominal, r)} quota ({_fmt(self.used, r)} in use)"
        if self.borrowing_limit is not None:
            text += f", borrowing limit {_fmt(self.borrowing_limit, r)}"
        if self.cohort_can_lend is not None:
            text += f", the cohort can lend {_fmt(self.cohort_can_lend, r)} more"
        if self.verdict == NEVER:
            if self.cohort_can_lend is None:
                text += " -- more than the whole quota of this flavor, and no cohort to borrow from: it can never be admitted here"
            else:
                text += (
                    f" -- more than the whole quota, and more than the {_fmt(self.potential, r)} it could ever hold with "
                    "borrowing: it can never be admitted here"
                )
        elif self.verdict == BORROWS:
            text += f" -- needs to borrow {_fmt(self.requested - self.nominal, r)} from the cohort"
            blocked = self.requested + self.used - self.potential
            if blocked > 0:
                text += f", and {_fmt(blocked, r)} of the {_fmt(self.used, r)} in use here must be freed first"
        elif self.verdict == WAITS:
            text += f" -- waits for {_fmt(self.requested - max(Decimal(0), self.nominal - self.used), r)} in use to be freed (or borrowed)"
        if self.fits_a_node is False:
            text += f"; one pod asks for {_fmt(self.per_pod, r)}, more than the largest node of this flavor has ({_fmt(self.largest_node or Decimal(0), r)})"
        return text


@dataclass(frozen=True)
class CheckState:
    """One admission check of the Workload, and the state of its ProvisioningRequest when there is one."""

    name: str
    state: str
    message: str = ""
    provisioning_request: Optional[str] = None
    #: provisioned | failed | capacity-revoked | booking-expired | accepted | waiting (None: no ProvisioningRequest found)
    provisioning_state: Optional[str] = None
    provisioning_message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "message": self.message,
            "provisioningRequest": self.provisioning_request,
            "provisioningState": self.provisioning_state,
            "provisioningMessage": self.provisioning_message,
        }

    def sentence(self) -> str:
        text = f"admission check {self.name}: {self.state}" + (f" ({self.message})" if self.message else "")
        if self.provisioning_request:
            text += f"; ProvisioningRequest {self.provisioning_request}: {self.provisioning_state}"
            if self.provisioning_message:
                text += f" ({self.provisioning_message})"
        return text


def _request_for_check(workload: Workload, check: str, requests: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """Kueue names them `<workload>-<check>-<attempt>` and owns them by the Workload; the latest attempt."""
    prefix = f"{workload.meta.name}-{check}-"
    uid = workload.meta.uid
    best: Optional[tuple[int, dict[str, Any]]] = None
    for request in requests:
        rmeta = request.get("metadata") or {}
        name = str(rmeta.get("name") or "")
        owners = rmeta.get("ownerReferences") or []
        if uid and owners and not any(o.get("uid") == uid for o in owners):
            continue
        if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
            continue
        attempt = int(name[len(prefix) :])
        if best is None or attempt > best[0]:
            best = (attempt, request)
    return best[1] if best else None


def check_states(workload: WorkloadLike, provisioning_requests: Optional[list[dict[str, Any]]]) -> list[CheckState]:
    view = workload_view(workload)
    if view is None:
        return []
    out = []
    for check in view.admission_checks:
        request = _request_for_check(view, check.name, provisioning_requests or [])
        state = message = None
        if request is not None:
            found = read_provisioning_state(request)
            state, message = found.state, found.words()
        out.append(
            CheckState(
                check.name, check.state or "Pending", check.message,
                (request or {}).get("metadata", {}).get("name"), state, message or "",
            )
        )  # fmt: skip
    return out


def _largest_node(flavor: Optional[dict[str, Any]], nodes: Optional[list[Node]], resource: str) -> Optional[Decimal]:
    """The most of `resource` one node that the flavor's nodeLabels select offers (cordoned nodes left out)."""
    if nodes is None:
        return None
    wanted = as_dict(as_dict(as_dict(flavor).get("spec")).get("nodeLabels"))
    best = Decimal(0)
    for node in nodes:
        if node.cordoned or any(node.meta.labels.get(k) != v for k, v in wanted.items()):
            continue
        value = quantity_or_none(node.allocatable.get(resource))
        if value is not None and value > best:
            best = value
    return best


def _verdict(requested: Decimal, nominal: Decimal, used: Decimal, potential: Decimal) -> str:
    if requested > potential:
        return NEVER
    if requested <= nominal - used:
        return FITS
    if requested <= nominal:
        return WAITS
    return BORROWS


def flavor_requests(
    workload: WorkloadLike,
    cluster_queue: dict[str, Any],
    cohort_members: Optional[list[dict[str, Any]]],
    flavors: Optional[dict[str, dict[str, Any]]] = None,
    nodes: Optional[list[dict[str, Any]]] = None,
    cohorts: Optional[Sequence[dict[str, Any]]] = (),
) -> tuple[list[FlavorRequest], list[str]]:
    """Rows per pod set, flavor and resource (assigned flavors once quota is reserved, every candidate before);
    and the requested resources no resource group of the ClusterQueue covers.

    `cohort_members`: the other ClusterQueues (None: not read); `cohorts`: the Cohort objects
    (None: not readable). Either unknown makes what the cohorts lend unknown."""
    queue = read_quota_holder(cluster_queue)
    forest = QuotaForest([*(cohort_members or []), queue], cohorts, complete=cohort_members is not None)
    view = workload_view(workload) or read_workload(None)
    assignments = {a.name: a for a in view.assignments}
    usage = cluster_queue_usage(cluster_queue)
    covered_all = queue.covered
    node_views = [read_node(n) for n in nodes if is_object(n)] if nodes is not None else None
    rows: list[FlavorRequest] = []
    uncovered: list[str] = []

    def row(ps: PodSet, flavor: str, resource: str, requested: Decimal, assigned: bool) -> FlavorRequest:
        q = queue.quota(flavor, resource) or ResourceQuota()
        used = usage.get((flavor, resource), Decimal(0))
        potential = forest.potential(queue, flavor, resource)
        return FlavorRequest(
            ps.name, ps.count, flavor, resource, ps.per_pod.get(resource, Decimal(0)), requested, q.nominal, used,
            q.borrowing_limit, q.lending_limit, potential,
            max(Decimal(0), potential - q.nominal) if queue.cohort else None, assigned,
            _verdict(requested, q.nominal, used, potential) if not assigned else FITS,
            _largest_node((flavors or {}).get(flavor), node_views, resource) if (flavors is not None or nodes is not None) else None,
        )  # fmt: skip

    for ps in view.pod_sets:
        asked = [r for r, v in ps.per_pod.items() if v > 0 and ps.count > 0]
        for resource in sorted(set(asked) - covered_all):
            if resource not in uncovered:
                uncovered.append(resource)
        assignment = assignments.get(ps.name)
        if assignment is not None and assignment.flavors:
            for resource, flavor in sorted(assignment.flavors.items()):
                requested = quantity_or_none(assignment.resource_usage.get(resource))
                if requested is None:
                    requested = ps.per_pod.get(resource, Decimal(0)) * ps.count
                rows.append(row(ps, flavor, resource, requested, True))
            continue
        for group in queue.groups:
            wanted = [r for r in group.covered if r in asked]
            if not wanted:
                continue
            for flavor in group.flavors:
                for resource in wanted:
                    rows.append(row(ps, flavor, resource, ps.per_pod[resource] * ps.count, False))
    return rows, uncovered


def fit_problems(rows: list[FlavorRequest], cluster_queue: dict[str, Any], uncovered: list[str]) -> list[str]:
    """Why the job could never be admitted: per pod set and resource group, no flavor with enough quota and a big enough node."""
    queue = read_quota_holder(cluster_queue)
    name = queue.name or "?"
    problems = [f"ClusterQueue {name} does not cover {r}: Kueue can never admit the job" for r in uncovered]
    by_podset: dict[str, list[FlavorRequest]] = {}
    for r in rows:
        if not r.assigned:
            by_podset.setdefault(r.pod_set, []).append(r)
    for podset, podset_rows in by_podset.items():
        for group in queue.groups:
            group_rows = [r for r in podset_rows if r.resource in group.covered]
            if not group_rows:
                continue
            usable = []
            for flavor in group.flavors:
                mine = [r for r in group_rows if r.flavor == flavor]
                if mine and all(r.verdict != NEVER and r.fits_a_node is not False for r in mine):
                    usable.append(flavor)
            if usable:
                continue
            reasons = []
            for flavor in group.flavors:
                mine = [r for r in group_rows if r.flavor == flavor]
                short = [f"{r.resource} {_fmt(r.requested, r.resource)} > {_fmt(r.potential, r.resource)}" for r in mine if r.verdict == NEVER]
                small = [f"one pod's {r.resource} {_fmt(r.per_pod, r.resource)} > largest node {_fmt(r.largest_node or Decimal(0), r.resource)}" for r in mine if r.fits_a_node is False]
                reasons.append(f"{flavor}: {', '.join(short + small)}")
            problems.append(
                f"pod set {podset} fits no flavor of ClusterQueue {name} for {', '.join(sorted({r.resource for r in group_rows}))} "
                f"({'; '.join(reasons)})"
            )
    return problems


@dataclass(frozen=True)
class KueueExplanation:
    """Everything `explain` knows about a Kueue-queued job, as data; `lines()` says it in words."""

    kind: str
    name: str
    namespace: str
    deployment: str
    job_status: Optional[str]
    job_id: Optional[str]
    reason: str
    dashboard: Optional[str]
    local_queue: Optional[str]
    cluster_queue: Optional[str]
    cohort: Optional[str]
    workload: Optional[str]
    state: str
    conditions: tuple[dict[str, Any], ...] = ()
    position: Optional[dict[str, Any]] = None
    checks: tuple[CheckState, ...] = ()
    requests: tuple[FlavorRequest, ...] = ()
    totals: tuple[tuple[str, Decimal], ...] = ()
    quota_readable: bool = True
    could_fit: Optional[bool] = None
    problems: tuple[str, ...] = ()
    managed_by_kueue: bool = True
    #: The cohorts above `cohort`, nearest first (Cohort objects' parentName).
    cohort_parents: tuple[str, ...] = ()
    #: Why Kueue deactivated the Workload (`deactivation`), in words; None when it did not.
    deactivated: Optional[str] = None
    #: Who holds the quota a pending job waits for, in words, largest first (`kueue.workload.quota_holders`).
    holders: tuple[str, ...] = ()
    #: Where Kueue's MultiKueue runs it, in words (`kueue.multikueue.where_it_runs`); None for a job this cluster runs.
    runs_in: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheduler": "kueue",
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "deployment": self.deployment,
            "jobStatus": self.job_status,
            "jobId": self.job_id,
            "reason": self.reason or None,
            "dashboard": self.dashboard,
            "managedByKueue": self.managed_by_kueue,
            "localQueue": self.local_queue,
            "clusterQueue": self.cluster_queue,
            "cohort": self.cohort,
            "cohortParents": list(self.cohort_parents),
            "workload": self.workload,
            "state": self.state,
            "deactivated": self.deactivated,
            "conditions": [dict(c) for c in self.conditions],
            "position": self.position,
            "admissionChecks": [c.to_dict() for c in self.checks],
            "units": "cpu in cores, memory in bytes, GPUs in devices",
            "requested": {r: _number(v) for r, v in self.totals},
            "flavors": [r.to_dict() for r in self.requests],
            "quotaReadable": self.quota_readable,
            "couldFit": self.could_fit,
            "neverFits": list(self.problems),
            "heldBy": list(self.holders),
            "runsIn": self.runs_in,
        }

    def summary(self) -> list[str]:
        """Where the job stands, without the per-flavor arithmetic: `status`'s text; a pending job points to `explain`."""
        lines = self._standing()
        if self.state == "pending" and self.workload is not None:
            lines.append(f"  why, per pod set and flavor against the quota: raybridge explain {self.name} -n {self.namespace}")
        return lines

    def _standing(self) -> list[str]:
        return [f"{self.kind} {self.namespace}/{self.name}", *self._state_lines(), self._queue_line(), *self._workload_lines()]

    def _state_lines(self) -> list[str]:
        """What KubeRay says: the deployment (or cluster state), its reason and dashboard."""
        if self.kind == "RayJob":
            lines = [f"  deployment: {self.deployment}; Ray job: {self.job_status or 'not started'}" + (f" ({self.job_id})" if self.job_id else "")]
        else:
            lines = [f"  state: {self.deployment}"]
        if self.reason:
            lines.append(f"  reason: {self.reason}")
        if self.runs_in is not None:
            # The manager's copy holds the worker's status (kueue.multikueue): its cluster and dashboard are there.
            lines.append(f"  runs in: {self.runs_in} (Kueue's MultiKueue copies the job there and its status back here; "
                         "its Ray cluster, dashboard and logs are there, not in this cluster)")  # fmt: skip
            if self.dashboard:
                lines.append(f"  dashboard: {self.dashboard} (in the worker cluster: raybridge dashboard {self.name} -n {self.namespace} with its kubeconfig)")
        elif self.dashboard:
            # KubeRay's dashboardURL is the head Service's in-cluster name: from outside, `raybridge dashboard` forwards it.
            lines.append(f"  dashboard: {self.dashboard} (in the cluster; from here: raybridge dashboard {self.name} -n {self.namespace})")
        return lines

    def _queue_line(self) -> str:
        if not self.managed_by_kueue:
            return "  queue: none (no kueue.x-k8s.io/queue-name label; Kueue does not manage it)"
        queue = f"  queue: LocalQueue {self.local_queue}" + (f" -> ClusterQueue {self.cluster_queue}" if self.cluster_queue else "")
        parents = "".join(f" under {p}" for p in self.cohort_parents)
        return queue + (f" (cohort {self.cohort}{parents})" if self.cohort else "")

    def _workload_lines(self) -> list[str]:
        """What Kueue says: the Workload's state, deactivation, conditions, admission checks and position."""
        if not self.managed_by_kueue:
            return []
        if self.workload is None:
            return ["  Kueue has not created a Workload for it yet (is Kueue running, and the LocalQueue there?)"]
        lines = [f"  Kueue workload {self.workload}: {self.state}"]
        if self.deactivated:
            lines.append(f"  Kueue deactivated it: {self.deactivated}; it will not be admitted again")
        for cond in self.conditions:
            lines.append(f"    {cond['type']}={cond.get('status')}" + (f" ({reason_words(cond)})" if reason_words(cond) else ""))
        for check in self.checks:
            lines.append(f"    {check.sentence()}")
        where = position_words(self.position)
        if where and self.state == "pending":
            lines.append(f"  position: {where}")
        return lines

    def lines(self) -> list[str]:
        """Everything in words: where the job stands, then what each pod set asks of each flavor and whether it fits."""
        lines = self._standing()
        if not self.managed_by_kueue or self.workload is None:
            return lines
        if not self.quota_readable or not self.requests:
            if self.totals:
                lines.append("  asks for:" + ("" if self.quota_readable else " (ClusterQueue quota not readable)"))
                for resource, value in self.totals:
                    lines.append(f"    {resource}: {_fmt(value, resource)}")
            return lines
        lines.append("  asks for, per pod set and flavor:")
        current = None
        for row in self.requests:
            key = (row.pod_set, row.flavor)
            if key != current:
                current = key
                how = "assigned" if row.assigned else "candidate"
                lines.append(f"    pod set {row.pod_set} ({row.count} pod{'s' if row.count != 1 else ''}), flavor {row.flavor} ({how}):")
            lines.append(f"      {row.sentence()}")
        return lines + self._conclusion() + self._holders()

    def _holders(self) -> list[str]:
        """Who holds the quota a pending job waits for: the first HOLDERS_SHOWN, the others counted."""
        if self.state != "pending" or not self.holders:
            return []
        shown = [f"    {text}" for text in self.holders[:HOLDERS_SHOWN]]
        more = len(self.holders) - HOLDERS_SHOWN
        return ["  holding that quota now, largest first:", *shown, *([f"    and {more} more"] if more > 0 else [])]

    def _conclusion(self) -> list[str]:
        """Whether a pending job could ever be admitted, from the per-flavor arithmetic."""
        if self.state != "pending" or not self.quota_readable or not self.requests:
            return []
        if self.problems:
            return ["  it can never be admitted as it is:", *(f"    {p}" for p in self.problems)]
        if [r for r in self.requests if not r.assigned and r.verdict != FITS]:
            return ["  it could fit: a flavor has enough quota for each pod set once quota is freed or borrowed"]
        return ["  it fits the quota: it waits for something else (admission checks, its turn, or Kueue's next pass)"]

    def verdict(self) -> list[str]:
        """What the picture's bars do not show (its title and subtitle name the job and queue): the state, Kueue's
        conditions and checks, and the conclusion."""
        return [*self._state_lines(), *self._workload_lines(), *self._conclusion()]


#: How many quota holders `explain` names before it counts the rest.
HOLDERS_SHOWN = 5


def _ordered_totals(asks: dict[str, Decimal]) -> tuple[tuple[str, Decimal], ...]:
    order = [r for r in RESOURCES_SHOWN if r in asks] + sorted(set(asks) - set(RESOURCES_SHOWN))
    return tuple((r, asks[r]) for r in order)


def progress_line(ray_object: dict[str, Any], workload: WorkloadLike, position: Optional[dict[str, Any]]) -> str:
    """One line saying where the job stands now; printed when it changes."""
    ray = ray_state(ray_object)
    deployment = ray.shown()
    view = workload_view(workload)
    queue = (view.queue_name or None) if view is not None else None
    stopped = view.deactivation if view is not None else None
    state = view.state if view is not None else "none"
    if view is not None and state == "pending":
        reserved = view.condition("QuotaReserved")
        text = f"queued in {queue}" if queue else "queued"
        if reserved is not None and not reserved.true:
            text += f": {reserved.words()}"
        elif reserved is not None:
            text += ": quota reserved, waiting for admission checks"
        where = position_words(position)
        checks = [check.words() for check in view.admission_checks]
        return text + (f" ({where})" if where else "") + (f"; checks: {'; '.join(checks)}" if checks else "")
    if stopped is not None:
        return f"deactivated by Kueue{f' in {queue}' if queue else ''}: {stopped.words}; it will not be admitted again"
    if view is not None and state == "evicted":
        return f"evicted{f' from {queue}' if queue else ''}: {reason_words(view.condition('Evicted'))}; waiting to be admitted again"
    if state == "admitted" and deployment in ("New", "Suspended", "Suspending"):
        # Kueue admits first; KubeRay unsuspends at its next reconcile (Suspended -> New -> Initializing).
        return f"admitted{f' by {queue}' if queue else ''}; waiting for KubeRay to start the Ray cluster"
    if deployment in ("Initializing", "Running", "Waiting") or (ray.kind == "RayCluster" and ray.deployment == "ready"):
        workers = f", workers ready {ray.workers_ready}/{ray.workers_desired}" if ray.workers_desired else ""
        admitted = f"admitted{f' by {queue}' if queue else ''}; " if state == "admitted" else ""  # no Kueue: nothing admits
        return f"{admitted}Ray cluster {deployment.lower()}{workers}"
    queued = bool(read_meta(ray_object).label(KUEUE_QUEUE_LABEL))
    if state == "none" and queued and deployment in ("Suspended", "New", ""):
        return "waiting for Kueue to pick the job up (no Workload yet)"
    if deployment in ("New", ""):
        return "waiting for KubeRay to take it up"
    if deployment == "Suspending":
        return "suspending: KubeRay is taking its Ray cluster down"
    if deployment == "Suspended":
        return "suspended" + ("; waiting for Kueue to admit it" if queued else "")
    return deployment + (f" ({ray.why()})" if ray.reason else "")


def explain_kueue(
    ray_object: dict[str, Any],
    workload: WorkloadLike,
    position: Optional[dict[str, Any]],
    cluster_queue: Optional[dict[str, Any]],
    cluster_queue_name: Optional[str] = None,
    *,
    cohort_members: Optional[list[dict[str, Any]]] = None,
    cohorts: Optional[Sequence[dict[str, Any]]] = (),
    flavors: Optional[dict[str, dict[str, Any]]] = None,
    nodes: Optional[list[dict[str, Any]]] = None,
    provisioning_requests: Optional[list[dict[str, Any]]] = None,
    holders: Optional[Sequence[dict[str, Any]]] = None,
) -> KueueExplanation:
    """The whole Kueue picture of one RayJob/RayCluster.

    `cohort_members`: the other ClusterQueues (any; only its cohort tree counts; None: not
    read); `cohorts`: the Cohort objects (None: not readable); `holders`: the Workloads that may hold
    its quota (None: not read). Unknown lending is shown as
    unknown and never makes a verdict "never"."""
    meta = read_meta(ray_object)
    state = ray_state(ray_object)
    kind = state.kind
    view = workload_view(workload)
    stopped = view.deactivation if view is not None else None
    queue = meta.label(KUEUE_QUEUE_LABEL) or None
    base = dict(
        kind=kind,
        name=meta.name,
        namespace=meta.namespace,
        deployment=state.shown("New" if kind == "RayJob" else "not ready"),
        job_status=state.job_status or None,
        job_id=state.job_id or None,
        reason=state.why() if kind == "RayJob" else "",
        dashboard=state.dashboard or None,
        local_queue=queue or ((view.queue_name or None) if view is not None else None),
        cluster_queue=cluster_queue_name,
        cohort=cohort_of(cluster_queue) if cluster_queue else None,
        cohort_parents=tuple(QuotaForest([], cohorts).parents(cluster_queue)[1:]) if cluster_queue else (),
        workload=(view.meta.name or None) if view is not None else None,
        state=view.state if view is not None else "none",
        deactivated=stopped.words if stopped is not None else None,
        runs_in=where_it_runs(view) if dispatched_by_multikueue(ray_object) else None,
    )
    if not queue and view is None:
        return KueueExplanation(**base, managed_by_kueue=False)  # type: ignore[arg-type]
    if view is None:
        return KueueExplanation(**base)  # type: ignore[arg-type]
    kinds = ("QuotaReserved", "Admitted", "DeactivationTarget", "Evicted", "Preempted", "Requeued", "Finished")
    conditions = tuple(dict(c) for kind_ in kinds if (c := view.condition_entry(kind_)))
    totals = _ordered_totals(view.requests())
    checks = tuple(check_states(view, provisioning_requests))
    if cluster_queue is None:
        return KueueExplanation(**base, conditions=conditions, position=position, checks=checks, totals=totals, quota_readable=False)  # type: ignore[arg-type]
    rows, uncovered = flavor_requests(view, cluster_queue, cohort_members, flavors, nodes, cohorts)
    pending = base["state"] == "pending"
    problems = tuple(fit_problems(rows, cluster_queue, uncovered)) if pending else ()
    held: tuple[str, ...] = ()
    if pending and holders is not None:
        asked = [r for r, _ in totals]
        gpus = [r for r in asked if "gpu" in r.lower()]
        cohort = cohort_of(cluster_queue)
        lenders = [read_meta(m).name for m in cohort_members or [] if cohort and cohort_of(m) == cohort]
        scope = [cluster_queue_name or read_meta(cluster_queue).name, *lenders]
        held = tuple(h.words(gpus or asked) for h in quota_holders(holders, scope, gpus or asked, exclude=view.meta.name))
    return KueueExplanation(
        **base,  # type: ignore[arg-type]
        conditions=conditions, position=position, checks=checks, requests=tuple(rows), totals=totals,
        could_fit=(not problems) if pending else None, problems=problems, holders=held,
    )  # fmt: skip


def explain(
    ray_object: dict[str, Any],
    workload: Optional[dict[str, Any]],
    position: Optional[dict[str, Any]],
    cluster_queue: Optional[dict[str, Any]],
    cluster_queue_name: Optional[str] = None,
) -> list[str]:
    """The `status` command's plain-words report, from what `status` reads (no cohort, flavors or nodes)."""
    return explain_kueue(ray_object, workload, position, cluster_queue, cluster_queue_name).lines()


