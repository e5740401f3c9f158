"""configs/rbac/submitter.yaml is enough, and each required rule is needed, on the real cluster.

Runs the CLI as the ServiceAccount the file binds (a TokenRequest token in a
kubeconfig) against the session's real cluster (testcluster: kube-apiserver with
`--authorization-mode=Node,RBAC`, KubeRay and Kueue), each test in a fresh
namespace with the shipped Role and ClusterRole (their cluster-scoped names made
unique). The real KubeRay gives the head service's in-cluster name as the
dashboardURL, so every submit reaches the Ray head by port-forward, as from a
laptop: the port-forward rules are exercised by every submit.

A Ray cluster with token authentication is checked here too: the door to the shared
Ray head holds each head pod's port-forward to the token of that pod's RayCluster
(testcluster/head_front.py, pod_relay.py), as a head started with KubeRay's token
does, so a submit passes only with the token the opt-in Secret rule lets raybridge read.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from tests.helpers import EXAMPLES, ROOT, cli_env, run_cli
from tests.builders import rayjob_manifest
from tests.cluster_state import leftovers, make_cluster_queue, make_local_queue
from tests.waits import wait_for

RBAC_FILE = ROOT / "configs" / "rbac" / "submitter.yaml"
#: The token's Secret configs/rbac/submitter-token-auth.yaml grants, made by the namespace's owner (`authSecret`).
TOKEN_SECRET = "ray-auth-token"
TOKEN_AUTH_FILE = ROOT / "configs" / "rbac" / "submitter-token-auth.yaml"
CLUSTER_PODS_FILE = ROOT / "configs" / "rbac" / "submitter-cluster-pods.yaml"
KUBERAY_RELEASE_FILE = ROOT / "configs" / "rbac" / "submitter-kuberay-release.yaml"
EXAMPLE_NAMESPACE, ACCOUNT = "team-a", "raybridge-submitter"
RAY = "ray.io/v1"


@pytest.fixture(scope="module")
def server(real_cluster):
    """The admin's client of the session's real cluster."""
    client = real_cluster.client()
    try:
        yield client
    finally:
        client.close()


def _shipped_docs(token_auth: bool = False, cluster_pods: bool = False, kuberay_release: bool = False) -> list[dict[str, Any]]:
    """The shipped RBAC: submitter.yaml, with the opt-in submitter-token-auth.yaml (`token_auth`),
    submitter-cluster-pods.yaml (`cluster_pods`) and submitter-kuberay-release.yaml (`kuberay_release`) beside it."""
    files = [RBAC_FILE, *([TOKEN_AUTH_FILE] if token_auth else []), *([CLUSTER_PODS_FILE] if cluster_pods else []),
             *([KUBERAY_RELEASE_FILE] if kuberay_release else [])]  # fmt: skip
    return [d for path in files for d in yaml.safe_load_all(path.read_text()) if d]


def _for_namespace(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The shipped object moved from team-a to `namespace`; cluster-scoped names get the namespace too, so tests do not share them."""
    doc = copy.deepcopy(doc)
    meta = doc["metadata"]
    if meta.get("namespace") == EXAMPLE_NAMESPACE:
        meta["namespace"] = namespace
    elif doc["kind"].startswith("Cluster") or meta.get("namespace"):  # cluster-wide, or in another namespace (the operator's)
        meta["name"] = f"{meta['name']}-{namespace}"
        if doc["kind"].endswith("RoleBinding"):
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{namespace}"
    for subject in doc.get("subjects", ()):
        subject["namespace"] = namespace
    return doc


def _grants(doc: dict[str, Any], group: str, resource: str) -> bool:
    return any(group in rule["apiGroups"] and resource in rule["resources"] for rule in doc.get("rules") or [])


