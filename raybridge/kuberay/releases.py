"""Which KubeRay operator release does what to a RayJob's deadlines.

From the operator's sources (ray-operator@v1.3.2 .. v1.6.1, controllers/ray/rayjob_controller.go):
`activeDeadlineSeconds` is measured from `status.startTime` in Initializing, Waiting and Running
(and KubeRay sets a new start time at every readmission); from v1.6.0 the operator also honours
`preRunningDeadlineSeconds` in Initializing and Waiting. A release reads as its (major, minor) from
`v1.6.1`, `1.5.2` or `v1.7.0-rc.0` (a Helm chart label or an image tag); anything else is unknown.

Pure. What a deadline means for a guarded job (how far ahead to renew, what to say) is the
jobs domain's (`jobs/decision/orphan_guard.py`).
"""

from __future__ import annotations

import re
from typing import Optional

_RELEASE = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][0-9A-Za-z.-]*)?")
#: The RayJob states whose deadline KubeRay measures from the current `status.startTime`.
MEASURED_STATES = frozenset({"Initializing", "Waiting", "Running"})
#: The states in which KubeRay v1.6+ checks `preRunningDeadlineSeconds`.
PRE_RUNNING_STATES = frozenset({"Initializing", "Waiting"})
#: The first release that honours `preRunningDeadlineSeconds`.
PRE_RUNNING_SINCE = (1, 6)


def release_tuple(version: Optional[str]) -> Optional[tuple[int, int]]:
    """(major, minor) of a release such as `v1.6.1`, `1.5.2` or `v1.7.0-rc.0`; None for anything else."""
    match = _RELEASE.fullmatch(version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def pre_running_supported(operator_version: Optional[str]) -> bool:
    """Whether a KubeRay operator of this release honours `preRunningDeadlineSeconds` (v1.6.0 and later)."""
    parsed = release_tuple(operator_version)
    return parsed is not None and parsed >= PRE_RUNNING_SINCE
