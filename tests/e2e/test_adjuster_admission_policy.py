"""The adjuster's shipped admission policies on a real kube-apiserver: what they let through and what they stop.

`configs/adjuster/25-admission-policy.yaml` narrows the cluster-wide `events create` to Events about Pods,
reported as raybridge-adjuster; `configs/adjuster/optional/karpenter-hold.yaml` grants `patch` on nodes and
narrows it to the hold label, Karpenter's do-not-disrupt and cluster-autoscaler's scale-down-disabled annotations. Both are CEL, type-checked and run by
the real kube-apiserver (testcluster, Kubernetes 1.34).
Each case is a request as the adjuster's ServiceAccount (a TokenRequest token), made through the same
`Scaler` the controller acts with where the controller makes it.

What this does not do: run `adjuster run` here (tests/e2e/test_adjuster_rbac_real.py runs it under the shipped RBAC
and these policies on the real kube-apiserver, the opt-in file with and without).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.scale_adjuster import hold_patch
from raybridge.adjuster.scaler import Outcome, Scaler
from tests.helpers import ROOT, kube_of

CONFIG = ROOT / "configs" / "adjuster"
NS, ACCOUNT = "raybridge-adjuster", "raybridge-adjuster"
NODE = "gpu-0"  # one of the session cluster's nodes (tests/conftest.py testcluster_request)
POLICY_API = "admissionregistration.k8s.io/v1"

# One worker: the module's fixture applies and removes cluster-wide objects of fixed names.
pytestmark = pytest.mark.xdist_group("adjuster-admission-policy")


def _docs(*paths: Path) -> list[dict[str, Any]]:
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]


SHIPPED = _docs(CONFIG / "00-namespace.yaml", CONFIG / "20-rbac.yaml", CONFIG / "25-admission-policy.yaml")
HOLD = _docs(CONFIG / "optional" / "karpenter-hold.yaml")


def _delete_all(server: Any, docs: list[dict[str, Any]]) -> None:
    for doc in reversed(docs):
        if doc["kind"] == "Namespace":
            continue  # the namespace is shared with nothing else; leaving it costs nothing and deleting it takes long
        meta = doc["metadata"]
        if server.get_object(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace")) is not None:
            server.delete_object(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))


def _policies_loaded(server: Any, names: list[str], timeout: float = 60) -> None:
    """Each policy type-checked by the controller manager (no warnings), and enforced by the API server."""
    deadline = time.monotonic() + timeout
    while True:
        states = {name: (server.get_object(POLICY_API, "ValidatingAdmissionPolicy", name) or {}) for name in names}
        checked = {name: obj.get("status", {}).get("observedGeneration") == obj.get("metadata", {}).get("generation") for name, obj in states.items()}
        if all(checked.values()):
            # The checker also tries the Events policy on events.k8s.io/v1's shape of the same objects (the
            # file's comment says why that is harmless); any other warning is a mistake in the policy.
            warnings = {name: [w for w in obj["status"].get("typeChecking", {}).get("expressionWarnings") or []
                               if not w["warning"].startswith("events.k8s.io/v1, Kind=Event:")] for name, obj in states.items()}
            assert not any(warnings.values()), json.dumps(warnings, indent=1)
            return
        assert time.monotonic() < deadline, f"the policies were not type-checked within {timeout} s: {checked}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def adjuster(real_cluster: Any) -> Iterator[tuple[Any, Scaler, Any]]:
    """The admin's client, a Scaler and a CoreV1Api as the adjuster's ServiceAccount, with the shipped RBAC and
    policies and the opt-in hold file applied."""
    from kubernetes import client

    server = real_cluster.client()
    applied = [*SHIPPED, *HOLD]
    try:
        for doc in applied:
            meta = doc["metadata"]
            if server.get_object(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace")) is None:
                server.create_object(doc)
        _policies_loaded(server, [d["metadata"]["name"] for d in applied if d["kind"] == "ValidatingAdmissionPolicy"])
        api = server.api_client(server.service_account_token(NS, ACCOUNT), retries=False)
        scaler = Scaler(kube_of(api, 10), request_timeout=10, stop=())
        _enforced(server, scaler, client.CoreV1Api(api))
        yield server, scaler, client.CoreV1Api(api)
        api.close()
    finally:
        _delete_all(server, applied)
        if server.get_object("v1", "Node", NODE) is not None:
            _release(server)  # leave the shared node as it was, whatever a failed case did
        server.close()


PROBE = "raybridge.test/policy-probe"


def _enforced(server: Any, scaler: Scaler, core: Any, timeout: float = 30) -> None:
    """Both policies enforced by the API server, which loads them from its informer some time after they are
    created (and type-checked): probed with requests that do no harm when they go through (undone at once)."""
    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + timeout
    node_enforced = events_enforced = False
    while not (node_enforced and events_enforced):
        assert time.monotonic() < deadline, f"the policies were not enforced within {timeout} s"
        if not node_enforced:
            probe = scaler.patch_node(NODE, {"metadata": {"annotations": {PROBE: "true"}}})
            node_enforced = not probe.ok and probe.status == 403
            if probe.ok:
                _release(server, {"metadata": {"annotations": {PROBE: None}}})
        if not events_enforced:
            try:
                created = core.create_namespaced_event("default", _event("default", kind="Node"), _preload_content=False, _request_timeout=10)
                server.delete_object("v1", "Event", json.loads(created.data)["metadata"]["name"], "default")
            except ApiException as exc:
                events_enforced = exc.status == 403
        time.sleep(0.2)


def _eventually(check: Any, what: str, timeout: float = 30) -> Any:
    """The API server loads a new policy from its informer: a first request may come before it."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_the_shipped_hold_patch_holds_and_releases_the_node(adjuster: Any) -> None:
    server, scaler, _ = adjuster
    both = (consts.DO_NOT_DISRUPT_ANNOTATION, consts.SCALE_DOWN_DISABLED_ANNOTATION)
    held = scaler.patch_node(NODE, hold_patch(True))
    assert held.ok, held.detail
    meta = server.get_object("v1", "Node", NODE)["metadata"]
    assert meta["labels"][consts.HOLD_LABEL] == "both" and all(meta["annotations"][a] == "true" for a in both)
    released = scaler.patch_node(NODE, hold_patch(False))
    assert released.ok, released.detail
    meta = server.get_object("v1", "Node", NODE)["metadata"]
    assert consts.HOLD_LABEL not in (meta.get("labels") or {}) and not set(both) & set(meta.get("annotations") or {})
    # Beside annotations someone else set (a NodePool template, an admin): ours alone, set and removed
    for theirs, ours, value in (((consts.DO_NOT_DISRUPT_ANNOTATION,), (consts.SCALE_DOWN_DISABLED_ANNOTATION,), "scale-down"),
                                ((consts.SCALE_DOWN_DISABLED_ANNOTATION,), (consts.DO_NOT_DISRUPT_ANNOTATION,), "true"),
                                (both, (), "label-only")):
        _release(server, {"metadata": {"annotations": {a: "true" for a in theirs}}})
        try:
            for hold in (True, False):
                outcome = scaler.patch_node(NODE, hold_patch(hold, ours))
                assert outcome.ok, outcome.detail
                meta = server.get_object("v1", "Node", NODE)["metadata"]
                assert (meta.get("labels") or {}).get(consts.HOLD_LABEL) == (value if hold else None)
                assert all(meta["annotations"][a] == "true" for a in theirs)
                assert all((meta.get("annotations") or {}).get(a) == ("true" if hold else None) for a in ours)
        finally:
            _release(server, {"metadata": {"annotations": {a: None for a in theirs}}})


