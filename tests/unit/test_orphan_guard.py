"""OrphanGuard: what it writes to a RayJob as time passes, and how it rides out API errors (a fake RayObjects)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.errors import BadInput, ClusterUnreachable
from raybridge.kube.client import PermissionDenied as PermissionDeniedLike
from raybridge.jobs.orphan_guard import OrphanGuard


class FakeRays:
    def __init__(self, obj: Optional[dict[str, Any]]) -> None:
        self.obj = obj
        self.patches: list[dict[str, Any]] = []
        self.fail_with: Optional[Exception] = None

    def get(self, kind: str, name: str, namespace: str) -> Optional[dict[str, Any]]:
        return self.obj

    def patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any], field_validation: Optional[str] = None) -> dict[str, Any]:
        if self.fail_with is not None:
            raise self.fail_with
        self.patches.append(patch)
        assert self.obj is not None
        self.obj["spec"].update(patch["spec"])
        return self.obj


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rayjob(deployment: str, start: str = "", deadline: int = 1800) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": "7"}, "spec": {"activeDeadlineSeconds": deadline},
            "status": {"jobDeploymentStatus": deployment, "startTime": start}}  # fmt: skip


def guard(rays: FakeRays, clock: Clock, messages: list[str], max_run: Optional[int] = None, queued: bool = True) -> OrphanGuard:
    return OrphanGuard(rays, "j", "ns", 1800, max_run, queued, messages.append, clock=clock)  # type: ignore[arg-type]


def test_the_deadline_follows_the_time_since_the_start_was_seen_and_restarts_with_a_new_start() -> None:
    rays, clock, said = FakeRays(rayjob("Running", "2026-01-01T00:00:00Z")), Clock(), []
    g = guard(rays, clock, said)
    assert g.renew_once() is None  # first look: 0 s since seen, 1800 already there
    clock.now += 600.4
    assert g.renew_once() == 2401
    assert rays.patches[-1]["metadata"] == {"resourceVersion": "7"}  # written only over what was read
    rays.obj["status"].update(jobDeploymentStatus="Suspended")  # evicted: the next start is the bound away
    assert g.renew_once() == 1800
    rays.obj["status"].update(jobDeploymentStatus="Running", startTime="2026-01-01T01:00:00Z")
    clock.now += 30
    assert g.renew_once() is None  # a new start, just seen: 1800 again, already written
    clock.now += 60
    assert g.renew_once() == 1860
    assert said == []


def test_without_kueue_the_run_time_limit_caps_it() -> None:
    rays, clock = FakeRays(rayjob("Running", "t0", deadline=300)), Clock()
    g = guard(rays, clock, [], max_run=300, queued=False)
    g.renew_once()
    clock.now += 3600
    assert g.renew_once() is None and rays.obj["spec"]["activeDeadlineSeconds"] == 300


def test_errors_are_said_once_and_the_recovery_too_and_nothing_raises() -> None:
    rays, clock, said = FakeRays(rayjob("Running", "t0")), Clock(), []
    g = guard(rays, clock, said)
    g.renew_once()
    rays.fail_with = ClusterUnreachable("updating RayJob ns/j: the Kubernetes API at https://x is unreachable")
    for _ in range(3):
        clock.now += 60
        assert g.renew_once() is None
    assert len(said) == 1 and said[0].startswith("warning: could not renew the orphan bound")
    rays.fail_with = None
    clock.now += 60
    assert g.renew_once() == 1800 + 240
    assert said[-1] == "the orphan bound of RayJob ns/j is renewed again"


def test_a_conflict_is_not_worth_a_warning() -> None:
    rays, clock, said = FakeRays(rayjob("Running", "t0")), Clock(), []
    g = guard(rays, clock, said)
    g.renew_once()
    rays.fail_with = BadInput('updating RayJob ns/j: Operation cannot be fulfilled on rayjobs.ray.io "j": the object has been modified')
    clock.now += 60
    assert g.renew_once() is None and said == []


@pytest.mark.parametrize("obj", [None, rayjob("Complete", "t0"), rayjob("Failed", "t0")], ids=["deleted", "complete", "failed"])
def test_an_ended_or_deleted_rayjob_is_left_alone(obj: Optional[dict[str, Any]]) -> None:
    rays, clock = FakeRays(obj), Clock()
    clock.now += 5000
    assert guard(rays, clock, []).renew_once() is None and rays.patches == []


def test_start_writes_once_in_the_callers_thread_and_raises_what_the_api_says() -> None:
    rays = FakeRays(rayjob("", ""))
    rays.fail_with = PermissionDeniedLike("updating RayJob ns/j: permission denied")
    with pytest.raises(PermissionDeniedLike):
        guard(rays, Clock(), []).start()
