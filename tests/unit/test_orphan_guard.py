"""OrphanGuard: what it writes to a RayJob as time passes, and how it rides out API errors (a fake RayObjects)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.errors import BadInput, ClusterUnreachable
from raybridge.kube.calls import PermissionDenied as PermissionDeniedLike
from raybridge.jobs.decision.orphan_guard import Renewal
from raybridge.jobs.orphan_guard import RETRY_SECONDS, OrphanGuard, awake_or_asleep_clock


class FakeRays:
    def __init__(self, obj: Optional[dict[str, Any]]) -> None:
        self.obj = obj
        self.patches: list[dict[str, Any]] = []
        self.fail_with: Optional[Exception] = None

        self.server_now: Optional[float] = None  # the API server's clock (its Date header), when a test sets it

    def get(self, kind: str, name: str, namespace: str) -> Optional[dict[str, Any]]:
        return self.obj

    def get_dated(self, kind: str, name: str, namespace: str) -> tuple[Optional[dict[str, Any]], Optional[float]]:
        return self.obj, self.server_now

    def patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any], field_validation: Optional[str] = None) -> dict[str, Any]:
        if self.fail_with is not None:
            raise self.fail_with
        self.patches.append(patch)
        assert self.obj is not None
        for key, value in patch["spec"].items():  # a merge patch: null removes
            if value is None:
                self.obj["spec"].pop(key, None)
            else:
                self.obj["spec"][key] = value
        return self.obj


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rayjob(deployment: str, start: str = "", deadline: int = 1800) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": "7"}, "spec": {"activeDeadlineSeconds": deadline},
            "status": {"jobDeploymentStatus": deployment, "startTime": start}}  # fmt: skip


def guard(
    rays: FakeRays, clock: Clock, messages: list[str], max_run: Optional[int] = None, kueue_limits_run: bool = True, pre_running: bool = False
) -> OrphanGuard:
    renewal = Renewal(1800, max_run, kueue_limits_run, "j-1", pre_running)
    return OrphanGuard(rays, "j", "ns", renewal, messages.append, clock=clock)  # type: ignore[arg-type]


def test_the_deadline_follows_the_time_since_the_start_was_seen_and_restarts_with_a_new_start() -> None:
    rays, clock, said = FakeRays(rayjob("Running", "2026-01-01T00:00:00Z")), Clock(), []
    g = guard(rays, clock, said)
    assert g.renew_once() is None  # first look: 0 s since seen, 1800 already there
    clock.now += 600.4
    assert g.renew_once() == {"activeDeadlineSeconds": 2401}
    assert rays.patches[-1]["metadata"] == {"resourceVersion": "7"}  # written only over what was read
    rays.obj["status"].update(jobDeploymentStatus="Suspended")  # evicted: the next start is the bound away
    assert g.renew_once() == {"activeDeadlineSeconds": 1800}
    rays.obj["status"].update(jobDeploymentStatus="Running", startTime="2026-01-01T01:00:00Z")
    clock.now += 30
    assert g.renew_once() is None  # a new start, just seen: 1800 again, already written
    clock.now += 60
    assert g.renew_once() == {"activeDeadlineSeconds": 1860}
    assert said == []


def test_without_kueue_the_run_time_limit_caps_it() -> None:
    rays, clock = FakeRays(rayjob("Running", "t0", deadline=300)), Clock()
    g = guard(rays, clock, [], max_run=300, kueue_limits_run=False)
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
    assert "the RayJob fails in about 29m00s unless a renewal gets through (trying every 5s)" in said[0]
    rays.fail_with = None
    clock.now += 60
    assert g.renew_once() == {"activeDeadlineSeconds": 1800 + 240}
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


START = "2026-01-01T00:00:00Z"
START_EPOCH = 1767225600.0


def test_a_machine_asleep_does_not_shorten_the_bound() -> None:
    """The local clock given here stands for one that stops while the machine sleeps (time.monotonic); the API
    server's clock runs on. After an hour asleep the deadline written covers the hour: the job is an hour older."""
    rays, clock, said = FakeRays(rayjob("Running", START)), Clock(), []
    rays.server_now = START_EPOCH + 600
    g = guard(rays, clock, said)
    assert g.renew_once() == {"activeDeadlineSeconds": 600 + 1800}
    rays.server_now += 3600  # asleep: the stopped clock did not move
    assert g.renew_once() == {"activeDeadlineSeconds": 4200 + 1800}
    assert said == []


def test_a_server_clock_behind_the_operator_leaves_the_local_measure_in_force() -> None:
    rays, clock = FakeRays(rayjob("Running", START)), Clock()
    rays.server_now = START_EPOCH - 500  # behind the start the operator wrote
    g = guard(rays, clock, [])
    g.renew_once()
    clock.now += 300
    rays.server_now += 300
    assert g.renew_once() == {"activeDeadlineSeconds": 300 + 1800}


