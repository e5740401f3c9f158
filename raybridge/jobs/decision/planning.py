"""Spec + inventory -> sizing decision -> manifests: the preview path.

`plan` and `render` print exactly what `submit` creates, because all three
call these functions. Nothing here talks to a cluster; the inventory, the
installed Ray version and the run's name are handed in.
"""

from __future__ import annotations

from typing import Any, Optional

from raybridge.core.inventory import Inventory
from raybridge.jobs.decision.images import PythonVersion
from raybridge.jobs.decision.sizing import SizingDecision, SizingRequest, size_workload
from raybridge.jobs.decision.spec import JobSpec

DEFAULT_RENDER_NAME = "raybridge-job"


def plan_job(spec: JobSpec, inventory: Inventory) -> SizingDecision:
    return size_workload(SizingRequest.from_spec(spec), inventory)


def render_job(
    spec: JobSpec,
    decision: SizingDecision,
    *,
    name: str,
    namespace: str,
    job_id: Optional[str] = None,
    submission_mode: str = "InteractiveMode",
    orphan_bound: Optional[int] = None,
    ray_version: str,
    python: PythonVersion,
) -> list[dict[str, Any]]:
    from raybridge.jobs.decision.manifests import render_manifests

    extra = {"orphan_bound": orphan_bound} if orphan_bound is not None else {}
    return render_manifests(spec, decision, name=name, namespace=namespace, job_id=job_id, submission_mode=submission_mode,
                            ray_version=ray_version, python=python, **extra)