# What a stolen adjuster token might try on a node, and the policy's message that refuses it.
NODE_REFUSALS = [
    ("a taint", {"spec": {"taints": [{"key": "stolen", "effect": "NoSchedule"}]}}, "may not change a node's spec"),
    ("cordon", {"spec": {"unschedulable": True}}, "may not change a node's spec"),
    ("another label", {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}, "of a node's labels"),
    ("a label removed", {"metadata": {"labels": {"kubernetes.io/hostname": None}}}, "of a node's labels"),
    ("a label changed", {"metadata": {"labels": {"kubernetes.io/hostname": "elsewhere"}}}, "of a node's labels"),
    ("the hold label not true", {"metadata": {"labels": {consts.HOLD_LABEL: "false"}}}, "of a node's labels"),
    ("another annotation", {"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}}}, "of a node's annotations"),
    ("do-not-disrupt not true", {"metadata": {"annotations": {consts.DO_NOT_DISRUPT_ANNOTATION: "yes"}}}, "of a node's annotations"),
    ("scale-down-disabled not true", {"metadata": {"annotations": {consts.SCALE_DOWN_DISABLED_ANNOTATION: "false"}}}, "of a node's annotations"),
    ("a finalizer", {"metadata": {"finalizers": ["example.com/stolen"]}}, "finalizers or owners"),
]


@pytest.mark.parametrize(("case", "patch", "message"), NODE_REFUSALS, ids=[row[0] for row in NODE_REFUSALS])
def test_the_policy_lets_the_adjuster_change_nothing_else_on_a_node(adjuster: Any, case: str, patch: dict[str, Any], message: str) -> None:
    server, scaler, _ = adjuster
    before = server.get_object("v1", "Node", NODE)

    outcome = scaler.patch_node(NODE, patch)
    assert not outcome.ok and outcome.status == 403 and outcome.attempts == 1, outcome  # a refusal is not retried
    _assert_denied_by(scaler, NODE, patch, "raybridge-adjuster-node-hold", message)
    after = server.get_object("v1", "Node", NODE)
    for part in (("metadata", "labels"), ("metadata", "annotations"), ("metadata", "finalizers"), ("spec",)):
        assert _at(after, part) == _at(before, part), part


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        obj = (obj or {}).get(key)
    return obj


def _assert_denied_by(scaler: Scaler, node: str, patch: dict[str, Any], policy: str, message: str) -> None:
    """The API server's own words: the policy and its message (the Outcome's detail keeps only the reason)."""
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as refused:
        scaler.kube.core().patch_node(node, patch, _content_type="application/merge-patch+json", _request_timeout=10)
    body = json.loads(refused.value.body)
    assert refused.value.status == 403 and f"ValidatingAdmissionPolicy '{policy}'" in body["message"], body
    assert message in body["message"], body


def test_without_the_opt_in_file_the_adjuster_may_not_patch_nodes(adjuster: Any) -> None:
    server, scaler, _ = adjuster
    binding = next(d for d in HOLD if d["kind"] == "ClusterRoleBinding")
    server.delete_object(binding["apiVersion"], "ClusterRoleBinding", binding["metadata"]["name"])
    try:
        def refused() -> Outcome | None:
            outcome = scaler.patch_node(NODE, hold_patch(True))
            return None if outcome.ok else outcome

        outcome = _eventually(refused, "the hold still allowed once the binding was deleted")  # RBAC reads bindings from an informer
        assert outcome.status == 403 and "Forbidden" in outcome.detail, outcome
    finally:
        server.create_object(binding)
        _release(server)


def _release(server: Any, patch: dict[str, Any] | None = None) -> None:
    """The node as it was, as the admin: a hold (or `patch`'s keys) that went through before a refusal took effect removed."""
    from kubernetes import client

    admin = server.api_client()
    try:
        client.CoreV1Api(admin).patch_node(NODE, patch or hold_patch(False), _content_type="application/merge-patch+json")
    finally:
        admin.close()


def _event(namespace: str, kind: str = "Pod", api_version: str = "v1", component: str = "raybridge-adjuster") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": "forged.", "namespace": namespace},
        "involvedObject": {"apiVersion": api_version, "kind": kind, "name": "target", "namespace": namespace},
        "reason": "Forged", "message": "forged", "type": "Normal", "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": component}, "reportingComponent": component,
    }


