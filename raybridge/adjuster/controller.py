"""The adjuster's event wiring: informers feed caches, a debounced reconcile loop decides and acts, leader election.

The caches are `kube.informer.Informer`s (list, then watch, relist on 410):
pods, nodes and KAI's PodGroups, plus ProvisioningRequests and PodTemplates
in `--mode provisioning-request`. PodGroups (whose scheduling conditions say
when a pod's queue is over quota) are optional: where the cluster serves no
PodGroup API (404) or RBAC forbids listing it (403), one warning is logged, the
`podgroups_unavailable` gauge is 1 and the adjuster goes on without them (a pod
is then quota-blocked only when its own condition says so), asking again every
few minutes. The DRA objects (ResourceSlices, DeviceClasses, ResourceClaims of
resource.k8s.io/v1, `DraCaches`) are optional the same way: without them no
node's GPUs are seen as devices and no pod's claims are planned. `Controller` reconciles on events (debounced, so a burst is one
pass) and on a timer (so a pod's grace period ending is noticed within `resync`
seconds). Each pass has a decide step that differs by mode
(`scale_adjuster.decide` for placeholder pods, `decide_requests` for
ProvisioningRequests) and one act step for both (`_act`: deletions, creations,
ScaleUpRequested and ScaleUpIgnored Events), which hands every call to the
`Scaler`. With leader election on, only the holder of a coordination.k8s.io
Lease acts (`kube.lease`); a standby keeps nothing but its health server. On a
clean stop the leader stops acting, then clears the Lease's holder so a standby
takes over at its next retry instead of after a lease duration.

It renders nothing (the CLI sets up logging and exit statuses), and builds no
client of its own: the informers list through the API objects of the `Kube` it
is given (`adjuster run`'s connection), every write is the `Scaler`'s.
"""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
import uuid
from collections import Counter as Tally
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from raybridge.adjuster.decision import consts
from raybridge.adjuster.caches import DraCaches, LeaderCaches
from raybridge.adjuster.kept_views import KeptPodViews
from raybridge.adjuster.metrics import Metrics
from raybridge.adjuster.nodes_as_read import NodesAsRead
from raybridge.adjuster.preflight import kai_adjuster_pods, kai_adjuster_verdict
from raybridge.adjuster.decision.claims import CLAIM_UNPLANNABLE
from raybridge.adjuster.decision.demand import DRA_ONLY_NODES, ClusterSnapshot, IgnoredPod
from raybridge.adjuster.decision.plan import AdjusterPlan
from raybridge.adjuster.decision.placeholders import PlannedPlaceholder
from raybridge.adjuster.decision.refusals import Refusal, held_back, limits_reached, refusals
from raybridge.adjuster.decision.searches import BUILD as SEARCH_BUILD
from raybridge.adjuster.decision.scale_adjuster import (
    Pass,
    PlannedRequest,
    RequestPass,
    decide,
    decide_requests,
    hold_patch,
    is_placeholder,
    node_holds,
    placeholder_manifest,
    read_placeholder,
    request_state,
)
from raybridge.adjuster.scaler import Scaler
from raybridge.adjuster.decision.settings import RunSettings
from raybridge.autoscalers.provisioning_request import read_provisioning_state
from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.kai.names import KAI_POD_GROUP_GROUP, KAI_POD_GROUP_PLURAL, KAI_POD_GROUP_VERSION
from raybridge.core.dra import RESOURCE_GROUP, RESOURCE_VERSION
from raybridge.core.views import Node
from raybridge.kube.client import Kube
from raybridge.kube.informer import Informer, object_key, one_line_error
from raybridge.kube.lease import releasable_lease_lock, run_elections

log = logging.getLogger("raybridge.adjuster")


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a pass reads its snapshot and decides.

    The informers hold every pod and node as parsed JSON (680,000 objects the collector tracks at 10,000 pending pods
    and 2,000 nodes), and a pass allocates enough to set off a full collection, which walks them all, every other pass:
    0.4 to 0.7 s on top of a 1.1 s decision there (docs/benchmarks.md). What a pass allocates is freed by reference
    counting as it ends; the collector, back on, takes any cycle then. Process-wide, so it holds off for the
    informers' threads too, for the pass's second or so.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