def _without(doc: dict[str, Any], group: str, resource: str, verb: str) -> dict[str, Any]:
    """The shipped role less one verb; a rule left with none goes (the API server refuses a rule without verbs)."""
    for rule in doc["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            assert verb in rule["verbs"], f"{resource} {verb} is not in the shipped {doc['kind']}"
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
            doc["rules"] = [r for r in doc["rules"] if r["verbs"]]
            return doc
    raise AssertionError(f"no rule for {group}/{resource} in the shipped {doc['kind']}")


def _submitter(server: Any, tmp_path: Path, *drops: tuple[str, str, str, str] | None, token_auth: bool = False,
               cluster_pods: bool = True, kuberay_release: bool = True) -> tuple[str, str, Callable[..., Any]]:
    """A fresh namespace with a LocalQueue, the shipped RBAC applied there (with the opt-in token-auth file when
    `token_auth`, the opt-in cluster-wide pod list when `cluster_pods`, the operator's Deployment read when
    `kuberay_release`; less `drops`), and a CLI runner as its ServiceAccount."""
    suffix = uuid.uuid4().hex[:6]
    namespace, lq = f"team-{suffix}", f"lq-{suffix}"
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    make_cluster_queue(server, f"cq-{suffix}", gpus=8)
    make_local_queue(server, lq, namespace, f"cq-{suffix}")
    docs = [_for_namespace(doc, namespace) for doc in _shipped_docs(token_auth, cluster_pods, kuberay_release)]
    for drop in drops:
        if drop:
            holders = [doc for doc in docs if doc["kind"] == drop[0] and _grants(doc, drop[1], drop[2])]
            assert holders, f"no shipped {drop[0]} grants {drop[1]}/{drop[2]}"
            for doc in holders:
                _without(doc, *drop[1:])
    for doc in docs:
        server.create_object(doc)
    if token_auth:  # what the opt-in file asks the namespace's owner to make once
        server.create_object({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": TOKEN_SECRET, "namespace": namespace},
                              "stringData": {"auth_token": uuid.uuid4().hex + uuid.uuid4().hex}})  # fmt: skip
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig, namespace=namespace, token=server.service_account_token(namespace, ACCOUNT))

    def cli(*args: str, timeout: float = 180) -> Any:
        return run_cli(*args, env=cli_env(KUBECONFIG=str(kubeconfig)), timeout=timeout)

    return namespace, lq, cli


def _held(server: Any, namespace: str, lq: str) -> str:
    """A RayJob someone else created (the admin): what the lifecycle commands act on."""
    server.create_object(rayjob_manifest("held", namespace=namespace, queue=lq, workers=1, gpus_per_worker=1))
    return "held"


REFUSAL = re.compile(r"\b403\b|forbidden|permission|not readable|not checked|could not be (read|listed)|unknown", re.IGNORECASE)


def _refusals(text: str) -> list[str]:
    """Lines saying something was refused or left unchecked."""
    return [line for line in text.splitlines() if REFUSAL.search(line)]


def test_the_shipped_rbac_is_enough_for_submit_and_every_lifecycle_command(server, tmp_path):
    """Every submit port-forwards to the head pod here (the real KubeRay's dashboardURL is the in-cluster name),
    so this is also the shipped port-forward rules at work."""
    namespace, lq, cli = _submitter(server, tmp_path)
    ran = cli("submit", str(EXAMPLES / "hello.yaml"), "-n", namespace, "--queue", lq, "--gpus", "8")
    assert ran.returncode == 0, ran.stderr
    assert "sum of squares: 285" in ran.stdout
    assert "port-forwarding" in ran.stderr and f"deleted RayJob {namespace}/hello" in ran.stderr
    assert _refusals(ran.stderr) == [], ran.stderr
    kept = cli("submit", "-n", namespace, "--queue", lq, "--name", "kept", "--keep", "--", "python", "-c", "print('kept output')")
    assert kept.returncode == 0 and "kept output" in kept.stdout, kept.stderr
    steps = {
        "list": (["list", "-n", namespace], "kept"),
        "status": (["status", "kept", "-n", namespace], "kept"),
        "logs": (["logs", "kept", "-n", namespace], "kept output"),
        "explain": (["explain", "kept", "-n", namespace], "kept"),
        "stop": (["stop", "kept", "-n", namespace], "already ended"),
        "delete": (["delete", "kept", "-n", namespace], f"deleted RayJob {namespace}/kept"),
    }
    for step, (args, expected) in steps.items():
        out = cli(*args)
        assert out.returncode == 0, (step, out.stderr)
        assert expected in out.stdout + out.stderr, (step, out.stdout, out.stderr)
        assert _refusals(out.stdout + out.stderr) == [], (step, out.stderr)
    assert leftovers(server, namespace) == {}


