"""jobs/cluster_wait.py Waiter: how often a wait looks again, and that it never sleeps past its deadline."""

from __future__ import annotations

import pytest

from raybridge.jobs.cluster_wait import FIRST_POLL_SECONDS, POLL_SECONDS, Waiter


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 4))
        self.now += seconds


def waiter(timeout: float = 600.0) -> tuple[Waiter, FakeTime, list[str]]:
    fake, said = FakeTime(), []
    return Waiter(said.append, timeout, clock=fake.clock, sleep=fake.sleep), fake, said


# (case, the state seen before each sleep, the sleeps)
ROWS = [
    ("nothing changes: 0.2 s, then 1.5 times longer up to a second",
     ["Queued"] * 7, [0.2, 0.3, 0.45, 0.675, 1.0, 1.0, 1.0]),
    ("a change looks again after 0.2 s", ["Queued", "Queued", "Queued", "Admitted", "Admitted"], [0.2, 0.3, 0.45, 0.2, 0.3]),
]


@pytest.mark.parametrize("case,states,sleeps", ROWS, ids=[r[0] for r in ROWS])
def test_a_wait_looks_again_soon_after_a_change_and_less_often_while_nothing_changes(case, states, sleeps):
    w, fake, said = waiter()
    for state in states:
        w.say(state)
        w.sleep()
    assert fake.slept == sleeps
    assert said == list(dict.fromkeys(states))  # each state said once


def test_it_never_sleeps_past_its_deadline():
    w, fake, _ = waiter(timeout=1.0)
    while not w.expired():
        w.say("Queued")
        w.sleep()
    assert sum(fake.slept) == pytest.approx(1.0) and max(fake.slept) <= POLL_SECONDS
    assert fake.slept[0] == FIRST_POLL_SECONDS
    w.sleep()
    assert fake.slept[-1] == 0.0  # past the deadline: no more sleeping


# --- --no-wait's handover waits for KubeRay to take the job id ------------------------------------------------

class _Rays:
    """A RayJob whose status the rows script, read once per look; the patches sent."""

    def __init__(self, statuses: list[dict]) -> None:
        self.statuses, self.patches = statuses, []

    def get(self, kind: str, name: str, namespace: str) -> dict:
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return {"metadata": {"name": name}, "spec": {"jobId": "job-1"}, "status": status}

    def patch(self, kind: str, name: str, namespace: str, body: dict, **_: object) -> None:
        self.patches.append(body)


WAITING = {"jobDeploymentStatus": "Waiting"}
TAKEN = {"jobDeploymentStatus": "Running", "jobId": "job-1"}
HANDOVER_ROWS = [
    pytest.param([TAKEN], True, id="already taken: the id is cleared"),
    pytest.param([WAITING, WAITING, TAKEN], True, id="taken after two looks: cleared then"),
    pytest.param([{"jobDeploymentStatus": "Complete"}], True, id="ended: nothing left to poll"),
    pytest.param([WAITING], False, id="never taken in time: the id stays, and it says so"),
]


@pytest.mark.parametrize("statuses, cleared", HANDOVER_ROWS)
def test_no_wait_clears_the_job_id_only_once_kuberay_has_taken_it(monkeypatch, statuses, cleared) -> None:
    from raybridge.jobs import rayjob_run
    from raybridge.jobs.options import SubmitOptions

    monkeypatch.setattr(rayjob_run, "TAKE_JOB_ID_SECONDS", 0.5)
    run = rayjob_run.RayJobRun.__new__(rayjob_run.RayJobRun)
    run.rays, run.options, run.name, run.namespace = _Rays(statuses), SubmitOptions(), "job", "ns"
    run.spec, run.queued, run.submission_id = type("Spec", (), {"max_run_seconds": None})(), True, "job-1"
    run.pre_running, run.kueue_limits_run = True, False  # an operator of v1.6 or later
    notes = run.handover()
    assert len(run.rays.patches) == 1
    spec = run.rays.patches[0]["spec"]
    assert ("jobId" in spec and spec["jobId"] is None) == cleared
    assert any("had not taken job job-1" in note for note in notes) == (not cleared)