#: Why a waiting ProvisioningRequest is deleted when its group's demand changed (a new one asks for it all).
REPLACED = "replaced"
#: Events posted per reconcile pass at most (one per pod acted for; the rest wait for the next pass).
MAX_EVENTS_PER_PASS = 50
#: Why a GPU-sharing pod is not counted, worth a Warning Event on it (once): what its owner can fix.
#: Passing states (not yet Unschedulable, inside the grace period, bound, finished) get none.
REPORTED_IGNORED_CODES = frozenset({
    "bad-annotation", "bad-constraints", "too-many-devices", "memory-exceeds-gpu", "quota-blocked",
    "other-scheduler", "whole-gpu-request", DRA_ONLY_NODES, CLAIM_UNPLANNABLE,
})


@dataclass(frozen=True)
class _Creation:
    """One thing a pass asks capacity with (a placeholder pod, or a ProvisioningRequest and its PodTemplates)."""

    name: str
    gpus: int
    resource_key: str
    #: "namespace/name" of the pods it asks for.
    pods: tuple[str, ...]
    #: Makes the objects; True when they exist.
    create: Callable[[], bool]
    #: What follows once they exist (a request deletes the ones it replaces).
    then: Callable[[], None] = lambda: None


@dataclass
class _Acts:
    """What one pass does, whichever mode decided it: the deletions, then the creations, then the Events."""

    #: "placeholder" or "ProvisioningRequest", for logs and Events; `log_key`: the structured log field.
    noun: str
    log_key: str
    deletions: list[Callable[[], None]] = field(default_factory=list)
    creations: list[_Creation] = field(default_factory=list)