def test_the_shipped_rbac_lets_a_job_be_queued_with_its_working_dir_and_not_without_the_configmap_rule(server, tmp_path):
    """`submit --no-wait` creates the working dir's ConfigMap (owned by the RayJob); without that rule it is exit 3
    naming it, and the RayJob it had created is deleted."""
    namespace, lq, cli = _submitter(server, tmp_path)
    queued = cli("submit", str(EXAMPLES / "hello.yaml"), "-n", namespace, "--queue", lq, "--no-wait")
    assert queued.returncode == 0, queued.stderr
    assert server.get_object("v1", "ConfigMap", "hello-working-dir", namespace) is not None
    assert cli("delete", "hello", "-n", namespace).returncode == 0
    (tmp_path / "dropped").mkdir()
    namespace, lq, cli = _submitter(server, tmp_path / "dropped", ("Role", "", "configmaps", "create"))
    refused = cli("submit", str(EXAMPLES / "hello.yaml"), "-n", namespace, "--queue", lq, "--no-wait")
    assert refused.returncode == 3, refused.stderr
    assert f"creating ConfigMap {namespace}/hello-working-dir: permission denied" in refused.stderr, refused.stderr
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=30, what="the RayJob deleted")


# (kind, apiGroup, resource, verb) dropped -> the command that needs it, and the refusal it must name (exit 3, a
# line or two, no traceback).
REQUIRED = [
    (("ClusterRole", "", "nodes", "list"), "submit-dry-run", 'cannot list resource "nodes"'),
    (("Role", "ray.io", "rayjobs", "create"), "submit", 'cannot create resource "rayjobs"'),
    (("Role", "ray.io", "rayjobs", "patch"), "submit", 'cannot patch resource "rayjobs"'),
    (("Role", "ray.io", "rayjobs", "get"), "status", 'cannot get resource "rayjobs"'),
    (("Role", "ray.io", "rayjobs", "list"), "list", 'cannot list resource "rayjobs"'),
    (("Role", "ray.io", "rayclusters", "list"), "list", 'cannot list resource "rayclusters"'),
    (("Role", "ray.io", "rayjobs", "delete"), "delete", 'cannot delete resource "rayjobs"'),
    (("Role", "kueue.x-k8s.io", "workloads", "list"), "status", 'cannot list resource "workloads"'),
    (("Role", "", "secrets", "get"), "submit-token", 'cannot get resource "secrets"'),
]

# Optional reads: dropped, the command still succeeds (or refuses for the real reason) and says what it could not check.
OPTIONAL = [
    (("ClusterRole", "", "pods", "list"), "submit-dry-run", 0, "free GPUs unknown: no permission to list pods"),
    (("ClusterRole", "kueue.x-k8s.io", "clusterqueues", "get"), "explain", 0, "could not be read: its quota is not shown"),
    (("ClusterRole", "kueue.x-k8s.io", "resourceflavors", "list"), "explain", 0, "ResourceFlavors could not be listed"),
    (("ClusterRole", "", "namespaces", "get"), "submit-missing-queue", 2, "LocalQueue no-such-queue does not exist"),
]


def token_spec(tmp_path: Path, secret: str | None = TOKEN_SECRET) -> Path:
    """A spec whose Ray cluster has token authentication (authOptions.mode: token), its token in `secret` (the one
    the opt-in file grants), or with None in the Secret KubeRay makes for the cluster."""
    spec = tmp_path / "locked.yaml"
    where = f"authSecret: {secret}\n" if secret else "authMode: token\n"
    spec.write_text(f"name: refused\n{where}entrypoint: python -c \"print('behind the token')\"\n")
    return spec


def _command(name: str, namespace: str, lq: str, job: str, tmp_path: Path) -> list[str]:
    quick = ["--timeout", "60", "--", "python", "-c", "print(1)"]
    return {
        "submit-token": ["submit", str(token_spec(tmp_path)), "-n", namespace, "--queue", lq, "--timeout", "60"],
        "submit-dry-run": ["submit", "--dry-run", "-n", namespace, "--queue", lq, "--name", "dry", *quick],
        "submit": ["submit", "-n", namespace, "--queue", lq, "--name", "refused", *quick],
        "submit-missing-queue": ["submit", "-n", namespace, "--queue", "no-such-queue", "--name", "refused", *quick],
        "status": ["status", job, "-n", namespace],
        "list": ["list", "-n", namespace],
        "delete": ["delete", job, "-n", namespace],
        "explain": ["explain", job, "-n", namespace],
    }[name]


