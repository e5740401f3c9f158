"""The orphan guard, decided: what frees a RayJob's cluster and Kueue quota when raybridge dies at any moment.

The guard is one concept in two halves, as the adjuster is: this module decides (which fields, which
values, the renewal), `jobs/orphan_guard.py` acts (the thread that renews the bound). What a user is
told of it is the "orphan protection" line of `submit`.

raybridge creates InteractiveMode RayJobs: KubeRay builds the cluster and
raybridge submits the entrypoint. Read release by release in KubeRay's RayJob
state machine (kuberay@v1.3.2, v1.5.1, v1.6.1, v1.7.0,
ray-operator/controllers/ray/rayjob_controller.go, Reconcile):

- `Waiting` (the cluster is ready, `spec.jobId` not set yet) checks nothing
  on v1.3 to v1.5: not `suspend` (so a Kueue eviction never completes), not
  `activeDeadlineSeconds`. From v1.6 it checks `preRunningDeadlineSeconds`
  only. Kueue counts a RayJob in `Waiting` as active (it is neither New nor
  Suspended), so it keeps its quota, and its GPUs stay taken.
- `Initializing` and `Running` honour `suspend` and `activeDeadlineSeconds`
  on every release; `Initializing` also `preRunningDeadlineSeconds` from v1.6.
- `status.startTime` is set at every start (initRayJobStatusIfNeed in the
  New state), so both deadlines measure from the latest admission, with the
  operator's wall clock.
- In InteractiveMode `Running` polls the Ray job `status.jobId`; one the
  cluster never heard of is never a failure. On v1.3 to v1.6 it is an error
  return, so controller-runtime retries with exponential backoff (up to
  1000 s between looks, each of which may be the one that sees the
  deadline); v1.7 requeues it after 3 s.
- Suspending clears `status.jobId`; after readmission the RayJob passes
  `Waiting` again, taking `spec.jobId` if it is set.

So raybridge:

1. creates the RayJob with `spec.jobId` already set to the id it will
   submit under: KubeRay leaves `Waiting` at its next reconcile, and in
   `Running` Kueue's evictions and the deadline act on every release;
2. gives it `spec.activeDeadlineSeconds`, the orphan bound (30 minutes by
   default), and renews it while it runs (`renewal`): if raybridge dies at
   any moment, the RayJob fails within the bound, Kueue frees the quota when
   it sees the RayJob finished, and KubeRay deletes the cluster
   `ttlSecondsAfterFinished` later. A job is as long as it is: nothing caps
   a run raybridge is watching;
3. on an operator of v1.6 or later, once KubeRay polls the job
   (`status.jobId`), clears `spec.jobId` and sets
   `preRunningDeadlineSeconds` to the bound: if Kueue evicts the job after
   raybridge died, the readmitted RayJob waits in `Waiting` (no id to take)
   and fails the bound after its new start, whatever the job's age. The
   renewed `activeDeadlineSeconds` cannot do that: it counts from the
   latest start, so a run T old when raybridge died would hold its new
   cluster T + bound. raybridge sets the id again when it submits the
   entrypoint after a readmission, and renews `preRunningDeadlineSeconds`
   while the RayJob starts, so a slow start it watches never fails. Before
   v1.6 there is no such field: the T + bound (plus the backoff) stands,
   and `docs/lifecycle.md` says so;
4. hands the run over on `--no-wait` once the driver runs (`handover_patch`):
   the renewed bound goes (or becomes the user's `maxRunSeconds` where Kueue
   does not enforce it), and from v1.6 the id is cleared as in 3.

The user's `maxRunSeconds` is Kueue's `max-exec-time-seconds` label when
Kueue manages the job from its creation (admitted time summed over
evictions; Kueue then deactivates the Workload), else the most the renewed
deadline may reach: also when Kueue put the job in a queue itself (LocalQueue
defaulting), since the label was never written then.

Pure: numbers and objects in, numbers, patches and sentences out. It does
not read the clock or the cluster; `jobs/orphan_guard.py` does.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from raybridge.core.consts import ORPHAN_BOUND_SECONDS
from raybridge.kueue.names import KUEUE_MAX_EXEC_TIME_LABEL, KUEUE_QUEUE_LABEL
from raybridge.kuberay.rayjob import ray_state
from raybridge.kuberay.releases import MEASURED_STATES, PRE_RUNNING_STATES

#: The shortest orphan bound accepted: renewals come every sixth of it, at most a minute apart.
MIN_ORPHAN_BOUND_SECONDS = 60
_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')


@dataclass(frozen=True)
class Protection:
    """Which protection an object carries; `field` is where it lives in the object."""

    field: str
    seconds: int
    #: The deadline is the user's run-time limit (maxRunSeconds, shorter than the bound), not the bound itself.
    run_limit: bool = False

    def describe(self) -> str:
        span = _span(self.seconds)
        if self.field == "spec.activeDeadlineSeconds" and self.run_limit:
            return (
                f"the RayJob fails {span} after it starts, its run-time limit (maxRunSeconds, in {self.field}), "
                "and frees its cluster and quota then, whether or not raybridge is still there"
            )
        if self.field == "spec.activeDeadlineSeconds":
            return (
                f"if raybridge stops renewing it, the RayJob fails within {span} and frees its cluster and quota "
                f"({self.field}, renewed while raybridge runs)"
            )
        if self.field == f"metadata.labels[{KUEUE_MAX_EXEC_TIME_LABEL}]":
            return f"Kueue stops the job after {span} of admitted time ({KUEUE_MAX_EXEC_TIME_LABEL}={self.seconds})"
        return f"a RayJob whose job has not started within {span} fails and frees its cluster ({self.field}={self.seconds})"


def _span(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def orphan_bound_problem(seconds: Any) -> Optional[str]:
    """Why `seconds` cannot be the orphan bound, or None."""
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        return f"must be a whole number of seconds (got {seconds!r})"
    if seconds < MIN_ORPHAN_BOUND_SECONDS:
        return f"must be at least {MIN_ORPHAN_BOUND_SECONDS} seconds (got {seconds})"
    return None


def renew_interval(bound: int) -> float:
    """How often raybridge renews the deadline: a sixth of the bound, at most a minute."""
    return max(1.0, min(60.0, bound / 6))


def unknown_fields(message: str) -> list[str]:
    """The field paths a strict-validation refusal names (`unknown field "spec.x"`)."""
    return _UNKNOWN_FIELD.findall(message)


def guarded(
    rayjob: dict[str, Any], job_id: Optional[str], bound: int = ORPHAN_BOUND_SECONDS, max_run_seconds: Optional[int] = None
) -> dict[str, Any]:
    """An InteractiveMode RayJob as `submit` creates it: the job id set (when known), the first deadline,
    the user's run-time limit. Every field is one every supported KubeRay knows."""
    obj = copy.deepcopy(rayjob)
    spec = obj["spec"]
    if job_id:
        spec["jobId"] = job_id
    spec.pop("preRunningDeadlineSeconds", None)
    queued = bool((obj["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL))
    spec["activeDeadlineSeconds"] = renewed_deadline("", None, bound, max_run_seconds, kueue_limits_run=queued)
    return with_run_bound(obj, max_run_seconds)


def with_run_bound(rayjob: dict[str, Any], seconds: Optional[int]) -> dict[str, Any]:
    """The RayJob bounded to `seconds` of running: Kueue's label when Kueue manages it, else activeDeadlineSeconds."""
    if not seconds:
        return rayjob
    obj = copy.deepcopy(rayjob)
    labels = obj["metadata"].setdefault("labels", {})
    if labels.get(KUEUE_QUEUE_LABEL):
        labels[KUEUE_MAX_EXEC_TIME_LABEL] = str(seconds)
    else:
        current = obj["spec"].get("activeDeadlineSeconds")
        obj["spec"]["activeDeadlineSeconds"] = min(int(current), seconds) if current else seconds
    return obj


def renewed_deadline(
    deployment: str, seconds_since_start: Optional[float], bound: int, max_run_seconds: Optional[int], kueue_limits_run: bool
) -> int:
    """The `spec.activeDeadlineSeconds` that fails the RayJob `bound` seconds after its last renewal.

    `seconds_since_start`: a lower bound on the time KubeRay measures since the current
    `status.startTime` (`seconds_since_start`, below); measured late by up to a renewal interval,
    the RayJob fails between `bound - interval` and `bound` after the last renewal, and never
    while raybridge renews every interval. In a state KubeRay does not measure (queued,
    suspending, new) the next start is the bound away. Where Kueue does not enforce the user's
    limit (`kueue_limits_run` false), never past `maxRunSeconds`.
    """
    if deployment in MEASURED_STATES and seconds_since_start is not None:
        deadline = math.ceil(seconds_since_start) + bound
    else:
        deadline = bound
    if max_run_seconds and not kueue_limits_run:
        deadline = min(deadline, max_run_seconds)
    return deadline


def renewed_pre_running(deployment: str, seconds_since_start: Optional[float], bound: int) -> int:
    """`spec.preRunningDeadlineSeconds` (KubeRay v1.6+): `bound` after the last renewal while the RayJob starts
    (Initializing, Waiting), else the bound itself, counted from the next start."""
    if deployment in PRE_RUNNING_STATES and seconds_since_start is not None:
        return math.ceil(seconds_since_start) + bound
    return bound


def seconds_since_start(start_time: str, seen_for: Optional[float], server_now: Optional[float]) -> Optional[float]:
    """How long ago the RayJob's current `status.startTime` was, as a lower bound on what KubeRay measures.

    Two measures, the larger wins: `seen_for`, how long raybridge has seen this start on a clock that
    runs on while the machine sleeps (a clock that stops would shorten every later deadline by the
    sleep), and `server_now` (the API server's clock, epoch seconds) minus the start, which the
    operator wrote with its own wall clock. Either may be missing; a start that does not parse is
    measured by `seen_for` alone. A server clock behind the operator's only makes the measure smaller,
    and the other one then holds.
    """
    if not start_time:
        return None
    measures = [seen_for] if seen_for is not None else []
    started = parse_time(start_time)
    if started is not None and server_now is not None:
        measures.append(max(0.0, server_now - started))
    return max(measures) if measures else None


def parse_time(text: str) -> Optional[float]:
    """An RFC 3339 time as Kubernetes writes it (`2026-01-01T00:00:00Z`), in epoch seconds; None if it is not one."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, TypeError):
        return None


def kueue_limits_run(obj: dict[str, Any]) -> bool:
    """Whether Kueue enforces the run-time limit of this RayJob (as stored): its queue and max-exec-time labels."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(KUEUE_QUEUE_LABEL)) and str(labels.get(KUEUE_MAX_EXEC_TIME_LABEL, "")).isdigit()


@dataclass(frozen=True)
class Renewal:
    """What the guard knows that the RayJob does not say: the bound, the user's limit, the job id, the operator."""

    bound: int
    max_run_seconds: Optional[int]
    kueue_limits_run: bool
    submission_id: str
    #: The operator is KubeRay v1.6 or later (and the CRD knows preRunningDeadlineSeconds).
    pre_running: bool

    def fields(self, obj: dict[str, Any], since: Optional[float]) -> dict[str, Any]:
        """The `spec` fields to write now, each only where the RayJob carries another value; {} when all hold."""
        spec, state = obj.get("spec") or {}, ray_state(obj)
        wanted: dict[str, Any] = {
            "activeDeadlineSeconds": renewed_deadline(state.deployment, since, self.bound, self.max_run_seconds, self.kueue_limits_run)
        }
        if self.pre_running:
            if state.deployment == "Running" and state.spec_job_id and state.job_id == state.spec_job_id == self.submission_id:
                wanted.update(jobId=None, preRunningDeadlineSeconds=self.bound)  # KubeRay polls the job: the id may go
            elif not state.spec_job_id or spec.get("preRunningDeadlineSeconds") is not None:
                wanted["preRunningDeadlineSeconds"] = renewed_pre_running(state.deployment, since, self.bound)
        return {key: value for key, value in wanted.items() if spec.get(key) != value}


def handover_patch(max_run_seconds: Optional[int], kueue_limits_run: bool, bound: int, pre_running: bool) -> dict[str, Any]:
    """The merge patch that leaves a running job to itself (`--no-wait`): no renewed bound.

    `pre_running`: the operator honours `preRunningDeadlineSeconds` (v1.6 and later); then the job id
    is cleared, so that a readmission after an eviction waits in `Waiting` for the bound at most, and fails.
    """
    limit = max_run_seconds if (max_run_seconds and not kueue_limits_run) else None
    spec: dict[str, Any] = {"activeDeadlineSeconds": limit}
    if pre_running:
        spec.update(jobId=None, preRunningDeadlineSeconds=bound)
    return {"spec": spec}


def handover_notes(pre_running: bool, queued: bool, max_run_seconds: Optional[int], kueue_limits_run: bool = True) -> list[str]:
    """What still bounds a handed-over job, in plain words."""
    if pre_running or not queued:
        return []
    limit = (
        f"until Kueue's run-time limit ({_span(max_run_seconds)} of admitted time) ends it"
        if max_run_seconds and kueue_limits_run
        else "until someone deletes it (`raybridge delete`)"
    )
    return [
        "this KubeRay operator (before v1.6, or a release raybridge could not tell) honours no preRunningDeadlineSeconds: "
        f"if Kueue evicts the job after raybridge has exited, nothing submits it again and the readmitted RayJob holds its quota {limit}"
    ]


def after_eviction(pre_running: bool, bound: int) -> str:
    """What bounds a RayJob that Kueue evicts after raybridge has exited, then admits again."""
    if pre_running:
        return f"the readmitted RayJob fails within {_span(bound)} of its new start (preRunningDeadlineSeconds)"
    return (
        f"the readmitted RayJob holds its new cluster for the job's age then plus {_span(bound)}, and on v1.3 to v1.6 "
        "up to about 17 minutes longer (the operator's backoff)"
    )


def eviction_bound_note(operator: str, known: bool, pre_running: bool, bound: int) -> str:
    """The submit's line on what bounds the RayJob if Kueue evicts it after raybridge has exited, given the
    operator's release (`operator`: the release and where it was read, or why it is unknown)."""
    if pre_running:
        return (
            f"orphan protection after an eviction: KubeRay operator {operator} honours preRunningDeadlineSeconds: once the job runs its id "
            f"is cleared, so if Kueue evicts it after raybridge has exited {after_eviction(True, bound)}"
        )
    release = f"KubeRay operator {operator} predates v1.6" if known else f"KubeRay operator release {operator}: assuming one before v1.6"
    return f"note: {release}, so no preRunningDeadlineSeconds: if Kueue evicts the job after raybridge has exited, {after_eviction(False, bound)}"


def orphan_bound_summary(pre_running: bool, bound: int, evictable: bool = True) -> str:
    """The orphan bound on a cluster, in one line: raybridge gone, and evicted after that (only where Kueue runs:
    `evictable`; nothing else evicts a RayJob and admits it again)."""
    gone = f"raybridge gone: the RayJob fails within {_span(bound)}"
    return f"{gone}; evicted after that: {after_eviction(pre_running, bound)}" if evictable else gone


def protections_of(obj: dict[str, Any], max_run_seconds: Optional[int] = None) -> list[Protection]:
    """The protections an object (as created, read back from the server) really carries; `max_run_seconds`, the
    user's limit, tells a deadline that is that limit from the orphan bound."""
    spec = obj.get("spec") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    found = []
    if spec.get("activeDeadlineSeconds"):
        seconds = int(spec["activeDeadlineSeconds"])
        limit = bool(max_run_seconds) and seconds == max_run_seconds and not kueue_limits_run(obj)
        found.append(Protection("spec.activeDeadlineSeconds", seconds, run_limit=limit))
    # Kueue reads the label only on a job it manages (one with a queue-name label); elsewhere it is inert.
    if kueue_limits_run(obj):
        found.append(Protection(f"metadata.labels[{KUEUE_MAX_EXEC_TIME_LABEL}]", int(labels[KUEUE_MAX_EXEC_TIME_LABEL])))
    if spec.get("preRunningDeadlineSeconds"):
        found.append(Protection("spec.preRunningDeadlineSeconds", int(spec["preRunningDeadlineSeconds"])))
    return found


__all__ = [
    "MIN_ORPHAN_BOUND_SECONDS",
    "ORPHAN_BOUND_SECONDS",
    "Protection",
    "Renewal",
    "after_eviction",
    "eviction_bound_note",
    "guarded",
    "handover_notes",
    "handover_patch",
    "kueue_limits_run",
    "orphan_bound_problem",
    "orphan_bound_summary",
    "parse_time",
    "protections_of",
    "renew_interval",
    "renewed_deadline",
    "renewed_pre_running",
    "seconds_since_start",
    "unknown_fields",
    "with_run_bound",
]