class Controller:
    def __init__(self, settings: RunSettings, kube: Kube, metrics: Optional[Metrics] = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.settings = settings
        self.kube = kube
        self.metrics = metrics or Metrics()
        for build in ("compiled", "interpreted"):
            self.metrics.search_build.labels(build=build).set(1 if SEARCH_BUILD.kind == build else 0)
        self.clock = clock
        self.stop = threading.Event()
        self.leading = threading.Event()
        self.last_loop = time.monotonic()
        self.passes = 0
        self._notified: set[str] = set()
        #: Nodes whose hold or release failed (said once until it works).
        self._hold_failed: set[str] = set()
        #: When a hold was last refused for want of permission (monotonic): no node is patched for a while.
        self._holds_refused_at: Optional[float] = None
        self._request_states: dict[str, str] = {}
        #: Per constraints and vendor, the largest GPU memory of their nodes and when a pass last knew one (monotonic).
        self._memories: dict[tuple[tuple[str, str, str], str], tuple[int, float]] = {}
        #: Per group, the autoscaler's last refusal of one of its placeholders (refusals.py), while it holds the group back.
        self._refusals: dict[str, Refusal] = {}
        self._kai_seen = False
        #: Passes in a row whose creations stopped when the nodes changed (`_act`).
        self._cut_short = 0
        #: The pod cache's objects as views, kept while the cache keeps the object (what a pass read of them with it).
        self._pod_views = KeptPodViews()
        self._lead_lock = threading.Lock()
        self._informers: list[Informer] = []
        self._term = self.stop
        self.identity = settings.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"

    # --- health -----------------------------------------------------------------------------

    def healthy(self) -> bool:
        if not self.leading.is_set():
            return not self.stop.is_set()
        return time.monotonic() - self.last_loop < max(30.0, 10 * self.settings.resync)

    def ready(self) -> bool:
        if not self.leading.is_set():
            return not self.stop.is_set()  # a standby is ready to take over
        return all(i.synced.is_set() for i in self._informers) and bool(self._informers)

    # --- running ------------------------------------------------------------------------------

    def run(self) -> None:
        """Until `stop` is set: lead (directly, or whenever the Lease is ours)."""
        if not self.settings.leader_election:
            self._lead(self.stop)
            return
        s = self.settings
        lock = releasable_lease_lock(s.lease_name, s.lease_namespace or s.namespace, self.identity, self.kube.api_client, log)
        elect = partial(run_elections, lock, lease_duration=s.lease_duration, renew_deadline=s.renew_deadline,
                        retry_period=s.retry_period, lead=self._lead, stop=self.stop, logger=log)
        threading.Thread(target=elect, name="adjuster-election", daemon=True).start()
        self.stop.wait()
        # The official module has no cancel: its thread is a daemon and ends with the process. Once
        # this replica has stopped acting, it gives the Lease up so that a standby need not wait a
        # whole lease duration (client-go's ReleaseOnCancel; the Python module has no such option).
        if self._lead_lock.acquire(timeout=max(10.0, 2 * s.request_timeout)):
            self._lead_lock.release()
            released = lock.release(s.request_timeout)
            log.info("released the Lease %s" if released else "did not hold the Lease %s: nothing to release", s.lease_name)
        else:
            log.warning("still acting after the stop: leaving the Lease %s to expire", s.lease_name)

    def _lead(self, term: threading.Event) -> None:
        """Act until `term` or `stop` is set; a new term waits until the last one has finished acting."""
        with self._lead_lock:
            if not (term.is_set() or self.stop.is_set()):
                self._lead_term(term)

    def _lead_term(self, term: threading.Event) -> None:
        log.info("leading: reconciling placeholders in namespace %s (exact packing searches: %s)", self.settings.namespace, SEARCH_BUILD)
        self._term = term
        self.leading.set()
        self.metrics.leader.set(1)
        changed = threading.Event()
        halt = threading.Event()
        caches = self._caches(halt, changed)
        self._informers = caches.all
        scaler = Scaler(self.kube, request_timeout=self.settings.request_timeout, stop=(halt, term, self.stop),
                        on_api_error=self._count_api_error)
        for informer in self._informers:
            informer.start()
        try:
            self._reconcile_until_stopped(term, changed, caches, scaler)
        finally:
            halt.set()
            for informer in self._informers:
                informer.halt()
            # Their threads end at their next check of `halt`: waited for (bounded), so that none still logs
            # while the process exits (a daemon thread holding stderr then aborts the interpreter's shutdown).
            for informer in self._informers:
                informer.thread.join(max(1.0, self.settings.request_timeout))
            self.leading.clear()
            self.metrics.leader.set(0)
            # What this term read, let go: a standby holds no copy of the cluster, and a later term lists its own.
            self._informers = []
            self._pod_views = KeptPodViews()
            log.info("stopped leading")

    def _count_api_error(self, operation: str, code: str) -> None:
        self.metrics.api_errors.labels(operation, code).inc()

    def _caches(self, halt: threading.Event, changed: threading.Event) -> LeaderCaches:
        """The informers this mode reads (not started), listing through the `Kube`'s API objects."""
        cache = partial(Informer, request_timeout=self.settings.request_timeout, stop=halt, changed=changed,
                        on_error=self._count_api_error, watch_timeout=consts.WATCH_TIMEOUT_SECONDS, logger=log)
        core, custom = self.kube.core(), self.kube.custom()
        pod_groups = cache(
            "podgroups", partial(custom.list_cluster_custom_object, KAI_POD_GROUP_GROUP, KAI_POD_GROUP_VERSION, KAI_POD_GROUP_PLURAL),
            optional=True, on_available=lambda available: self.metrics.podgroups_unavailable.set(0 if available else 1),
            unavailable_note="a pod then counts as quota-blocked only where its own condition says so",
        )  # fmt: skip
        dra = DraCaches(*(cache(plural, partial(custom.list_cluster_custom_object, RESOURCE_GROUP, RESOURCE_VERSION, plural), optional=True,
                                unavailable_note=note)
                          for plural, note in (("resourceslices", "no node's GPUs are seen as DRA devices"),
                                               ("deviceclasses", "no node's GPUs are seen as DRA devices"),
                                               ("resourceclaims", "pods whose GPUs come through claims are not planned"))))
        caches = LeaderCaches(cache("pods", core.list_pod_for_all_namespaces), cache("nodes", core.list_node), pod_groups, dra=dra)
        if self.settings.mode == "placeholder":
            # Read on each pass, not a reason for one: kube-scheduler says something of a pending placeholder every few seconds.
            quiet = partial(cache, changed=threading.Event())
            caches.events = quiet("events", partial(core.list_namespaced_event, self.settings.namespace), optional=True,
                                  unavailable_note="what the autoscaler says of a placeholder is not read: a group it refuses is asked for again")
            caches.node_pools = quiet("nodepools", partial(custom.list_cluster_custom_object, consts.KARPENTER_GROUP, consts.KARPENTER_VERSION,
                                                           consts.NODE_POOL_PLURAL), optional=True)
        if self.settings.mode == "provisioning-request":
            caches.requests = cache("provisioningrequests", partial(
                custom.list_namespaced_custom_object, consts.PROVISIONING_GROUP, consts.PROVISIONING_VERSION,
                self.settings.namespace, consts.PROVISIONING_PLURAL, label_selector=consts.REQUEST_SELECTOR,
            ))  # fmt: skip
            caches.templates = cache("podtemplates", partial(
                core.list_namespaced_pod_template, self.settings.namespace, label_selector=consts.REQUEST_SELECTOR,
            ))  # fmt: skip
        return caches

    def _reconcile_until_stopped(self, term: threading.Event, changed: threading.Event, caches: LeaderCaches, scaler: Scaler) -> None:
        """A pass on every change (debounced) and every `resync` seconds, once every cache has synced."""
        while not (term.is_set() or self.stop.is_set()):
            self.last_loop = time.monotonic()
            changed.wait(self.settings.resync)
            if term.is_set() or self.stop.is_set():
                break
            if changed.is_set() and self.settings.debounce:
                time.sleep(self.settings.debounce)
            changed.clear()
            if not caches.synced():
                continue
            try:
                if caches.requests is not None and caches.templates is not None:
                    self.reconcile_requests_once(caches.pods, caches.nodes, caches.requests, caches.templates, scaler,
                                                 caches.pod_groups, caches.dra)
                else:
                    self.reconcile_once(caches.pods, caches.nodes, scaler, caches.pod_groups, caches.dra, caches.events, caches.node_pools)
            except Exception as exc:  # noqa: BLE001 - a bad pass must not stop the next
                log.exception("reconcile failed: %s", one_line_error(exc))

    # --- one pass: decide (by mode), then act (one step for both) ------------------------------

    def _snapshot(self, all_pods: list[dict[str, Any]], nodes: Informer, pod_groups: Optional[Informer],
                  dra: Optional[DraCaches] = None) -> ClusterSnapshot:
        """The pass's cluster, read once from the caches (both modes decide on it), with the GPU memories of pools seen
        in the last consts.MEMORY_SEEN_SECONDS (a pool scaled to zero since is still known by them)."""
        snapshot = ClusterSnapshot.read(all_pods, nodes.snapshot(), self.clock(), pod_groups.snapshot() if pod_groups is not None else (),
                                        **(dra.objects() if dra is not None else {}), pod_views=self._pod_views.pods)
        now = time.monotonic()
        self._memories = {key: seen for key, seen in self._memories.items() if now - seen[1] < consts.MEMORY_SEEN_SECONDS}
        snapshot.memories_seen = {key: mib for key, (mib, _) in self._memories.items()}
        return snapshot

    def _saw(self, plan: AdjusterPlan) -> None:
        """Remember the GPU memories of the pools this pass knew nodes of."""
        now = time.monotonic()
        self._memories.update({key: (mib, now) for key, mib in plan.memories_seen.items()})

    def reconcile_once(self, pods: Informer, nodes: Informer, scaler: Scaler, pod_groups: Optional[Informer] = None,
                       dra: Optional[DraCaches] = None, events: Optional[Informer] = None, node_pools: Optional[Informer] = None) -> Pass:
        """--mode placeholder: placeholder pods that bring nodes up."""
        started = time.perf_counter()
        all_pods = pods.snapshot()
        revision = nodes.revision
        with collector_paused():
            snapshot = self._snapshot(all_pods, nodes, pod_groups, dra)
        held_back = self._refused(snapshot, all_pods, events, node_pools, scaler)
        with collector_paused():
            result = decide(snapshot, self.settings, held_back)
        decision = result.decision
        self._saw(decision.plan)
        # First, before any create or delete: a node a placeholder was just bound to is held while that
        # placeholder has not run yet, so no other placeholder is bound to its GPUs once it exits.
        self._hold_nodes(nodes, snapshot.nodes or [], scaler, decision.held_nodes)
        acts = _Acts("placeholder", "placeholder")
        uids = {ph.name: ph.uid for ph in result.placeholders}  # the placeholders this pass decided on
        acts.deletions = [partial(self._delete_placeholder, scaler, pods, name, reason, uids.get(name) or None) for name, reason in decision.delete]
        acts.creations = [self._placeholder_creation(scaler, pods, planned) for planned in decision.create]
        self._act(acts, all_pods, decision.plan.ignored, scaler, NodesAsRead(nodes, revision, snapshot.nodes or []))
        states = {"pending": sum(p.placeholder.gpus for p in decision.create), "provided": 0}
        self._record(decision.plan, states, [(ph.state, ph.gpus) for ph in result.placeholders], started)
        return result

    def _refused(self, snapshot: ClusterSnapshot, all_pods: Sequence[Mapping[str, Any]], events: Optional[Informer],
                 node_pools: Optional[Informer], scaler: Scaler) -> dict[str, str]:
        """The groups whose placeholder the autoscaler said it brings no node for, lately (refusals.py), and why: said
        once per placeholder (a log line, a ScaleUpRefused Warning on each pod it was for), counted in a gauge; they get
        no new placeholder until consts.REFUSAL_HOLD_SECONDS after the autoscaler last said so."""
        namespace = self.settings.namespace
        placeholders = {p.meta.name: p for p in snapshot.pods
                        if is_placeholder(p, namespace) and not (p.bound or p.finished or p.meta.deleting)}
        pending = {name: (p.meta.uid, p.meta.label(consts.GROUP_LABEL) or "default") for name, p in placeholders.items()}
        found = refusals(events.snapshot(), pending) if events is not None and pending else {}
        pools = node_pools.snapshot() if node_pools is not None else []

        def why(refusal: Refusal) -> tuple[str, tuple[str, ...]]:
            """The autoscaler's words and the NodePool limits that leave too little; the pods the placeholder was for."""
            placeholder = placeholders.get(refusal.placeholder)
            read = read_placeholder(placeholder) if placeholder is not None else None
            resource = GPU_RESOURCE_KEYS.get(refusal.group.split("-", 1)[0], GPU_RESOURCE_KEYS["nvidia"])
            return refusal.sentence(limits_reached(pools, resource, read.gpus if read else 1)), (read.pods if read else ())

        pods_by_key = {object_key(p): p for p in all_pods} if found else {}
        for group, refusal in found.items():
            known = self._refusals.get(group)
            self._refusals[group] = refusal
            if known is not None and known.uid == refusal.uid:
                continue  # said already
            said, its_pods = why(refusal)
            log.warning("%s; group %s gets no new placeholder for %g s", said, group, consts.REFUSAL_HOLD_SECONDS,
                        extra={"placeholder": refusal.placeholder, "group": group})
            for key in [k for k in its_pods if k in pods_by_key][:MAX_EVENTS_PER_PASS]:
                self._event(scaler, pods_by_key[key], "ScaleUpRefused", f"no node comes for the placeholder asked for this pod: {said}",
                            "Warning")
        self._refusals = held_back(self._refusals, snapshot.now, consts.REFUSAL_HOLD_SECONDS)
        self.metrics.refused_groups.set(len(self._refusals))
        return {group: f"{why(r)[0]}; asked again once that is {consts.REFUSAL_HOLD_SECONDS:g} s old" for group, r in self._refusals.items()}

    def reconcile_requests_once(self, pods: Informer, nodes: Informer, requests: Informer, templates: Informer,
                                scaler: Scaler, pod_groups: Optional[Informer] = None, dra: Optional[DraCaches] = None) -> RequestPass:
        """--mode provisioning-request: one ProvisioningRequest (and its PodTemplates) per group and round."""
        started = time.perf_counter()
        all_pods = pods.snapshot()
        request_objects = requests.snapshot()
        self._report_request_states(request_objects)
        revision = nodes.revision
        with collector_paused():
            snapshot = self._snapshot(all_pods, nodes, pod_groups, dra)
            result = decide_requests(snapshot, request_objects, templates.snapshot(), self.settings)
        self._saw(result.decision.plan)
        acts = _Acts("ProvisioningRequest", "request")
        acts.deletions = [partial(self._delete_request, scaler, requests, templates, name, reason)
                          for name, reason in [*result.decision.delete, *((name, REPLACED) for name in result.superseded)]]
        acts.deletions += [partial(self._delete_template, scaler, templates, name) for name in result.orphan_templates]
        acts.creations = [self._request_creation(scaler, requests, templates, planned) for planned in result.create]
        self._act(acts, all_pods, result.decision.plan.ignored, scaler, NodesAsRead(nodes, revision, snapshot.nodes or []))
        states = {"pending": sum(p.gpus for p in result.create), "provided": 0}
        self._record(result.decision.plan, states, [(r.state, r.gpus) for r in result.requests], started)
        return result

    def _act(self, acts: _Acts, all_pods: Sequence[Mapping[str, Any]], ignored: Sequence[IgnoredPod], scaler: Scaler,
             nodes_as_read: Optional[NodesAsRead] = None) -> None:
        """The one act step of both modes: delete, then create (unless KAI's own adjuster runs) while the nodes offer
        what the pass read (`NodesAsRead`; the rest is left to the next pass), then tell the pods."""
        for delete in acts.deletions:
            if self._stopping():
                break
            delete()
        pods_by_key = {object_key(p): p for p in all_pods}
        events = 0
        in_a_row, self._cut_short = self._cut_short, 0
        check = nodes_as_read is not None and in_a_row < consts.PASSES_CUT_SHORT_IN_A_ROW
        creations = [] if self._kai_adjuster_running(list(all_pods)) else acts.creations
        for done, creation in enumerate(creations):
            if self._stopping():
                break
            if check and nodes_as_read is not None and not nodes_as_read.unchanged():
                self._cut_short = in_a_row + 1
                log.info("the nodes changed while this pass created: %d of its %d %ss left to the next pass", len(creations) - done,
                         len(creations), acts.noun, extra={"left": len(creations) - done})
                break
            if not creation.create():
                continue
            self.metrics.actions.labels("create", "demand").inc()
            log.info("created %s %s: %d %s for %d pods", acts.noun, creation.name, creation.gpus, creation.resource_key,
                     len(creation.pods), extra={acts.log_key: creation.name, "gpus": creation.gpus, "pods": len(creation.pods)})
            creation.then()
            events = self._tell_requested(scaler, acts.noun, creation, pods_by_key, events)
        self._tell_ignored(scaler, ignored, pods_by_key, events)

    def _tell_requested(self, scaler: Scaler, noun: str, creation: _Creation, pods_by_key: Mapping[str, Any], events: int) -> int:
        """A ScaleUpRequested Event on each pod `creation` asks for (within the pass's budget); the Events posted so far."""
        others = len(creation.pods) - 1
        message = (f"asked for {creation.gpus} {creation.resource_key} for this pod" + (f" and {others} others" if others else "")
                   + f" ({noun} {self.settings.namespace}/{creation.name})")
        for pod_name in creation.pods:
            pod = pods_by_key.get(pod_name)
            if pod is None or events >= MAX_EVENTS_PER_PASS:
                continue
            self._event(scaler, pod, "ScaleUpRequested", message)
            events += 1
        return events

    def _tell_ignored(self, scaler: Scaler, ignored: Sequence[IgnoredPod], pods_by_key: Mapping[str, Any], events: int) -> None:
        """A ScaleUpIgnored Warning, once, on each pod not counted for a reason its owner can fix."""
        reported = [i for i in ignored if i.code in REPORTED_IGNORED_CODES]
        self._notified &= {i.pod for i in reported}  # a pod that recovers and fails again is told again
        for pod_ignored in reported:
            if pod_ignored.pod in self._notified or events >= MAX_EVENTS_PER_PASS:
                continue
            pod = pods_by_key.get(pod_ignored.pod)
            if pod is not None:
                self._notified.add(pod_ignored.pod)
                self._event(scaler, pod, "ScaleUpIgnored", f"the node-scale-adjuster does not count this pod: {pod_ignored.reason}",
                            "Warning")
                events += 1

    def _record(self, plan: AdjusterPlan, states: dict[str, int], existing: Sequence[tuple[str, int]], started: float) -> None:
        """The pass's gauges: demand, ignored pods, GPUs asked for by state (`existing`: (state, GPUs) of what exists)."""
        self.metrics.set_demand({v: float(d) for v, d in plan.demand_by_vendor.items()})
        self.metrics.set_ignored(dict(Tally(i.code for i in plan.ignored)))
        for state, gpus in existing:
            if state in states:
                states[state] += gpus
        for state, gpus in states.items():
            self.metrics.placeholder_gpus.labels(state).set(gpus)
        self.passes += 1
        self.metrics.reconcile_seconds.observe(time.perf_counter() - started)

    def _kai_adjuster_running(self, all_pods: list[dict[str, Any]]) -> bool:
        """Whether KAI's own node-scale-adjuster is at work (its pods or its scaling pods): then nothing is created,
        as both would ask for nodes for the same pods. Said once when it appears and once when it goes."""
        found = kai_adjuster_pods(all_pods)
        self.metrics.kai_adjuster_running.set(1 if found else 0)
        if found and not self._kai_seen:
            log.error("%s; creating nothing while it runs", kai_adjuster_verdict(found).problems[0])
        elif not found and self._kai_seen:
            log.info("KAI's node-scale-adjuster is gone: creating placeholders again")
        self._kai_seen = bool(found)
        return self._kai_seen

    # --- the acts of --mode placeholder ---------------------------------------------------------

    def _hold_nodes(self, nodes: Informer, listed: Sequence[Node], scaler: Scaler, held: frozenset[str]) -> None:
        """Keep the nodes placeholders brought up from voluntary disruption until their pods land (consts.HOLD_LABEL):
        `listed` as the pass read them; a node patched goes back into the `nodes` cache."""
        if self._holds_refused_at is not None and time.monotonic() - self._holds_refused_at < consts.HOLDS_RETRY_SECONDS:
            return
        holds = node_holds(listed, held)
        for name, hold in [(n, True) for n in holds.hold] + [(n, False) for n in holds.release]:
            if self._stopping():
                break
            outcome = scaler.patch_node(name, hold_patch(hold, holds.ours[name]))
            if outcome.status == 403:
                if self._holds_refused_at is None:
                    log.warning("node holds are off: %s (patching nodes is opt-in: apply %s so that Karpenter and "
                                "cluster-autoscaler leave a node the adjuster brought up alone until its pods land); trying again every %d minutes",
                                outcome.detail, consts.HOLD_GRANT_FILE, consts.HOLDS_RETRY_SECONDS // 60)
                self._holds_refused_at = time.monotonic()
                return
            self._holds_refused_at = None
            if outcome.ok:
                self._hold_failed.discard(name)
                if outcome.obj:
                    nodes.put(outcome.obj)
                log.info("%s node %s", "holding" if hold else "released", name, extra={"node": name})
            elif name not in self._hold_failed:  # said once per node until it works
                self._hold_failed.add(name)
                log.warning("could not %s node %s: %s", "hold" if hold else "release", name, outcome.detail)

    def _delete_placeholder(self, scaler: Scaler, pods: Informer, name: str, reason: str, uid: Optional[str] = None) -> None:
        """The placeholder this pass decided on (`uid`), not one made since under its name (kube-scheduler deletes a
        placeholder it preempts; the next pass may make one of the same name before the watch says the first is gone)."""
        outcome = scaler.delete_pod(self.settings.namespace, name, uid)
        if not outcome.ok:
            log.warning("could not delete placeholder %s: %s", name, outcome.detail)
            return
        if outcome.result == "replaced":
            log.info("placeholder %s was already replaced by another of its name: left alone", name, extra={"placeholder": name})
            return
        pods.forget(f"{self.settings.namespace}/{name}", uid)
        self.metrics.actions.labels("delete", reason).inc()
        log.info("deleted placeholder %s (%s)", name, reason, extra={"placeholder": name, "reason": reason})

    def _placeholder_creation(self, scaler: Scaler, pods: Informer, planned: PlannedPlaceholder) -> _Creation:
        def create() -> bool:
            outcome = scaler.create_pod(placeholder_manifest(planned, self.settings))
            if not outcome.ok:
                log.warning("could not create placeholder %s: %s", planned.name, outcome.detail)
                return False
            if outcome.obj:
                pods.put(outcome.obj)
            return True

        ph = planned.placeholder
        return _Creation(planned.name, ph.gpus, ph.resource_key, tuple(ph.pods), create)

    # --- the acts of --mode provisioning-request ------------------------------------------------

    def _report_request_states(self, request_objects: Sequence[Mapping[str, Any]]) -> None:
        """Follow and report the autoscaler's answer: one line per request whenever its state changes."""
        for obj in request_objects:
            meta = obj.get("metadata") or {}
            state = request_state(obj)
            key = f"{meta.get('name')}:{meta.get('uid')}"
            if self._request_states.get(key) == state:
                continue
            self._request_states[key] = state
            condition = read_provisioning_state(obj).condition
            log.info("ProvisioningRequest %s is %s%s", meta.get("name"), state,
                     f": {condition.reason}: {condition.message}" if condition is not None else "",
                     extra={"request": meta.get("name"), "state": state})

    def _request_creation(self, scaler: Scaler, requests: Informer, templates: Informer, planned: PlannedRequest) -> _Creation:
        def create() -> bool:
            created = [scaler.create_template(t) for t in planned.templates]
            if not all(o.ok for o in created):
                log.warning("could not create the PodTemplates of %s: %s", planned.name, "; ".join(o.detail for o in created if not o.ok))
                return False
            for outcome in created:
                if outcome.obj:
                    templates.put(outcome.obj)
            outcome = scaler.create_request(planned.request)
            if not outcome.ok:
                log.warning("could not create ProvisioningRequest %s: %s", planned.name, outcome.detail)
                return False
            requests.put(outcome.obj or planned.request)
            return True

        def then() -> None:
            for old in planned.replaces:  # the new request exists: the one it replaces goes
                self._delete_request(scaler, requests, templates, old, REPLACED)

        return _Creation(planned.name, planned.gpus, planned.resource_key, tuple(planned.pods), create, then)

    def _delete_request(self, scaler: Scaler, requests: Informer, templates: Informer, name: str, reason: str) -> None:
        ns = self.settings.namespace
        outcome = scaler.delete_request(ns, name)
        if not outcome.ok:
            log.warning("could not delete ProvisioningRequest %s: %s", name, outcome.detail)
            return
        requests.forget(f"{ns}/{name}")
        self.metrics.actions.labels("delete", reason).inc()
        log.info("deleted ProvisioningRequest %s (%s)", name, reason, extra={"request": name, "reason": reason})
        for template in templates.snapshot():
            if ((template.get("metadata") or {}).get("labels") or {}).get(consts.REQUEST_LABEL) == name:
                self._delete_template(scaler, templates, template["metadata"]["name"])

    def _delete_template(self, scaler: Scaler, templates: Informer, name: str) -> None:
        outcome = scaler.delete_template(self.settings.namespace, name)
        if outcome.ok:
            templates.forget(f"{self.settings.namespace}/{name}")
        else:
            log.warning("could not delete PodTemplate %s: %s", name, outcome.detail)

    # --- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _event(scaler: Scaler, pod: Mapping[str, Any], reason: str, message: str, event_type: str = "Normal") -> None:
        outcome = scaler.post_event(pod, reason, message, event_type)
        if not outcome.ok:
            log.warning("could not post a %s event on %s: %s", reason, object_key(pod), outcome.detail)

    def _stopping(self) -> bool:
        return self.stop.is_set() or self._term.is_set()
