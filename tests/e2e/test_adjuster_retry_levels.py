"""Each adjuster call is retried at one level only, through the client `adjuster run` builds (`kube.client.connect`).

Why: the adjuster's client retries reads and deletes on its own, and the
adjuster's writes are retried by the `Scaler`; stacked, one failing DELETE
was tried 4 x 5 = 20 times and the client's inner sleeps ignored the stop.
The tests here run against the real kube-apiserver through the fault proxy
in front of it (testcluster/fault_proxy.py), count the requests that reached
the proxy, and stop the adjuster mid-backoff.
What they do not do: time anything; the stop test's bound is many times
shorter than the backoff it cuts.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from typing import Any, Iterator

import pytest
from kubernetes.dynamic.exceptions import NotFoundError

from raybridge.adjuster.scaler import ACT_POLICY, Scaler
from raybridge.kube.client import connect
from raybridge.kube.retry import RetryPolicy
from tests.waits import wait_for

NS = f"retry-levels-{uuid.uuid4().hex[:6]}"
PLACEHOLDER_PATH = rf"/api/v1/namespaces/{NS}/pods/rb-placeholder-x"


@pytest.fixture(scope="module")
def api(fault_proxy: Any) -> Iterator[tuple[Any, Any]]:
    """The fault proxy before the real API server, and the connection (`Kube`) `adjuster run` would make through it."""
    fault_proxy.admin.create_namespace(NS)
    try:
        yield fault_proxy, connect(str(fault_proxy.kubeconfig), request_timeout=5.0)
    finally:
        fault_proxy.admin.delete_object("v1", "Namespace", NS)


# (case, method, status answered every time, what the scaler does)
FAILING_CALLS = [
    ("a DELETE answered 500", "DELETE", 500, lambda scaler: scaler.delete_pod(NS, "rb-placeholder-x")),
    ("a create answered 500", "POST", 500, lambda scaler: scaler.create_pod(_placeholder())),
    ("a DELETE answered 502", "DELETE", 502, lambda scaler: scaler.delete_pod(NS, "rb-placeholder-x")),
]


@pytest.mark.parametrize(("case", "method", "status", "act"), FAILING_CALLS, ids=[c[0] for c in FAILING_CALLS])
def test_a_failing_call_is_tried_at_most_the_policy_s_attempts(api: Any, case: str, method: str, status: int, act: Any) -> None:
    proxy, kube = api
    path = PLACEHOLDER_PATH if method == "DELETE" else rf"/api/v1/namespaces/{NS}/pods"
    fault = proxy.arm(method, path, code=status, times=None)
    outcome = act(Scaler(kube, request_timeout=5.0))
    assert not outcome.ok and outcome.result == "failed"
    assert fault.hits == ACT_POLICY.attempts, f"{case}: tried {fault.hits} times, the policy allows {ACT_POLICY.attempts}"


def test_a_create_that_already_exists_is_adopted_not_retried(api: Any) -> None:
    proxy, kube = api
    proxy.admin.create_object(_placeholder())
    try:
        seen = proxy.arm("POST", rf"/api/v1/namespaces/{NS}/pods", code=None, times=None)  # passed on, counted
        outcome = Scaler(kube, request_timeout=5.0).create_pod(_placeholder())
        assert outcome.ok and outcome.result == "exists" and outcome.attempts == 1
        assert seen.hits == 1  # asked once
    finally:
        proxy.admin.delete_object("v1", "Pod", "rb-placeholder-x", NS)


def test_a_stop_ends_the_backoff_at_once(api: Any) -> None:
    proxy, kube = api
    fault = proxy.arm("DELETE", PLACEHOLDER_PATH, code=500, times=None)
    stop = threading.Event()
    # A backoff of a minute: a call still running after a few seconds is one that did not wake.
    scaler = Scaler(kube, request_timeout=5.0, policy=RetryPolicy(attempts=5, first_backoff=60.0, max_backoff=60.0),
                    stop=(threading.Event(), stop))
    outcomes: list[Any] = []
    worker = threading.Thread(target=lambda: outcomes.append(scaler.delete_pod(NS, "rb-placeholder-x")), daemon=True)
    worker.start()
    try:
        wait_for(lambda: fault.hits >= 1, timeout=10, what="the DELETE at the server")
        stop.set()
        worker.join(5.0)
        assert not worker.is_alive(), "the stop did not end the backoff"
    finally:
        stop.set()
        fault.clear()
    assert fault.hits == 1 and outcomes and not outcomes[0].ok


def _placeholder(name: str = "rb-placeholder-x") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"}]}}


def test_a_delete_of_one_placeholder_leaves_another_made_since_under_its_name(api: Any) -> None:
    # kube-scheduler deletes a placeholder it preempts, and the next pass may make one of the same name before the
    # watch says the first is gone; a pass that decided on the first then deleted the new one by name.
    proxy, kube = api
    name = "rb-placeholder-remade"  # no other test's pod of this name is still terminating
    # Never bound (a scheduler no one runs), as a pending placeholder: on the session's shared cluster, whose nodes
    # other tests add and remove, a bound one can be deleted by what acts on a node's pods (in a whole-suite run the
    # second pod was gone, 404, before the test's delete).
    unbound = {**_placeholder(name), "spec": {**_placeholder(name)["spec"], "schedulerName": "no-scheduler"}}
    first = proxy.admin.create_object(unbound)
    proxy.admin.delete_object("v1", "Pod", name, NS)
    wait_for(lambda: proxy.admin.get_object("v1", "Pod", name, NS) is None, timeout=30, what="the first placeholder gone")
    second = proxy.admin.create_object(unbound)
    try:
        scaler = Scaler(kube, request_timeout=5.0)
        outcome = scaler.delete_pod(NS, name, first["metadata"]["uid"])
        assert outcome.ok and outcome.result == "replaced" and outcome.attempts == 1, outcome
        assert (proxy.admin.get_object("v1", "Pod", name, NS) or {})["metadata"]["uid"] == second["metadata"]["uid"]
        assert scaler.delete_pod(NS, name, second["metadata"]["uid"]).result == "deleted"
    finally:
        with contextlib.suppress(NotFoundError):  # the test's own delete got there first
            proxy.admin.delete_object("v1", "Pod", name, NS)
