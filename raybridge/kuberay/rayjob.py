"""A RayJob's or RayCluster's state as the KubeRay operator reports it, read once into a small view.

KubeRay writes a RayJob's `status.jobDeploymentStatus` (New, Initializing, Waiting, Running,
Complete, Failed, Suspending, Suspended, Retrying, ValidationFailed;
ray-operator/apis/ray/v1/rayjob_types.go), the Ray job's `status.jobStatus` and `status.jobId`,
the `status.rayClusterName` it made and the `status.dashboardURL` once the head serves, and a
`reason`/`message` when it fails the RayJob (DeadlineExceeded, PreRunningDeadlineExceeded, ...).
A RayCluster has `status.state` ("ready", "suspended", ...). `ray_state` reads those fields
once, checked for type, so the launcher, the orphan guard, `status` and `explain` ask
questions of one value (`ended`, `ready`, `taken`) rather than of nested dicts.

Pure: no I/O. It does not decide what a state means for a job (waiting, reconnecting,
resubmitting): the jobs domain does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from raybridge.core.kubeobjects import as_dict

#: The deployment states in which KubeRay is done with a RayJob.
ENDED = ("Complete", "Failed")
#: The deployment states of a suspended (or suspending) RayJob: Kueue took its cluster away.
SUSPENDED = ("Suspending", "Suspended")
#: The deployment states in which the RayJob's cluster serves a Ray job.
SERVING = ("Waiting", "Running")
#: The reasons KubeRay fails a RayJob with when one of its deadlines runs out.
DEADLINE_REASONS = ("DeadlineExceeded", "PreRunningDeadlineExceeded")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class RayState:
    """What the operator says of one RayJob or RayCluster ("" where it says nothing yet)."""

    kind: str
    name: str
    namespace: str
    #: RayJob: `jobDeploymentStatus`; RayCluster: `state`.
    deployment: str
    job_status: str
    #: The Ray job KubeRay polls (`status.jobId`).
    job_id: str
    #: The Ray job id the RayJob names (`spec.jobId`), set by whoever submits.
    spec_job_id: str
    cluster: str
    dashboard: str
    reason: str
    message: str
    #: A RayJob's `status.rayClusterStatus`: its workers ready (0 until KubeRay writes one) and wanted (None: not said).
    workers_ready: int = 0
    workers_desired: Optional[int] = None

    @property
    def submitted_id(self) -> str:
        """The Ray job of this RayJob: the one KubeRay polls, else the one its spec names."""
        return self.job_id or self.spec_job_id

    @property
    def ended(self) -> bool:
        return self.deployment in ENDED

    @property
    def suspended(self) -> bool:
        return self.deployment in SUSPENDED

    @property
    def at_deadline(self) -> bool:
        """KubeRay failed the RayJob because a deadline ran out."""
        return self.deployment == "Failed" and self.reason in DEADLINE_REASONS

    @property
    def ready(self) -> bool:
        """The cluster serves: a RayJob Waiting or Running with a dashboard, a RayCluster "ready"."""
        if self.kind == "RayJob":
            return self.deployment in SERVING and bool(self.dashboard)
        return self.deployment == "ready"

    def taken(self, submission_id: str) -> bool:
        """KubeRay polls this Ray job (or the RayJob has ended)."""
        return self.job_id == submission_id or self.ended

    def shown(self, default: str = "New") -> str:
        """The state as a person reads it: the operator's word, or `default` before it wrote one."""
        return self.deployment or default

    def why(self) -> str:
        """"reason: message" of a failed RayJob, "" when KubeRay gave none."""
        return f"{self.reason}: {self.message}" if self.reason else ""


def ray_state(obj: Optional[Mapping[str, Any]]) -> RayState:
    """The view of a RayJob or RayCluster object (an absent one reads as a RayJob that says nothing)."""
    obj = obj or {}
    meta, spec, status = as_dict(obj.get("metadata")), as_dict(obj.get("spec")), as_dict(obj.get("status"))
    kind = _text(obj.get("kind")) or "RayJob"
    cluster = as_dict(status.get("rayClusterStatus")) if kind == "RayJob" else {}
    return RayState(
        kind=kind,
        name=_text(meta.get("name")),
        namespace=_text(meta.get("namespace")),
        deployment=_text(status.get("jobDeploymentStatus") if kind == "RayJob" else status.get("state")),
        job_status=_text(status.get("jobStatus")),
        job_id=_text(status.get("jobId")),
        spec_job_id=_text(spec.get("jobId")),
        cluster=_text(status.get("rayClusterName")),
        dashboard=_text(status.get("dashboardURL")),
        reason=_text(status.get("reason")),
        message=_text(status.get("message")),
        workers_ready=_count(cluster.get("readyWorkerReplicas")) or 0,  # KubeRay leaves it out until a worker is ready
        workers_desired=_count(cluster.get("desiredWorkerReplicas")),
    )


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
