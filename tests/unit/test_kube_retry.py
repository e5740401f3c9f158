"""The retry policy (`raybridge.kube.retry`), the command's time budget and the object shape check of `raybridge.kube.client`, as tables.

Why: every Kubernetes call is retried and bounded by these few rules, so each
rule gets one readable row here; the seam tests (tests/e2e/test_seams.py)
show them through the CLI. What this does not do: talk to a server.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.core.deadline import MIN_CALL_SECONDS, Deadline
from raybridge.errors import ClusterUnreachable
from raybridge.kube.calls import checked_items, object_shape_problem
from raybridge.kube.config import resolve_kube_target
from raybridge.kube.retry import RetryPolicy
from raybridge.kube.rayapi import is_ours


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


POLICY = RetryPolicy(attempts=4, first_backoff=0.25, max_backoff=4.0, max_retry_after=10.0)

WAITS = [
    # (case, attempt just failed, failure, seconds left (None: no deadline), Retry-After, wait or None to give up)
    ("first 503, no deadline: backoff", 1, "status", None, None, 0.25),
    ("third failure, no deadline: doubled twice", 3, "connection", None, None, 1.0),
    ("fourth failure, no deadline: attempts spent", 4, "status", None, None, None),
    ("a timeout, no deadline: --request-timeout was the bound", 1, "timeout", None, None, None),
    ("429 with Retry-After 2 wins over the backoff", 1, "status", None, 2.0, 2.0),
    ("Retry-After too long without a deadline", 1, "status", None, 60.0, None),
    ("a timeout with time left: still not repeated", 1, "timeout", 10.0, None, None),
    ("many failures, time left: retried past the count", 9, "connection", 30.0, None, 4.0),
    ("Retry-After longer than the time left: give up now", 1, "status", 1.5, 2.0, None),
    ("no time left", 2, "connection", 0.1, None, None),
]


UNREACHABLE = [
    # (case, attempt just failed, seconds left (None: no deadline), (seconds failing, request timeout), wait or None)
    ("refused just now, long deadline: retry", 1, 1800.0, (0.0, 30.0), 0.25),
    ("refused for 29 s of a 30 s request timeout: give up, whatever the deadline", 5, 1800.0, (29.0, 30.0), None),
    ("refused for 3 s of a 2 s request timeout, no deadline", 2, None, (3.0, 2.0), None),
    ("refused, no deadline, inside the bound: retry", 2, None, (0.5, 30.0), 0.5),
]


@pytest.mark.parametrize(("case", "attempt", "left", "failing", "expected"), UNREACHABLE, ids=[u[0] for u in UNREACHABLE])
def test_an_unreachable_server_is_retried_only_within_the_request_timeout(case: str, attempt: int, left: Optional[float], failing: tuple[float, float], expected: Optional[float]) -> None:
    deadline = Deadline.after(left, FakeClock()) if left is not None else None
    assert POLICY.wait_before_retry(attempt, "connection", deadline, unreachable_for=failing) == expected


@pytest.mark.parametrize(("case", "attempt", "failure", "left", "retry_after", "expected"), WAITS, ids=[w[0] for w in WAITS])
def test_when_to_retry(case: str, attempt: int, failure: str, left: Optional[float], retry_after: Optional[float], expected: Optional[float]) -> None:
    clock = FakeClock()
    deadline = Deadline.after(left, clock) if left is not None else None
    assert POLICY.wait_before_retry(attempt, failure, deadline, retry_after) == expected


BOUNDS = [
    # (case, budget, seconds spent, request timeout, the call's timeout, the deadline cuts it)
    ("plenty of time: the request timeout", 60.0, 0.0, 30.0, 30.0, False),
    ("little time: what is left", 5.0, 2.0, 30.0, 3.0, True),
    ("spent: the floor, so a poll still gets its answer", 5.0, 9.0, 30.0, MIN_CALL_SECONDS, True),
    ("a short request timeout stays", 5.0, 0.0, 2.0, 2.0, False),
]


@pytest.mark.parametrize(("case", "budget", "spent", "timeout", "expected", "cuts"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_each_call_gets_the_smaller_of_its_timeout_and_the_time_left(case: str, budget: float, spent: float, timeout: float, expected: float, cuts: bool) -> None:
    clock = FakeClock()
    deadline = Deadline.after(budget, clock)
    clock.now += spent
    assert deadline.bound(timeout) == pytest.approx(expected)
    assert deadline.cuts(timeout) is cuts
    assert deadline.left() == pytest.approx(max(0.0, budget - spent))


SHAPES: list[tuple[str, Any, Optional[str]]] = [
    ("a RayJob", {"kind": "RayJob", "metadata": {"name": "a"}, "spec": {}, "status": {"conditions": []}}, None),
    ("a number", 42, "a number where an object belongs"),
    ("no metadata", {"kind": "RayJob"}, "no metadata.name"),
    ("spec a string", {"metadata": {"name": "a"}, "spec": "x"}, "a: spec is a string, not an object"),
    ("conditions an object", {"metadata": {"name": "a"}, "status": {"conditions": {}}}, "a: status.conditions is not a list of objects"),
    ("labels a list", {"metadata": {"name": "a", "labels": []}}, "a: metadata.labels is not an object"),
    ("owner refs of strings", {"metadata": {"name": "a", "ownerReferences": ["x"]}}, "a: metadata.ownerReferences is not a list of objects"),
    ("another kind", {"kind": "Pod", "metadata": {"name": "a"}}, "a: kind 'Pod', not RayJob"),
]


@pytest.mark.parametrize(("case", "obj", "problem"), SHAPES, ids=[s[0] for s in SHAPES])
def test_what_is_not_a_kubernetes_object_is_named(case: str, obj: Any, problem: Optional[str]) -> None:
    assert object_shape_problem(obj, "RayJob") == problem


LISTS: list[tuple[str, Any, Optional[int]]] = [
    ("items", {"items": [{"metadata": {"name": "a"}}]}, 1),
    ("items null (Go's empty list)", {"items": None}, 0),
    ("no items at all", {"kind": "List"}, None),
    ("items an object", {"items": {}}, None),
    ("a list, not a List", [], None),
]


@pytest.mark.parametrize(("case", "answer", "count"), LISTS, ids=[c[0] for c in LISTS])
def test_a_list_answer_is_checked(case: str, answer: Any, count: Optional[int]) -> None:
    if count is None:
        with pytest.raises(ClusterUnreachable, match="listing RayJobs: the Kubernetes API at http://k answered an unexpected object"):
            checked_items("listing RayJobs", answer, "RayJob", "http://k")
    else:
        assert len(checked_items("listing RayJobs", answer, "RayJob", "http://k")) == count


SENT = {"kind": "RayJob", "metadata": {"name": "a", "labels": {"app.kubernetes.io/managed-by": "raybridge", "q": "lq"}},
        "spec": {"entrypoint": "python x.py"}}  # fmt: skip
OURS = [
    ("what we sent, as stored", {**SENT, "metadata": {**SENT["metadata"], "uid": "1"}}, True),
    ("another entrypoint", {**SENT, "spec": {"entrypoint": "python y.py"}}, False),
    ("without our labels", {**SENT, "metadata": {"name": "a"}}, False),
    ("another kind", {**SENT, "kind": "RayCluster"}, False),
]


@pytest.mark.parametrize(("case", "existing", "ours"), OURS, ids=[o[0] for o in OURS])
def test_a_create_that_may_have_happened_is_taken_as_done_only_when_the_object_is_ours(case: str, existing: Any, ours: bool) -> None:
    assert is_ours(existing, SENT) is ours


def _config(path: Any, **parts: Any) -> str:
    import yaml

    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **parts}))
    return str(path)


def test_the_target_merges_kubeconfig_files_as_kubectl_does(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """First file wins for current-context and for each named context; a missing file is only noted."""
    first = _config(tmp_path / "a", contexts=[{"name": "x", "context": {"cluster": "c", "namespace": "from-a"}}])
    second = _config(
        tmp_path / "b", **{"current-context": "x", "contexts": [{"name": "x", "context": {"namespace": "from-b"}},
                                                               {"name": "y", "context": {"namespace": "team-y"}}]},
    )  # fmt: skip
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'gone'}:{second}")
    target = resolve_kube_target()
    assert (target.context, target.namespace, target.missing) == ("x", "from-a", (tmp_path / "gone",))
    assert resolve_kube_target(context="y").namespace == "team-y"
    assert resolve_kube_target(context="y", namespace="mine").namespace == "mine"
