"""Orphan protection: what frees a RayJob's cluster and Kueue quota when raybridge dies at any moment.

raybridge creates InteractiveMode RayJobs: KubeRay builds the cluster and
raybridge submits the entrypoint. Read release by release in KubeRay's RayJob
state machine (kuberay@v1.3.2, v1.5.2, v1.6.0, v1.7.0,
ray-operator/controllers/ray/rayjob_controller.go, Reconcile):

- `Waiting` (the cluster is ready, `spec.jobId` not set yet) checks nothing
  on v1.3 to v1.5: not `suspend` (so a Kueue eviction never completes), not
  `activeDeadlineSeconds`. From v1.6 it checks `preRunningDeadlineSeconds`
  only. Kueue counts a RayJob in `Waiting` as active (it is neither New nor
  Suspended), so it keeps its quota, and its GPUs stay taken.
- `Initializing` and `Running` honour `suspend` and `activeDeadlineSeconds`
  on every release.
- `status.startTime` is set at every start (initRayJobStatusIfNeed in the
  New state), so `activeDeadlineSeconds` measures from the latest admission.
- In InteractiveMode `Running` polls the Ray job `status.jobId`; one the
  cluster never heard of is waited for, never a failure.

So raybridge:

1. creates the RayJob with `spec.jobId` already set to the id it will
   submit under: KubeRay leaves `Waiting` at its next reconcile, and in
   `Running` Kueue's evictions and the deadline act on every release. After
   an eviction KubeRay polls the same id on the new cluster, which never ran
   it, and raybridge submits the entrypoint there again under that id;
2. gives it `spec.activeDeadlineSeconds`, the orphan bound (30 minutes by
   default), and renews it while it runs (`renewed_deadline`): if raybridge
   dies at any moment, the RayJob fails within the bound, Kueue frees the
   quota when it sees the RayJob finished, and KubeRay deletes the cluster
   `ttlSecondsAfterFinished` later. A job is as long as it is: nothing caps
   a run raybridge is watching;
3. hands the run over on `--no-wait` once the driver runs (`handover_patch`):
   the renewed bound goes (or becomes the user's `maxRunSeconds` where Kueue
   does not manage the job). From KubeRay v1.6 `spec.jobId` is cleared and
   `preRunningDeadlineSeconds` set, so a readmission after an eviction that
   nobody will resubmit waits in `Waiting` for at most the bound; older
   KubeRay has no such field, which `handover_notes` says.

The user's `maxRunSeconds` is Kueue's `max-exec-time-seconds` label when
Kueue manages the job (admitted time summed over evictions; Kueue then
deactivates the Workload), else the most the renewed deadline may reach.

Pure: numbers and objects in, numbers, patches and sentences out. It does
not read the clock or the cluster; `jobs/orphan_guard.py` does.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.consts import KUEUE_MAX_EXEC_TIME_LABEL, KUEUE_QUEUE_LABEL, ORPHAN_BOUND_SECONDS

#: The shortest orphan bound accepted: renewals come every sixth of it, at most a minute apart.
MIN_ORPHAN_BOUND_SECONDS = 60
_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')
#: The RayJob states whose deadline KubeRay measures from the current `status.startTime`.
MEASURED_STATES = frozenset({"Initializing", "Waiting", "Running"})


@dataclass(frozen=True)
class Protection:
    """Which protection an object carries; `field` is where it lives in the object."""

    field: str
    seconds: int

    def describe(self) -> str:
        span = _span(self.seconds)
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
    spec["activeDeadlineSeconds"] = renewed_deadline("", None, bound, max_run_seconds, queued)
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
    deployment: str, seconds_since_start_seen: Optional[float], bound: int, max_run_seconds: Optional[int], queued: bool
) -> int:
    """The `spec.activeDeadlineSeconds` that fails the RayJob `bound` seconds after its last renewal.

    `seconds_since_start_seen`: how long ago raybridge first saw the current `status.startTime`
    (a lower bound on the time KubeRay measures; it first looks at most a renewal interval late,
    so the RayJob fails between `bound - interval` and `bound` after the last renewal, and never
    while raybridge renews every interval). In a state KubeRay does not measure (queued,
    suspending, new) the next start is the bound away. Without Kueue, never past `maxRunSeconds`.
    """
    if deployment in MEASURED_STATES and seconds_since_start_seen is not None:
        deadline = math.ceil(seconds_since_start_seen) + bound
    else:
        deadline = bound
    if max_run_seconds and not queued:
        deadline = min(deadline, max_run_seconds)
    return deadline


def handover_patch(max_run_seconds: Optional[int], queued: bool, bound: int, pre_running_deadline: bool) -> dict[str, Any]:
    """The merge patch that leaves a running job to itself (`--no-wait`): no renewed bound.

    `pre_running_deadline`: KubeRay knows `preRunningDeadlineSeconds` (v1.6 and later); then the job id
    is cleared, so that a readmission after an eviction waits in `Waiting` for the bound at most, and fails.
    """
    spec: dict[str, Any] = {"activeDeadlineSeconds": max_run_seconds if (max_run_seconds and not queued) else None}
    if pre_running_deadline:
        spec.update(jobId=None, preRunningDeadlineSeconds=bound)
    return {"spec": spec}


def handover_notes(pre_running_deadline: bool, queued: bool, max_run_seconds: Optional[int]) -> list[str]:
    """What still bounds a handed-over job, in plain words."""
    if pre_running_deadline or not queued:
        return []
    limit = (
        f"until Kueue's run-time limit ({_span(max_run_seconds)} of admitted time) ends it"
        if max_run_seconds
        else "until someone deletes it (`raybridge delete`)"
    )
    return [
        "this KubeRay (before v1.6) has no preRunningDeadlineSeconds: if Kueue evicts the job after raybridge "
        f"has exited, nothing submits it again and the readmitted RayJob holds its quota {limit}"
    ]


def protections_of(obj: dict[str, Any]) -> list[Protection]:
    """The protections an object (as created, read back from the server) really carries."""
    spec = obj.get("spec") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    found = []
    if spec.get("activeDeadlineSeconds"):
        found.append(Protection("spec.activeDeadlineSeconds", int(spec["activeDeadlineSeconds"])))
    # Kueue reads the label only on a job it manages (one with a queue-name label); elsewhere it is inert.
    if labels.get(KUEUE_QUEUE_LABEL) and str(labels.get(KUEUE_MAX_EXEC_TIME_LABEL, "")).isdigit():
        found.append(Protection(f"metadata.labels[{KUEUE_MAX_EXEC_TIME_LABEL}]", int(labels[KUEUE_MAX_EXEC_TIME_LABEL])))
    if spec.get("preRunningDeadlineSeconds"):
        found.append(Protection("spec.preRunningDeadlineSeconds", int(spec["preRunningDeadlineSeconds"])))
    return found


__all__ = [
    "MEASURED_STATES",
    "MIN_ORPHAN_BOUND_SECONDS",
    "ORPHAN_BOUND_SECONDS",
    "Protection",
    "guarded",
    "handover_notes",
    "handover_patch",
    "orphan_bound_problem",
    "protections_of",
    "renew_interval",
    "renewed_deadline",
    "unknown_fields",
    "with_run_bound",
]