def test_no_wait_on_an_operator_before_v1_6_keeps_the_job_id_and_says_what_bounds_it() -> None:
    from raybridge.jobs import rayjob_run
    from raybridge.jobs.options import SubmitOptions

    run = rayjob_run.RayJobRun.__new__(rayjob_run.RayJobRun)
    run.rays, run.options, run.name, run.namespace = _Rays([{"jobId": "job-1"}]), SubmitOptions(), "job", "ns"
    run.spec, run.queued, run.submission_id = type("Spec", (), {"max_run_seconds": None})(), True, "job-1"
    run.pre_running, run.kueue_limits_run = False, False
    notes = run.handover()
    assert run.rays.patches == [{"spec": {"activeDeadlineSeconds": None}}]
    assert any("honours no preRunningDeadlineSeconds" in note for note in notes)


def test_a_deadline_spent_inside_a_poll_still_says_the_job_was_not_admitted(monkeypatch):
    """The --timeout can run out while the last poll is waiting for the API server (a loaded machine): the user
    is told the job was not admitted in time and where it stood, not that the API server was slow."""
    from raybridge.errors import InfraError
    from raybridge.jobs import cluster_wait
    from raybridge.kube.calls import TimeBudgetSpent

    queued = ({"status": {"jobDeploymentStatus": "Suspended"}},
              {"spec": {"queueName": "lq"}, "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                                                       "message": "insufficient quota for nvidia.com/gpu"}]}}, None)
    answers = iter([queued, TimeBudgetSpent("GET /apis: did not answer in time, and the command's --timeout of 4s ran out")])

    def observe(*_args):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(cluster_wait, "observe_riding_out", observe)
    w, _fake, said = waiter(timeout=4)
    with pytest.raises(InfraError) as caught:
        cluster_wait.wait_for_ready(None, None, "RayJob", "late", "team", w, queued=True)
    assert not isinstance(caught.value, TimeBudgetSpent)
    message = str(caught.value)
    assert message.startswith("RayJob team/late was not admitted within 4s: ") and "insufficient" in message, message


def test_a_deadline_spent_before_anything_was_seen_is_the_api_servers_silence(monkeypatch):
    from raybridge.jobs import cluster_wait
    from raybridge.kube.calls import TimeBudgetSpent

    def observe(*_args):
        raise TimeBudgetSpent("GET /apis: did not answer in time")

    monkeypatch.setattr(cluster_wait, "observe_riding_out", observe)
    w, _fake, _said = waiter(timeout=4)
    with pytest.raises(TimeBudgetSpent):
        cluster_wait.wait_for_ready(None, None, "RayJob", "late", "team", w, queued=True)


ADMITTED_WORKLOAD = {"spec": {"queueName": "team-a"},
                     "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok"},
                                               {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok"}]}}  # fmt: skip
READY_RAYJOB = {"status": {"jobDeploymentStatus": "Running", "rayClusterName": "job-abc", "dashboardURL": "job-abc-head-svc.team.svc:8265"}}
WAITING_RAYJOB = {"status": {"jobDeploymentStatus": "Suspended"}}


@pytest.mark.parametrize(
    "case, observations, said_last",
    [
        ("admitted and ready at the first look", [(READY_RAYJOB, ADMITTED_WORKLOAD)], "admitted by team-a; Ray cluster job-abc is ready"),
        ("the admission said before", [(WAITING_RAYJOB, ADMITTED_WORKLOAD), (READY_RAYJOB, ADMITTED_WORKLOAD)], "Ray cluster job-abc is ready"),
    ],
)
def test_the_queue_that_admitted_the_job_is_said_once_however_fast_it_got_ready(monkeypatch, case, observations, said_last):
    from raybridge.jobs import cluster_wait

    answers = iter([(obj, workload, None) for obj, workload in observations])
    monkeypatch.setattr(cluster_wait, "observe_riding_out", lambda *_args: next(answers))
    w, _fake, said = waiter(timeout=60)
    cluster_wait.wait_for_ready(None, None, "RayJob", "job", "team", w, queued=True)
    assert said[-1] == said_last, (case, said)
    assert sum("admitted by team-a" in line for line in said) == 1, (case, said)
