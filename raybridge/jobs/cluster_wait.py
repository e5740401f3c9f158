"""Waiting for a RayJob or RayCluster to be admitted and ready, saying at each change where it stands and why.

What a wait reads, each poll: the object, its Kueue Workload and queue position (`progress_line` words them),
and, once KubeRay builds the Ray cluster, the cluster's pods: an image that cannot be pulled, a crash loop or a
pod no node can take is said on the progress line, for a slow start and a start that will never end must not
look alike; an invalid image name, which no retry mends, ends the wait at once (exit 2). It also notices an
operator that does not act: Kueue makes a Workload for a queued job, and KubeRay writes a RayJob's status,
within seconds of the change they answer; when one of them stays silent for SILENT_SECONDS the line says so
and asks whether it runs (`raybridge check`), while the wait goes on within its bound (a restarting operator
catches up).

`Waiter` polls soon after a change and less often while nothing changes, never past its deadline; an API
hiccup is ridden out (`RIDE_OUT_POLICY`), a dead API server still ends the wait. It does not submit, renew or
clean up: the backend (`jobs/kubernetes.py`, `jobs/rayjob_run.py`) does.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from raybridge.core.pod_trouble import permanent, pods_trouble, trouble_words
from raybridge.core.views import read_pod
from raybridge.errors import BadInput, ClusterUnreachable, InfraError, JobEnded
from raybridge.kube.calls import PermissionDenied, TimeBudgetSpent
from raybridge.kube.client import Kube
from raybridge.kube.kueue import find_workload, pending_position
from raybridge.kube.objects import list_namespaced_pods
from raybridge.kube.rayapi import RayObjects
from raybridge.kube.retry import RetryPolicy, calls_tried_once
from raybridge.kuberay.rayjob import RayState, ray_state
from raybridge.kueue.workload import Workload, WorkloadLike, deactivation, workload_state, workload_view
from raybridge.queues.decision.kueue_explain import progress_line

POLL_SECONDS = 1.0
#: The first look after a change of state: the next change often follows within a second (admitted, then the
#: pods created, then the head ready), so a wait looks again after 0.2 s, then 1.5 times longer up to POLL_SECONDS.
FIRST_POLL_SECONDS = 0.2
#: A wait's observation that fails is tried again after 0.25 s, doubled up to 10 s, MAX_API_FAILURES times:
#: a hiccup costs a quarter of a second, a restarting API server about half a minute.
MAX_API_FAILURES = 8
RIDE_OUT_POLICY = RetryPolicy(attempts=MAX_API_FAILURES + 1, first_backoff=0.25, max_backoff=10.0)
HEARTBEAT_SECONDS = 30.0


class Waiter:
    """Polls until a condition holds, printing a line whenever the state changes.

    It looks again soon after a change (FIRST_POLL_SECONDS) and less often while nothing changes (up to `poll`),
    never past its deadline."""

    def __init__(self, progress: Callable[[str], None], timeout: float, poll: float = POLL_SECONDS,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.progress = progress
        self.clock = clock
        self._sleep = sleep
        self.deadline = clock() + timeout
        self.timeout = timeout
        self.poll = poll
        self.started = clock()
        self._last: Optional[str] = None
        self._last_time = 0.0
        self.interval = min(FIRST_POLL_SECONDS, poll)

    def say(self, line: str) -> None:
        now = self.clock()
        if line != self._last:
            self.progress(line)
            self._last, self._last_time = line, now
            self.interval = min(FIRST_POLL_SECONDS, self.poll)
        elif now - self._last_time >= HEARTBEAT_SECONDS:
            self.progress(f"still {line[0].lower() + line[1:]} ({int(now - self.started)}s)")
            self._last_time = now

    def expired(self) -> bool:
        return self.clock() >= self.deadline

    def sleep(self) -> None:
        self._sleep(max(0.0, min(self.interval, self.deadline - self.clock())))
        self.interval = min(self.interval * 1.5, self.poll)


def _observe(kube: Kube, rays: RayObjects, kind: str, name: str, namespace: str, queued: bool) -> tuple[dict[str, Any], Optional[Workload], Optional[dict[str, Any]]]:
    """The object, its Kueue Workload (read once) and its queue position, as they are now."""
    obj = rays.get(kind, name, namespace)
    if obj is None:
        raise InfraError(f"{kind} {namespace}/{name} disappeared while waiting (deleted by someone else?)")
    workload = workload_view(find_workload(kube, namespace, obj)) if queued else None
    position = None
    if workload is not None and workload.state == "pending":
        position = pending_position(kube, namespace, workload.queue_name, workload.meta.name)
    return obj, workload, position


def observe_riding_out(
    kube: Kube, rays: RayObjects, kind: str, name: str, namespace: str, queued: bool, waiter: Waiter
) -> tuple[dict[str, Any], Optional[Workload], Optional[dict[str, Any]]]:
    """`_observe`, retried per `RIDE_OUT_POLICY`: a long wait rides out API hiccups; a dead API server still ends it
    (more than MAX_API_FAILURES failures in a row, or the waiter's deadline). This loop is the one level that
    retries the observation's calls: the client tries each once."""
    failures = 0
    while True:
        try:
            with calls_tried_once():
                return _observe(kube, rays, kind, name, namespace, queued)
        except ClusterUnreachable as exc:
            failures += 1
            wait = RIDE_OUT_POLICY.wait_before_retry(failures, "status", None)
            if wait is None or waiter.expired():
                raise
            waiter.say(f"API error, retrying: {exc}")
            time.sleep(wait)


def end_if_deactivated(what: str, workload: WorkloadLike) -> None:
    """JobEnded (exit 1) when Kueue deactivated the Workload: it will never be admitted again."""
    ended = deactivation(workload)
    if ended:
        raise JobEnded(f"{what}: {ended.words}; Kueue will not run it again")


#: How long Kueue (making the Workload of a queued job) or KubeRay (writing a RayJob's status, starting its cluster
#: once admitted) may stay silent before the line asks whether it runs: both answer a change within a second or two.
SILENT_SECONDS = 20.0
#: How often a wait lists the Ray cluster's pods while the cluster starts.
PODS_EVERY_SECONDS = 2.0
#: The label KubeRay puts on every pod of a Ray cluster (kuberay@v1.6.1 ray-operator/controllers/ray/utils/constant.go
#: RayClusterLabelKey).
RAY_CLUSTER_LABEL = "ray.io/cluster"


class StartWatch:
    """What a wait learns beyond the object and its Workload: the cluster's pods' trouble, and a silent operator."""

    def __init__(self, kube: Kube, namespace: str, kind: str, queued: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube, self.namespace, self.kind, self.queued, self.clock = kube, namespace, kind, queued, clock
        self._turn: Optional[tuple[str, str]] = None
        self._turn_since = clock()
        self._pods_at = -PODS_EVERY_SECONDS
        self._troubles: list[tuple[str, str]] = []
        self._pods_readable = True

    def notes(self, state: RayState, workload: Optional[Workload]) -> str:
        """What to add to the progress line ("" when nothing): a silent operator, or the pods' trouble.

        BadInput when a pod has a trouble no retry mends (an invalid image name)."""
        silent = self._silence(state, workload)
        if silent:
            return silent
        troubles = self._pods(state, workload)
        fatal = permanent(troubles)
        if fatal:
            raise BadInput(f"{state.kind} {self.namespace}/{state.name} cannot start: {fatal}; fix the image (--image) and submit again")
        return trouble_words(troubles)

    def _silence(self, state: RayState, workload: Optional[Workload]) -> str:
        """"<who> has not ... in Ns: is it running?" once the operator whose turn it is stayed silent SILENT_SECONDS."""
        turn = self._whose_turn(state, workload)
        if turn != self._turn:
            self._turn, self._turn_since = turn, self.clock()
        if turn is None or self.clock() - self._turn_since < SILENT_SECONDS:
            return ""
        silent = int(SILENT_SECONDS)
        if turn[0] == "kueue":
            return f"Kueue has made no Workload for it in {silent}s: is Kueue's controller running? (`raybridge check`)"
        return f"KubeRay has not acted on it in {silent}s: is the KubeRay operator running? (`raybridge check`)"

    def _whose_turn(self, state: RayState, workload: Optional[Workload]) -> Optional[tuple[str, str]]:
        """("kueue" or "kuberay", what it was seen in) when the next step is that operator's and takes it seconds."""
        if self.kind != "RayJob":
            return None  # a RayCluster's state stays empty while its pods start: no word of KubeRay's to wait for
        admitted = workload_state(workload) == "admitted"
        if self.queued and workload is None:
            return ("kueue", state.deployment)
        if (not self.queued or admitted) and state.deployment in ("", "New", "Suspended"):
            return ("kuberay", state.deployment)
        return None

    def _pods(self, state: RayState, workload: Optional[Workload]) -> list[tuple[str, str]]:
        """The troubles of the Ray cluster's pods while it starts (listed every PODS_EVERY_SECONDS at most)."""
        cluster = state.cluster if state.kind == "RayJob" else state.name
        starting = state.deployment in ("Initializing", "Waiting", "Running") if state.kind == "RayJob" else state.deployment != "ready"
        if not (cluster and starting and self._pods_readable) or (self.queued and workload_state(workload) != "admitted"):
            return []
        if self.clock() - self._pods_at < PODS_EVERY_SECONDS:
            return self._troubles
        self._pods_at = self.clock()
        try:
            with calls_tried_once():
                pods = list_namespaced_pods(self.kube, self.namespace, f"{RAY_CLUSTER_LABEL}={cluster}")
        except PermissionDenied:
            self._pods_readable = False  # the user may not list pods: the line goes without them
            return []
        except ClusterUnreachable:
            return self._troubles  # the next look tries again; the wait's own reads ride the outage out
        self._troubles = pods_trouble(read_pod(p) for p in pods)
        return self._troubles


def wait_for_ready(
    kube: Kube, rays: RayObjects, kind: str, name: str, namespace: str, waiter: Waiter, queued: bool
) -> dict[str, Any]:
    """Wait through Kueue admission and cluster start-up; return the ready object."""
    admitted = False
    seen: Optional[str] = None  # what the last observation showed, for a deadline that runs out mid-call
    watch = StartWatch(kube, namespace, kind, queued, waiter.clock)
    while True:
        try:
            obj, workload, position = observe_riding_out(kube, rays, kind, name, namespace, queued, waiter)
        except TimeBudgetSpent:
            if seen is None:
                raise
            what = "admitted" if queued and not admitted else "ready"
            raise InfraError(f"{kind} {namespace}/{name} was not {what} within {waiter.timeout:.0f}s: {seen}") from None
        state = ray_state(obj)
        end_if_deactivated(f"{kind} {namespace}/{name}", workload)
        if state.deployment == "ValidationFailed":
            raise BadInput(f"KubeRay rejected the {kind}: {state.reason} {state.message}".strip())
        if state.ended:
            raise InfraError(f"the {kind} ended before the job was submitted: {state.deployment} ({state.reason}: {state.message})")
        if workload_state(workload) == "admitted":
            admitted = True
        # With spec.jobId set from the start, KubeRay leaves Waiting at its next reconcile and polls the id in Running.
        if state.ready:
            view = workload_view(workload) if queued and not (seen or "").startswith("admitted") else None
            by = f"admitted by {view.queue_name}; " if view is not None and view.queue_name and admitted else ""
            waiter.say(f"{by}Ray cluster {state.cluster or name} is ready")  # the admission is said even when first seen ready
            return obj
        line = progress_line(obj, workload, position)
        extra = watch.notes(state, workload)
        seen = f"{line}; {extra}" if extra else line
        waiter.say(seen)
        if waiter.expired():
            what = "admitted" if queued and not admitted else "ready"
            raise InfraError(f"{kind} {namespace}/{name} was not {what} within {waiter.timeout:.0f}s: {seen}")
        waiter.sleep()


__all__ = ["FIRST_POLL_SECONDS", "POLL_SECONDS", "SILENT_SECONDS", "StartWatch", "Waiter", "end_if_deactivated", "observe_riding_out", "wait_for_ready"]
