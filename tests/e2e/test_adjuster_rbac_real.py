"""`adjuster run` as its ServiceAccount under the shipped RBAC (configs/adjuster/), on the real kube-apiserver's RBAC.

Why it exists: configs/adjuster/20-rbac.yaml says it grants exactly the verbs the adjuster uses. Here the real
authorizer judges that: the shipped objects are applied to a real kube-apiserver (with its ValidatingAdmissionPolicy
on the adjuster's Events enforced), the CLI runs with a TokenRequest token of the ServiceAccount in its kubeconfig,
and a burst of KAI GPU-sharing pods is served by the simulated KAI and cluster-autoscaler of kubesim/sim_gpu.py
(tests/sims_on_real_api.py) beside the real kube-scheduler and kwok. With every rule the pods get their nodes and no
request is refused; without one rule (each row) the adjuster says what it could not do, and the request it was
refused is that rule's and no other's (a record of every request the CLI sent, kept by its own HTTP client). The
opt-in node hold, `--mode provisioning-request`'s Role, the PodGroup verbs (their loss degrades, not fails) and a
cluster that does not serve the PodGroup API (its CRD deleted, until discovery no longer names it) are here too.

What it deliberately does not do: run the shipped Deployment (nothing here runs its image; the CLI stands in for its
container, with the same ServiceAccount), judge the admission policies' rules one by one
(test_adjuster_admission_policy.py), or the rest of `adjuster run`'s behaviour (test_adjuster_ca_on_real_api.py).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
import yaml

from raybridge.adjuster.decision import consts
from testcluster.pytest_plugin import _unavailable
from tests.adjuster_world import NS, SLIM_ADJUSTER, WORK, burst, placeholders, requests, running, templates, unschedulable
from tests.e2e.ca_on_real_api import ADJUSTER_CRDS, CollectedStderr, placeholder_stages, reservation_objects, simulated
from tests.helpers import ROOT, free_port
from tests.waits import wait_for

pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.realtime,
    pytest.mark.xdist_group("adjuster-rbac-real"),  # one stack for the module's tests; its RBAC objects have fixed names
    pytest.mark.timeout(600),
]

CONFIG_DIR = ROOT / "configs" / "adjuster"
ACCOUNT = "raybridge-adjuster"
USERNAME = f"system:serviceaccount:{NS}:{ACCOUNT}"
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
POD_GROUP_CRD = "podgroups.scheduling.run.ai"


def _docs(*paths: Path) -> list[dict[str, Any]]:
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]


SHIPPED = _docs(*sorted(CONFIG_DIR.glob("*.yaml")))
HOLD = _docs(CONFIG_DIR / "optional" / "karpenter-hold.yaml")
REQUEST_ROLE = _docs(CONFIG_DIR / "provisioning-request" / "rbac.yaml")
#: Every role and binding a test may grant the adjuster: what `_grant` removes where a test does not grant it.
EVERY_GRANT = [d for d in (*SHIPPED, *HOLD, *REQUEST_ROLE) if d["kind"] in RBAC_KINDS]

#: The CLI, slim (SLIM_ADJUSTER), with every request its HTTP client sends written to $ADJUSTER_REQUEST_LOG as
#: "METHOD PATH STATUS" (urllib3's HTTPConnectionPool.urlopen is where each request goes out and its status comes in;
#: a watch's status is there when its stream starts).
RECORDED_ADJUSTER = (
    "import os, urllib3.connectionpool as pool\n"
    "_log, _urlopen = os.environ['ADJUSTER_REQUEST_LOG'], pool.HTTPConnectionPool.urlopen\n"
    "def _recorded(self, method, url, *args, **kwargs):\n"
    "    answer = _urlopen(self, method, url, *args, **kwargs)\n"
    "    with open(_log, 'a') as out:\n"
    "        out.write(f'{method} {url} {answer.status}\\n')\n"
    "    return answer\n"
    "pool.HTTPConnectionPool.urlopen = _recorded\n"
) + SLIM_ADJUSTER  # fmt: skip


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    """The real API server, kube-scheduler and kwok; placeholders' `true` exits at once (a kwok Stage); the CRDs of
    every API the shipped RBAC names (KAI's, Karpenter's, the ProvisioningRequest's); the shipped namespace,
    PriorityClass, Service, NetworkPolicy and admission policies (enforced, once type-checked), the opt-in hold's
    policy, and the adjuster's ServiceAccount; the work namespace, and KAI's reservation namespace and account."""
    from testcluster.stack import Stack, StackOptions

    with Stack(StackOptions(operators=(), crds_only=ADJUSTER_CRDS, stages=placeholder_stages())) as running:
        running.apply([
            *[d for d in (*SHIPPED, *HOLD) if d["kind"] not in (*RBAC_KINDS, "Deployment")],
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK}},
            *reservation_objects(),
        ])  # fmt: skip
        _policies_checked(running, [d["metadata"]["name"] for d in (*SHIPPED, *HOLD) if d["kind"] == "ValidatingAdmissionPolicy"])
        yield running


def _policies_checked(stack: Any, names: list[str]) -> None:
    """Each admission policy type-checked by the controller manager (status.observedGeneration caught up)."""
    from testcluster.client import ClusterClient

    client = ClusterClient(stack.kubeconfig)
    try:
        def checked() -> bool:
            found = [client.get_object("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", name) or {} for name in names]
            return all((p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"] for p in found)

        wait_for(checked, timeout=60, interval=0.5, what="the admission policies type-checked")
    finally:
        client.close()


@pytest.fixture
def cluster(stack: Any) -> Iterator[tuple[Any, Any]]:
    """(the admin's client, a running GpuSim: KAI and cluster-autoscaler, 8-GPU nodes 0.5 s after the decision); after,
    no pod, Event, request, template, Lease or added node of the test is left (tests/e2e/ca_on_real_api.py)."""
    import time

    with simulated(stack, autoscaler_clock=time.monotonic) as started:
        yield started


# --- the grant: exactly the given roles and bindings, in force --------------------------------------

Drop = tuple[str, str, str]  # (kind, resource, verb)


def _without(docs: list[dict[str, Any]], drop: Optional[Drop]) -> list[dict[str, Any]]:
    """`docs` less one verb on one resource in every role of `drop`'s kind that grants it: the rule's other resources
    keep the verb (a rule of its own), and a rule left with no verb goes (the API server refuses one)."""
    docs = copy.deepcopy(docs)
    if drop is None:
        return docs
    kind, resource, verb = drop
    holders = [d for d in docs if d["kind"] == kind and any(resource in r["resources"] and verb in r["verbs"] for r in d["rules"])]
    assert holders, f"no {kind} here grants {verb} {resource}"
    for doc in holders:
        rules: list[dict[str, Any]] = []
        for rule in doc["rules"]:
            if resource in rule["resources"] and verb in rule["verbs"]:
                others = [r for r in rule["resources"] if r != resource]
                rules += [dict(rule, resources=others)] if others else []  # the rule's other resources keep the verb
                rule = dict(rule, resources=[resource], verbs=[v for v in rule["verbs"] if v != verb])
            rules += [rule] if rule["verbs"] else []
        doc["rules"] = rules
    return docs


#: (verb, API group, resource, namespace or None for cluster-wide): one permission.
Permission = tuple[str, str, str, Optional[str]]


def _permissions(docs: list[dict[str, Any]]) -> set[Permission]:
    return {(verb, group, resource, d["metadata"].get("namespace")) for d in docs if d["kind"] in ("ClusterRole", "Role")
            for rule in d["rules"] for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}  # fmt: skip


def _allowed(authorization: Any, permission: Permission) -> bool:
    """What the API server's authorizer answers for the adjuster's ServiceAccount (a SubjectAccessReview)."""
    verb, group, resource, namespace = permission
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": USERNAME, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"],
        "resourceAttributes": {"verb": verb, "group": group, "resource": resource, **({"namespace": namespace} if namespace else {})}}}  # fmt: skip
    return bool(authorization.create_subject_access_review(review).status.allowed)


def _grant(client: Any, docs: list[dict[str, Any]], drop: Optional[Drop]) -> None:
    """Exactly `docs` (roles and bindings of EVERY_GRANT's names, less `drop`) granted to the adjuster, and waited for
    until the authorizer (its caches caught up) allows every permission they name and refuses every other one of
    EVERY_GRANT: the dropped verb, and the roles of opt-in files not granted."""
    granted = [d for d in _without(docs, drop) if d["kind"] in RBAC_KINDS]
    keys = {(d["kind"], d["metadata"]["name"]) for d in granted}
    for doc in EVERY_GRANT:
        meta = doc["metadata"]
        if (doc["kind"], meta["name"]) not in keys and client.get_object(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace")):
            client.delete_object(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))
    for doc in granted:
        meta = doc["metadata"]
        found = client.get_object(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))
        if found is None:
            client.create_object(doc)
        else:
            client.replace_object(dict(doc, metadata=dict(meta, resourceVersion=found["metadata"]["resourceVersion"])))
    from kubernetes import client as k8s

    given = _permissions(granted)
    expected = {p: p in given or p[:3] + (None,) in given for p in _permissions(EVERY_GRANT)}  # a ClusterRole's covers a namespace's
    api = client.api_client()
    try:
        authorization = k8s.AuthorizationV1Api(api)
        wait_for(lambda: all(_allowed(authorization, p) == allowed for p, allowed in expected.items()), timeout=30, interval=0.2,
                 what=f"the grant in force ({sum(expected.values())} of {len(expected)} permissions, less {drop})")  # fmt: skip
    finally:
        api.close()


# --- the adjuster as its ServiceAccount -------------------------------------------------------------


class Adjuster(CollectedStderr):
    """`adjuster run` as the adjuster's ServiceAccount: its log (stderr, read on a thread) and every request it sent."""

    def __init__(self, client: Any, tmp_path: Path, *args: str) -> None:
        kubeconfig = client.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS, token=client.service_account_token(NS, ACCOUNT))
        self.request_log = tmp_path / "requests.log"
        super().__init__(subprocess.Popen(
            [sys.executable, "-c", RECORDED_ADJUSTER, "adjuster", "run", "--kubeconfig", str(kubeconfig), "--grace-period", "0.2",
             "--node-gpus", "8", "--resync", "0.2", "--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1", *args],
            cwd=ROOT, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "ADJUSTER_REQUEST_LOG": str(self.request_log)},
        ))  # fmt: skip

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path with query, status) of every request answered so far."""
        if not self.request_log.exists():
            return []
        return [(m, p, int(s)) for m, p, s in (line.split(" ") for line in self.request_log.read_text().splitlines() if line)]

    def refused(self) -> list[tuple[str, str]]:
        """(method, path) of every request answered 403."""
        return [(m, p) for m, p, s in self.requests() if s == 403]

    def __enter__(self) -> "Adjuster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _adjuster(client: Any, tmp_path: Path, drop: Optional[Drop], *args: str, opt_in: tuple[list[dict[str, Any]], ...] = (HOLD,),
              extra: tuple[list[dict[str, Any]], ...] = ()) -> Adjuster:  # fmt: skip
    """The shipped RBAC (with the opt-in files `opt_in` and `extra`), less `drop`, in force; then the CLI under it."""
    _grant(client, [d for docs in (SHIPPED, *opt_in, *extra) for d in docs], drop)
    return Adjuster(client, tmp_path, *args)


#: HTTP method of each RBAC verb (k8s.io/apiserver pkg/endpoints/request/requestinfo.go: GET is get, list or watch).
METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH", "delete": "DELETE"}


def _of_verb(method: str, path: str, verb: str, resource: str) -> bool:
    """Whether the request `method path` is `verb` on `resource` (requestinfo.go: a named object for get, update, patch
    and delete, the collection for list, watch and create; watch=true/1 makes a GET a watch)."""
    bare, _, query = path.partition("?")
    named = re.search(rf"/{resource}/[^/]+$", bare) is not None
    collection = bare.endswith(f"/{resource}")
    watching = re.search(r"(?i)(^|&)watch=(true|1)(&|$)", query) is not None
    if method != METHODS[verb] or watching != (verb == "watch"):
        return False
    return named if verb in ("get", "update", "patch", "delete") else collection


def _http(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except OSError as exc:
        return getattr(exc, "code", 0) or 0, ""


def _passes(port: int) -> int:
    """The adjuster's reconcile passes so far (its /metrics: raybridge_adjuster_reconcile_duration_seconds_count)."""
    found = re.search(r"^raybridge_adjuster_reconcile_duration_seconds_count (\S+)$", _http(port, "/metrics")[1], re.M)
    return int(float(found.group(1))) if found else 0