def _id(drop: tuple[str, ...], command: str) -> str:
    return "-".join(part for part in drop if part) + "-" + command


@pytest.mark.parametrize(("drop", "command", "message"), REQUIRED, ids=[_id(d, c) for d, c, _ in REQUIRED])
def test_each_required_rule_is_needed_and_its_absence_is_a_clear_exit_3(server, tmp_path, drop, command, message):
    namespace, lq, cli = _submitter(server, tmp_path, drop, token_auth=command == "submit-token")
    out = cli(*_command(command, namespace, lq, _held(server, namespace, lq), tmp_path))
    assert out.returncode == 3, out.stderr
    assert "permission denied" in out.stderr and message in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr and [line for line in lines if line.startswith("error:")] == lines[-1:], out.stderr
    left = [o["metadata"]["name"] for o in server.list_objects(RAY, "RayJob", namespace)]
    assert "refused" not in left  # a submit that failed half-way deleted what it created


@pytest.mark.parametrize(("drop", "command", "code", "note"), OPTIONAL, ids=[_id(d, c) for d, c, _, _ in OPTIONAL])
def test_each_optional_read_degrades_with_a_note(server, tmp_path, drop, command, code, note):
    namespace, lq, cli = _submitter(server, tmp_path, drop)
    out = cli(*_command(command, namespace, lq, _held(server, namespace, lq), tmp_path))
    assert out.returncode == code, out.stderr
    assert note in out.stdout + out.stderr, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "permission denied" not in out.stderr, out.stderr


def test_the_preflight_reads_are_granted(server, tmp_path):
    """Under the shipped rules preflight can name what exists, so none of its reads is refused."""
    namespace, lq, cli = _submitter(server, tmp_path)
    rows = {
        "queue": (["--queue", "no-such-queue"], f"LocalQueue no-such-queue does not exist in namespace {namespace} (LocalQueues there: {lq})"),
        "priority": (["--queue", lq, "--priority", "no-such-class"], "WorkloadPriorityClass no-such-class does not exist"),
    }
    for case, (flags, message) in rows.items():
        out = cli("submit", "-n", namespace, *flags, "--name", "refused", "--timeout", "60", "--", "python", "-c", "1")
        assert out.returncode == 2, (case, out.stderr)
        assert message in out.stderr, (case, out.stderr)
        assert "not readable" not in out.stderr and "not checked" not in out.stderr, (case, out.stderr)
    assert server.list_objects(RAY, "RayJob", namespace) == []


# The rules dropped for the port-forward and the refusal named. Kubernetes authorizes the WebSocket port-forward
# as `get` on pods/portforward; the `create` the Role grants too is checked from Kubernetes 1.35, so on this
# cluster (1.34) its absence refuses nothing and is not a case here (kubesim checks both, as 1.35 does).
PORT_FORWARD = [
    ((("Role", "", "pods", "list"), ("ClusterRole", "", "pods", "list")), 'cannot list resource "pods"'),
    ((("Role", "", "pods/portforward", "get"),), 'cannot get resource "pods/portforward"'),
]


@pytest.mark.parametrize(("drop", "message"), PORT_FORWARD, ids=["+".join(_id(one, "submit") for one in d) for d, _ in PORT_FORWARD])
def test_reaching_the_dashboard_by_port_forward_needs_its_rules(server, tmp_path, drop, message):
    namespace, lq, cli = _submitter(server, tmp_path, *drop)
    out = cli("submit", "-n", namespace, "--queue", lq, "--name", "forwarded", "--timeout", "60", "--", "python", "-c", "print('through the tunnel')")
    assert out.returncode == 3, out.stderr
    assert "permission denied" in out.stderr and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "through the tunnel" not in out.stdout
    assert leftovers(server, namespace) == {}


def _cluster_queue_of(server: Any, namespace: str, lq: str) -> dict[str, Any]:
    name = server.get_object("kueue.x-k8s.io/v1beta2", "LocalQueue", lq, namespace)["spec"]["clusterQueue"]
    return server.get_object("kueue.x-k8s.io/v1beta2", "ClusterQueue", name)