def test_the_local_clock_counts_sleep_where_the_platform_has_one() -> None:
    import sys
    import time

    if not sys.platform.startswith("linux"):
        pytest.skip("CLOCK_BOOTTIME is Linux's")
    assert abs(awake_or_asleep_clock() - time.clock_gettime(time.CLOCK_BOOTTIME)) < 1.0


def test_failing_renewals_are_tried_every_few_seconds_until_one_gets_through() -> None:
    rays, clock, said = FakeRays(rayjob("Running", "t0")), Clock(), []
    g = guard(rays, clock, said)
    g.renew_once()
    assert g.next_wait() == 60.0
    rays.fail_with = BadInput('updating RayJob ns/j: Internal error occurred: failed calling webhook "vrayjob.kb.io": connection refused')
    clock.now += 60
    g.renew_once()
    assert g.next_wait() == RETRY_SECONDS and g.failing_for() == 0.0
    assert 'failed calling webhook "vrayjob.kb.io"' in said[0] and "fails in about 29m00s" in said[0]
    rays.fail_with = None
    g.renew_once()
    assert g.next_wait() == 60.0 and g.failing_for() is None


def running_with_job_id(spec_job_id: Optional[str] = "j-1", status_job_id: str = "j-1", deployment: str = "Running") -> dict[str, Any]:
    obj = rayjob(deployment, START)
    if spec_job_id:
        obj["spec"]["jobId"] = spec_job_id
    obj["status"]["jobId"] = status_job_id
    return obj


class StrictRays(FakeRays):
    """A CRD without preRunningDeadlineSeconds: a strict patch naming it is refused."""

    def patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any], field_validation: Optional[str] = None) -> dict[str, Any]:
        if field_validation == "Strict" and "preRunningDeadlineSeconds" in patch["spec"]:
            raise BadInput('updating RayJob ns/j: strict decoding error: unknown field "spec.preRunningDeadlineSeconds"')
        return super().patch(kind, name, namespace, patch, field_validation)


def test_on_v1_6_the_job_id_goes_once_kuberay_polls_the_job_and_comes_back_only_through_the_submitter() -> None:
    rays, clock, said = FakeRays(running_with_job_id()), Clock(), []
    rays.server_now = START_EPOCH + 100
    g = guard(rays, clock, said, pre_running=True)
    assert g.renew_once() == {"activeDeadlineSeconds": 1900, "jobId": None, "preRunningDeadlineSeconds": 1800}
    assert "jobId" not in rays.obj["spec"]
    # Evicted and readmitted: a new start, the cluster starting; the guard keeps the pre-running deadline ahead.
    rays.obj["status"].update(jobDeploymentStatus="Waiting", startTime="2026-01-01T02:00:00Z", jobId="")
    rays.server_now = START_EPOCH + 7200 + 900
    assert g.renew_once() == {"activeDeadlineSeconds": 2700, "preRunningDeadlineSeconds": 2700}
    assert "jobId" not in rays.obj["spec"]  # the guard never sets it: the submitter does, after submitting
    assert said == []


def test_a_crd_older_than_its_v1_6_operator_keeps_the_job_id_and_says_why() -> None:
    rays, clock, said = StrictRays(running_with_job_id()), Clock(), []
    g = guard(rays, clock, said, pre_running=True)
    g.renew_once()
    assert rays.obj["spec"]["jobId"] == "j-1" and "preRunningDeadlineSeconds" not in rays.obj["spec"]
    assert len(said) == 1 and "has no preRunningDeadlineSeconds" in said[0]
    clock.now += 60
    assert g.renew_once() == {"activeDeadlineSeconds": 1860}  # from now on the bound alone


def test_a_run_time_limit_shorter_than_the_interval_is_looked_at_as_it_runs_out_and_its_end_handed_on_once() -> None:
    rays, clock, ended = FakeRays(rayjob("Running", START, deadline=20)), Clock(), []
    rays.server_now = START_EPOCH + 5
    g = guard(rays, clock, [], max_run=20, kueue_limits_run=False)
    g.on_deadline = ended.append
    assert g.renew_once() is None  # 20 carried, 20 wanted
    assert g.next_wait() == pytest.approx(20 - 5 + 2)  # just after the limit runs out, not a minute later
    clock.now += 17
    rays.server_now += 17
    assert g.renew_once() is None and g.next_wait() == 2.0  # run out, KubeRay has not failed it yet: look again soon
    rays.obj["status"].update(jobDeploymentStatus="Failed", reason="DeadlineExceeded")
    g.renew_once()
    g.renew_once()
    assert [obj["status"]["reason"] for obj in ended] == ["DeadlineExceeded"]


def test_a_job_that_failed_for_its_own_reasons_is_not_handed_on_as_a_deadline() -> None:
    rays, clock, ended = FakeRays(rayjob("Failed", START)), Clock(), []
    rays.obj["status"]["reason"] = "AppFailed"
    g = guard(rays, clock, [])
    g.on_deadline = ended.append
    g.renew_once()
    assert ended == []
