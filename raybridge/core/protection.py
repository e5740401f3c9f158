"""Orphan protection: what frees a RayJob's cluster and quota if raybridge dies before the job's driver exists.

An InteractiveMode RayJob waits for raybridge to submit the entrypoint. If
raybridge is killed first, nothing else ever will, and the admitted RayJob
would hold its Kueue quota forever. The protections, in order of preference:

- `spec.preRunningDeadlineSeconds` (KubeRay v1.6 and later): the RayJob
  fails if it is not running within that time; it bounds only the wait.
- Kueue's `kueue.x-k8s.io/max-exec-time-seconds` label (every supported
  Kueue): the Workload is evicted after that much admitted time; it bounds
  the whole run, so it is the user's `maxRunSeconds`, else a day. Kueue
  reads it only on a job it manages (one with a queue-name label), so on
  any other object it counts for nothing.
- `spec.activeDeadlineSeconds` (every supported KubeRay) for a RayJob that
  Kueue does not manage: the RayJob fails after that long in all.

The server says which it has: raybridge creates with strict field
validation, and an unknown `preRunningDeadlineSeconds` is refused rather
than dropped. Pure: objects in, objects and sentences out.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.consts import KUEUE_MAX_EXEC_TIME_LABEL, KUEUE_QUEUE_LABEL, PRE_RUNNING_DEADLINE_SECONDS

#: The bound on a whole run when nothing shorter exists and the user named none: a day.
DEFAULT_MAX_RUN_SECONDS = 86400

_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')


@dataclass(frozen=True)
class Protection:
    """Which protection an object carries; `field` is where it lives in the object."""

    field: str
    seconds: int

    def describe(self) -> str:
        span = _span(self.seconds)
        if self.field == "spec.preRunningDeadlineSeconds":
            return f"a RayJob whose job has not started within {span} fails and frees its cluster ({self.field}={self.seconds})"
        if self.field == f"metadata.labels[{KUEUE_MAX_EXEC_TIME_LABEL}]":
            return f"Kueue evicts the job after {span} of admitted time ({KUEUE_MAX_EXEC_TIME_LABEL}={self.seconds})"
        return f"the RayJob fails after {span} in all ({self.field}={self.seconds})"


def _span(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def unknown_fields(message: str) -> list[str]:
    """The field paths a strict-validation refusal names (`unknown field "spec.x"`)."""
    return _UNKNOWN_FIELD.findall(message)


def protections_of(obj: dict[str, Any]) -> list[Protection]:
    """The protections an object (as created, read back from the server) really carries."""
    spec = obj.get("spec") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    found = []
    if spec.get("preRunningDeadlineSeconds"):
        found.append(Protection("spec.preRunningDeadlineSeconds", int(spec["preRunningDeadlineSeconds"])))
    # Kueue reads the label only on a job it manages (one with a queue-name label); elsewhere it is inert.
    if labels.get(KUEUE_QUEUE_LABEL) and str(labels.get(KUEUE_MAX_EXEC_TIME_LABEL, "")).isdigit():
        found.append(Protection(f"metadata.labels[{KUEUE_MAX_EXEC_TIME_LABEL}]", int(labels[KUEUE_MAX_EXEC_TIME_LABEL])))
    if spec.get("activeDeadlineSeconds"):
        found.append(Protection("spec.activeDeadlineSeconds", int(spec["activeDeadlineSeconds"])))
    return found


def with_run_bound(rayjob: dict[str, Any], seconds: Optional[int]) -> dict[str, Any]:
    """The RayJob bounded to `seconds` of running: Kueue's label when Kueue manages it, else activeDeadlineSeconds."""
    if not seconds:
        return rayjob
    obj = copy.deepcopy(rayjob)
    labels = obj["metadata"].setdefault("labels", {})
    if labels.get(KUEUE_QUEUE_LABEL):
        labels[KUEUE_MAX_EXEC_TIME_LABEL] = str(seconds)
    else:
        obj["spec"]["activeDeadlineSeconds"] = seconds
    return obj


def without_pre_running_deadline(rayjob: dict[str, Any], max_run_seconds: Optional[int], queued: bool) -> dict[str, Any]:
    """For a KubeRay without `preRunningDeadlineSeconds`: drop it and bound the whole run instead."""
    obj = copy.deepcopy(rayjob)
    obj["spec"].pop("preRunningDeadlineSeconds", None)
    bound = max_run_seconds or DEFAULT_MAX_RUN_SECONDS
    if queued:
        obj["metadata"].setdefault("labels", {})[KUEUE_MAX_EXEC_TIME_LABEL] = str(bound)
    else:
        obj["spec"]["activeDeadlineSeconds"] = bound
    return obj


__all__ = [
    "DEFAULT_MAX_RUN_SECONDS",
    "PRE_RUNNING_DEADLINE_SECONDS",
    "Protection",
    "protections_of",
    "unknown_fields",
    "with_run_bound",
    "without_pre_running_deadline",
]