def test_without_clusterqueue_get_an_inactive_queue_is_refused_from_the_local_queue_s_status(server, tmp_path):
    """The ClusterQueue names a missing flavor; Kueue says so on the LocalQueue, which the submitter may read."""
    namespace, lq, cli = _submitter(server, tmp_path, ("ClusterRole", "kueue.x-k8s.io", "clusterqueues", "get"))
    cq = _cluster_queue_of(server, namespace, lq)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = f"gone-{namespace}"
    server.replace_object(cq)

    def local_queue_inactive() -> bool:
        conds = (server.get_object("kueue.x-k8s.io/v1beta2", "LocalQueue", lq, namespace).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "False" for c in conds)

    wait_for(local_queue_inactive, timeout=30, what="Kueue to mark the LocalQueue inactive")
    out = cli("submit", "-n", namespace, "--queue", lq, "--name", "refused", "--timeout", "60", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert (
        f"ClusterQueue {cq['metadata']['name']} (behind LocalQueue {lq}) is not active "
        "(the LocalQueue's status: ClusterQueueIsInactive: Can't submit new workloads to clusterQueue)"
    ) in out.stderr
    assert "Traceback" not in out.stderr and server.list_objects(RAY, "RayJob", namespace) == []


def test_without_cohorts_list_what_the_cohort_lends_is_not_held_against_the_job(server, tmp_path):
    """16 GPUs on a queue of 8 in a cohort: Cohort objects might lend the rest, so it is noted, not refused."""
    namespace, lq, cli = _submitter(server, tmp_path, ("ClusterRole", "kueue.x-k8s.io", "cohorts", "list"))
    cq = _cluster_queue_of(server, namespace, lq)
    cq["spec"]["cohortName"] = f"pool-{namespace}"
    server.replace_object(cq)
    out = cli("submit", "-n", namespace, "--queue", lq, "--name", "hopeful", "--gpus", "16", "--timeout", "3", "--", "python", "-c", "1")
    assert out.returncode == 3, out.stderr  # created, then not admitted within the timeout: no Cohort lends here
    assert f"Cohorts could not be listed: what cohort pool-{namespace} can lend to ClusterQueue {cq['metadata']['name']} was not checked" in out.stderr
    assert "can ever hold" not in out.stderr and "Traceback" not in out.stderr
    assert leftovers(server, namespace) == {}


def test_the_default_rbac_reads_no_secret_and_a_token_job_needs_the_opt_in_file(server, tmp_path):
    """Reading the namespace's Secrets is granted only by the opt-in submitter-token-auth.yaml: without it a token
    job is refused with a clear exit 3 and leaves nothing behind."""
    assert not any(_grants(doc, "", "secrets") for doc in _shipped_docs())
    assert any(_grants(doc, "", "secrets") for doc in _shipped_docs(token_auth=True))
    namespace, lq, cli = _submitter(server, tmp_path)
    out = cli(*_command("submit-token", namespace, lq, "none", tmp_path))
    assert out.returncode == 3, out.stderr
    assert 'cannot get resource "secrets"' in out.stderr, out.stderr
    assert "refused" not in [o["metadata"]["name"] for o in server.list_objects(RAY, "RayJob", namespace)]


def test_the_default_rbac_lists_pods_in_its_namespace_only_and_says_free_gpus_are_unknown(server, tmp_path):
    """The cluster-wide pod list (every pod's spec, env values included) is granted only by the opt-in
    submitter-cluster-pods.yaml: without it submit still runs the job and says once what it could not check."""
    cluster_wide = [doc for doc in _shipped_docs() if doc["kind"] == "ClusterRole" and _grants(doc, "", "pods")]
    assert cluster_wide == []
    assert any(_grants(doc, "", "pods") for doc in _shipped_docs(cluster_pods=True) if doc["kind"] == "ClusterRole")
    namespace, lq, cli = _submitter(server, tmp_path, cluster_pods=False)
    out = cli("submit", "-n", namespace, "--queue", lq, "--name", "scoped", "--", "python", "-c", "print('ran without the pod list')")
    assert out.returncode == 0, out.stderr
    assert "ran without the pod list" in out.stdout
    assert _refusals(out.stderr) == ["note: free GPUs unknown: no permission to list pods"], out.stderr
    assert leftovers(server, namespace) == {}


def test_without_the_operator_read_submit_assumes_an_older_kuberay_and_says_so_and_check_shows_it(server, tmp_path):
    """The operator's release decides the bound after an eviction (docs/lifecycle.md); the default RBAC cannot read
    the operator's Deployment, so raybridge keeps the job id, as for an operator before v1.6, and says why. With
    the opt-in Role (submitter-kuberay-release.yaml, in the operator's namespace) it reads v1.6.1."""
    namespace, lq, cli = _submitter(server, tmp_path, kuberay_release=False)
    out = cli("submit", "-n", namespace, "--queue", lq, "--name", "assumed", "--", "python", "-c", "print('ran')")
    assert out.returncode == 0, out.stderr
    assert _refusals(out.stderr) == [
        "note: KubeRay operator release unknown (this user may not list Deployments cluster-wide or in kuberay-system, "
        "ray-system, kuberay-operator, default): assuming one before v1.6, so no preRunningDeadlineSeconds: if Kueue evicts "
        "the job after raybridge has exited, the readmitted RayJob holds its new cluster for the job's age then plus 30m, "
        "and on v1.3 to v1.6 up to about 17 minutes longer (the operator's backoff)"
    ], out.stderr
    checked = cli("check", "-n", namespace, "--queue", lq, "-o", "json")
    rows = {row["check"]: row for row in json.loads(checked.stdout)["checks"]}
    assert checked.returncode == 0, checked.stderr
    assert rows["KubeRay operator"]["status"] == "unknown" and rows["queue"]["status"] == "ok", rows
    assert "assumed before v1.6" in rows["orphan bound"]["detail"]

    (tmp_path / "opted-in").mkdir()
    namespace, lq, cli = _submitter(server, tmp_path / "opted-in")
    checked = cli("check", "-n", namespace, "--queue", lq, "-o", "json")
    rows = {row["check"]: row for row in json.loads(checked.stdout)["checks"]}
    assert rows["KubeRay operator"] == {"check": "KubeRay operator", "status": "ok",
                                        "detail": "v1.6.1 (Deployment kuberay-system/kuberay-operator)"}, rows  # fmt: skip
    assert leftovers(server, namespace) == {}


def test_a_token_protected_cluster_works_under_the_shipped_rules(server, tmp_path):
    """submitter.yaml and the opt-in submitter-token-auth.yaml: the submit, whose every Job API call the head pod's
    port-forward refuses without the token, reads the Secret `authSecret` names and passes."""
    namespace, lq, cli = _submitter(server, tmp_path, token_auth=True)
    out = cli("submit", str(token_spec(tmp_path)), "-n", namespace, "--queue", lq, "--timeout", "60")
    assert out.returncode == 0, out.stderr
    assert "behind the token" in out.stdout and _refusals(out.stderr) == [], out.stderr
    assert server.list_objects(RAY, "RayJob", namespace) == []


def test_the_shipped_token_rule_reads_the_named_secret_alone(server, tmp_path):
    """Narrowed to the Secret `authSecret` names: a token job whose cluster gets a Secret of its own (authMode: token
    alone) is refused with exit 3 naming the read, and so is one naming a Secret the namespace's owner has not made."""
    namespace, lq, cli = _submitter(server, tmp_path, token_auth=True)
    own = cli("submit", str(token_spec(tmp_path, secret=None)), "-n", namespace, "--queue", lq, "--timeout", "60")
    assert own.returncode == 3, own.stderr
    assert 'cannot get resource "secrets"' in own.stderr and "Traceback" not in own.stderr, own.stderr
    server.delete_object("v1", "Secret", TOKEN_SECRET, namespace)
    missing = cli("submit", str(token_spec(tmp_path)), "-n", namespace, "--queue", lq, "--timeout", "60")
    assert missing.returncode == 2, missing.stderr
    assert f"authSecret: Secret {namespace}/{TOKEN_SECRET} does not exist or holds no auth_token" in missing.stderr
    assert server.list_objects(RAY, "RayJob", namespace) == []  # refused before anything was made