def _said_refused(log_text: str) -> bool:
    """Whether the adjuster's log tells of a 403 or a Forbidden, its lines' timestamps aside (a time's milliseconds
    can read 403)."""
    said = "\n".join(re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", "", line) for line in log_text.splitlines())
    return re.search(r"\b403\b", said) is not None or "orbidden" in said


# --- the shipped RBAC is enough ---------------------------------------------------------------------


def test_the_shipped_rbac_is_enough(cluster: tuple[Any, Any], tmp_path: Path) -> None:
    client, sim = cluster
    with _adjuster(client, tmp_path, None, "--metrics-port", "0") as run:
        wait_for(lambda: _holder(client), timeout=30, what="the Lease taken")
        burst(client, 4, "0.5", "enough")
        wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        # Events posted as the adjuster: RBAC's `events create` and the shipped policy narrowing it both let them in
        wait_for(lambda: [e for e in client.list_objects("v1", "Event", WORK) if (e.get("source") or {}).get("component") == "raybridge-adjuster"],
                 timeout=10, what="the adjuster's Events on the pods")  # fmt: skip
        code = run.stop()
    assert code == 0, run.text
    assert not _said_refused(run.text), run.text
    assert run.refused() == [], run.refused()
    # How placeholders ask for GPUs of different memory and for GPUs claimed as DRA devices, said once at start.
    assert run.text.count("require the node label nvidia.com/gpu.memory") == 1, run.text
    assert run.text.count("asked for as the device plugin's resource (nvidia.com/gpu)") == 1, run.text


def _holder(client: Any) -> str:
    lease = client.get_object("coordination.k8s.io/v1", "Lease", consts.DEFAULT_LEASE_NAME, NS)
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def test_without_the_opt_in_node_hold_the_adjuster_says_once_that_holds_are_off(cluster: tuple[Any, Any], tmp_path: Path) -> None:
    """Patching nodes is opt-in (configs/adjuster/optional/karpenter-hold.yaml): without it the pods still run, and
    the refusal is said once, not once per node and pass; the node is patched once, not again each pass."""
    client, sim = cluster
    port = free_port()
    with _adjuster(client, tmp_path, None, "--metrics-port", str(port), opt_in=()) as run:
        burst(client, 12, "0.5", "nohold")  # 6 GPUs: one node of 8
        wait_for(lambda: unschedulable(client) == 12, timeout=30, what="the burst unschedulable")
        sim.kai_paused = True  # the pods land only after a pass that would hold their new node
        wait_for(lambda: "node holds are off" in run.text, timeout=60, what="the refusal said")
        passes = _passes(port)
        wait_for(lambda: _passes(port) >= passes + 5, timeout=30, what="five more passes, each of which would patch the node again")
        sim.kai_paused = False
        wait_for(lambda: running(client) == 12, timeout=90, what="all pods running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        code = run.stop()
    assert code == 0, run.text
    assert run.text.count("node holds are off: patch node: HTTP 403 Forbidden") == 1, run.text
    assert consts.HOLD_GRANT_FILE in run.text and run.text.count("403 Forbidden") == 1, run.text  # not "403": a log time can hold it
    assert not [n for n in client.list_objects("v1", "Node") if consts.HOLD_LABEL in (n["metadata"].get("labels") or {})]
    node_patches = [(m, p) for m, p, _ in run.requests() if _of_verb(m, p, "patch", "nodes")]
    assert len(node_patches) == 1, node_patches  # tried again only after consts.HOLDS_RETRY_SECONDS
    assert run.refused() == node_patches, run.refused()


# --- each shipped verb is needed --------------------------------------------------------------------

# (kind, resource, verb): each is used, so without it the adjuster is refused (403); and what it then says
MISSING_VERBS = [
    (("ClusterRole", "pods", "watch"), "pods list/watch failed ((403) Reason: Forbidden"),
    (("ClusterRole", "nodes", "list"), "nodes list/watch failed ((403) Reason: Forbidden"),
    (("ClusterRole", "nodes", "patch"), "node holds are off: patch node: HTTP 403 Forbidden"),
    (("ClusterRole", "events", "create"), "could not post a ScaleUpRequested event on work/needed-0: create event: HTTP 403 Forbidden"),
    (("ClusterRole", "priorityclasses", "get"), "cannot read PriorityClass raybridge-placeholder (forbidden)"),
    (("Role", "pods", "create"), "create pod: HTTP 403 Forbidden"),
    (("Role", "pods", "delete"), "delete pod: HTTP 403 Forbidden"),
    (("Role", "leases", "get"), "Error retrieving resource lock raybridge-adjuster as Forbidden"),
    (("Role", "leases", "update"), "Failed to update lock as (403)"),
]


def _refused_for(run: Adjuster, drop: Drop, said: str, timeout: float = 90) -> None:
    """Wait until the adjuster says `said`, its words for being refused `drop`'s verb, and check that every request
    it was refused is of that verb and resource."""
    _, resource, verb = drop
    wait_for(lambda: said in run.text, timeout=timeout, what=f"the adjuster saying {said!r} without {drop}")
    refused = wait_for(run.refused, timeout=10, what="the refused request recorded")
    assert all(_of_verb(m, p, verb, resource) for m, p in refused), (drop, refused, run.text)
    assert "Traceback" not in run.text, run.text


@pytest.mark.parametrize("drop,said", MISSING_VERBS, ids=["-".join(d) for d, _ in MISSING_VERBS])
def test_every_shipped_verb_is_needed(cluster: tuple[Any, Any], tmp_path: Path, drop: Drop, said: str) -> None:
    client, sim = cluster
    with _adjuster(client, tmp_path, drop, "--metrics-port", "0") as run:
        burst(client, 4, "0.5", "needed")
        if drop == ("ClusterRole", "nodes", "patch"):  # the pods land only after the pass that holds their new node
            wait_for(lambda: unschedulable(client) == 4, timeout=30, what="the burst unschedulable")
            sim.kai_paused = True
        _refused_for(run, drop, said)


# --- --mode provisioning-request ---------------------------------------------------------------------

# (kind, resource, verb) of the extra Role: each is used in --mode provisioning-request; and what the adjuster then says
MISSING_REQUEST_VERBS = [
    (("Role", "provisioningrequests", "list"), "cannot list ProvisioningRequests (forbidden)"),
    (("Role", "provisioningrequests", "create"), "create provisioningrequest: HTTP 403 Forbidden"),
    (("Role", "provisioningrequests", "delete"), "delete provisioningrequest: HTTP 403 Forbidden"),
    (("Role", "podtemplates", "list"), "podtemplates list/watch failed ((403) Reason: Forbidden"),
    (("Role", "podtemplates", "create"), "create podtemplate: HTTP 403 Forbidden"),
    (("Role", "podtemplates", "delete"), "delete podtemplate: HTTP 403 Forbidden"),
]


@pytest.mark.parametrize("drop,said", [(None, ""), *MISSING_REQUEST_VERBS], ids=["complete", *("-".join(d[1:]) for d, _ in MISSING_REQUEST_VERBS)])
def test_the_provisioning_request_rbac_is_exactly_enough(cluster: tuple[Any, Any], tmp_path: Path, drop: Optional[Drop], said: str) -> None:
    client, sim = cluster
    with _adjuster(client, tmp_path, drop, "--metrics-port", "0", "--mode", "provisioning-request", extra=(REQUEST_ROLE,)) as run:
        burst(client, 4, "0.5", "request")
        if drop:
            _refused_for(run, drop, said)
            return
        wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
        wait_for(lambda: not requests(client) and not templates(client), timeout=30, what="cleaned up")
        code = run.stop()
    assert code == 0 and not _said_refused(run.text), run.text
    assert run.refused() == [], run.refused()


# --- KAI PodGroups: their verbs dropped, or their API not served ------------------------------------

# Without either PodGroup verb the adjuster degrades, not fails: the 403 is logged once, the pods are served.
MISSING_POD_GROUP_VERBS = [("ClusterRole", "podgroups", verb) for verb in ("list", "watch")]


@pytest.mark.parametrize("drop", MISSING_POD_GROUP_VERBS, ids=["-".join(d) for d in MISSING_POD_GROUP_VERBS])
def test_without_a_pod_group_verb_the_adjuster_logs_it_and_goes_on(cluster: tuple[Any, Any], tmp_path: Path, drop: Drop) -> None:
    client, sim = cluster
    with _adjuster(client, tmp_path, drop, "--metrics-port", "0") as run:
        wait_for(lambda: "cannot read podgroups (403" in run.text, timeout=60, what=f"the degradation logged without {drop}")
        burst(client, 4, "0.5", f"pg{drop[2]}")
        wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        code = run.stop()
    assert code == 0, run.text
    assert run.text.count("cannot read podgroups") == 1, run.text
    assert run.text.count("403 Forbidden") == 1 and "Traceback" not in run.text, run.text  # not "403" (a log time can hold it)
    assert run.refused() and all(_of_verb(m, p, drop[2], "podgroups") for m, p in run.refused()), run.refused()


def _pod_groups_served(client: Any) -> bool:
    """Whether discovery names podgroups in scheduling.run.ai/v2alpha2, or a list of them answers anything but 404."""
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    api = client.api_client()
    try:
        custom = k8s.CustomObjectsApi(api)
        if any(r.name == "podgroups" for r in custom.get_api_resources("scheduling.run.ai", "v2alpha2").resources):
            return True
        custom.list_namespaced_custom_object("scheduling.run.ai", "v2alpha2", WORK, "podgroups")
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    finally:
        api.close()


@contextlib.contextmanager
def _without_the_pod_group_api(stack: Any, client: Any) -> Iterator[None]:
    """KAI's PodGroup CRD deleted until discovery no longer serves it; installed again after."""
    from testcluster.sources import release_crds

    crd = next(d for d in release_crds("kai", stack.programs, stack.options.versions) if d["metadata"]["name"] == POD_GROUP_CRD)
    client.delete_object("apiextensions.k8s.io/v1", "CustomResourceDefinition", POD_GROUP_CRD)
    try:
        wait_for(lambda: not _pod_groups_served(client), timeout=60, interval=0.2, what="the PodGroup API no longer served")
        yield
    finally:
        wait_for(lambda: client.get_object("apiextensions.k8s.io/v1", "CustomResourceDefinition", POD_GROUP_CRD) is None,
                 timeout=60, what="the PodGroup CRD gone")  # fmt: skip
        stack.install_crds([crd])
        wait_for(lambda: _pod_groups_served(client), timeout=60, interval=0.2, what="the PodGroup API served again")


def test_a_cluster_without_the_pod_group_api_is_served_without_it(stack: Any, cluster: tuple[Any, Any], tmp_path: Path) -> None:
    client, sim = cluster
    port = free_port()
    with _without_the_pod_group_api(stack, client), _adjuster(client, tmp_path, None, "--metrics-port", str(port)) as run:
        burst(client, 4, "0.5", "nopg")
        wait_for(lambda: running(client) == 4, timeout=90, what="all pods running")
        wait_for(lambda: not placeholders(client), timeout=30, what="the placeholders deleted")
        assert "raybridge_adjuster_podgroups_unavailable 1.0" in _http(port, "/metrics")[1]
        assert _http(port, "/readyz")[0] == 200
        code = run.stop()
    assert code == 0, run.text
    about = [re.sub(r"^\S+ \S+ ", "", line) for line in run.lines if "podgroups" in line]
    assert len(about) == 1 and about[0].startswith("WARNING cannot read podgroups (404 Not Found): going on without them"), about
    assert not _said_refused(run.text) and run.refused() == [], run.text  # once, and the pods were served