def test_the_adjuster_s_own_events_on_pods_go_through(adjuster: Any) -> None:
    server, scaler, _ = adjuster
    pod = {"metadata": {"name": "waiting", "namespace": "default", "uid": "0f0f0f0f-0000-4000-8000-000000000001"}}
    outcome = scaler.post_event(pod, "PlaceholderRequested", "asked for 1 GPU")
    assert outcome.ok, outcome.detail
    created = outcome.obj or {}
    assert created["involvedObject"]["name"] == "waiting"
    server.delete_object("v1", "Event", created["metadata"]["name"], "default")


EVENT_REFUSALS = [
    ("about a Secret", _event("default", kind="Secret"), "only about Pods"),
    ("about a Node", _event("default", kind="Node"), "only about Pods"),
    ("about another API's Pod", _event("default", api_version="example.com/v1"), "only about Pods"),
    ("in another component's name", _event("default", component="kubelet"), "reported as raybridge-adjuster"),
]


@pytest.mark.parametrize(("case", "event", "message"), EVENT_REFUSALS, ids=[row[0] for row in EVENT_REFUSALS])
def test_the_policy_stops_forged_events(adjuster: Any, case: str, event: dict[str, Any], message: str) -> None:
    from kubernetes.client.exceptions import ApiException

    _, _, core = adjuster

    def refused() -> Any:
        try:
            created = core.create_namespaced_event("default", event, _preload_content=False, _request_timeout=10)
        except ApiException as exc:
            return exc
        name = json.loads(created.data)["metadata"]["name"]
        raise AssertionError(f"{case}: created {name}")

    exc = refused()
    body = json.loads(exc.body)
    assert exc.status == 403 and "ValidatingAdmissionPolicy 'raybridge-adjuster-events'" in body["message"], body
    assert message in body["message"], body
