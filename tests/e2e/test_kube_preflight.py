"""`submit --backend kubernetes` where the cluster says no before anything runs, and what the server stored
on the created RayJob: on the real cluster (testcluster: kube-apiserver v1.34.4, KubeRay v1.6.1, Kueue v0.17.0).

What a user sees when the cluster says no: an admission denial (exit 2 with its words, never "permission
denied"), from a webhook (a real one the API server calls, tests/e2e/admission_webhook.py) or from a
ValidatingAdmissionPolicy (the API server's own); a LocalQueue whose ClusterQueue is missing, one Kueue found
inactive (it names a ResourceFlavor that does not exist), a stopped LocalQueue (exit 2, naming it, no RayJob
create even attempted: the test's webhook sees every one); a pod set that no flavor can take whole (CPU that
fits only one flavor, GPUs only another: exit 2 with the arithmetic per flavor). A job that fits only with
the quota of Cohort objects (and a parent Cohort's) is accepted and admitted. What the server set on the
created RayJob: the queue Kueue's LocalQueue defaulting filled in, and the orphan protection. The tests that
name a release carry it in their names (`pytest -k kueue_v0_17_0`).

Tests isolate themselves on the shared cluster: fresh namespaces, and cluster-scoped objects (ClusterQueues,
ResourceFlavors, Cohorts, admission policies) under names of their own, deleted after the test.

What it deliberately does not do: the other releases (test_release_matrix.py, and docs/testing.md for those
read from their sources only) and Kueue with LocalQueue defaulting off (GA and locked on since Kueue v0.17):
test_operator_settings_real.py runs that on the real Kueue v0.13.10 with the gate off.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from typing import Any, Callable, Iterator

import pytest

from tests.e2e.admission_webhook import AdmissionWebhook
from tests.helpers import cli_env, run_cli
from tests.cluster_state import leftovers, make_cluster_queue, make_local_queue, make_resource_flavor
from tests.waits import wait_for

RAY, KUEUE = "ray.io/v1", "kueue.x-k8s.io/v1beta2"
ADMISSION_API = "admissionregistration.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


class Cluster:
    """The session's real cluster as the tests here use it: the admin's client, the kubeconfig, the webhook
    that sees every RayJob create in the namespaces it makes, and the cluster-scoped objects to delete after."""

    def __init__(self, client: Any, kubeconfig: str, webhook: AdmissionWebhook) -> None:
        self.server = client
        self.kubeconfig = kubeconfig
        self.webhook = webhook
        self.created_cluster_objects: list[tuple[str, str, str]] = []  # (apiVersion, kind, name)

    def namespace(self) -> str:
        return self.webhook.namespace()

    def cluster_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create a cluster-scoped object, deleted after the test."""
        created = self.server.create_object(obj)
        self.created_cluster_objects.append((obj["apiVersion"], obj["kind"], obj["metadata"]["name"]))
        return created

    def submit(self, namespace: str, *args: str, entrypoint: str = "1") -> Any:
        return run_cli("submit", "-n", namespace, *args, "--", "python", "-c", entrypoint, env=cli_env(KUBECONFIG=self.kubeconfig), timeout=180)

    def cli(self, *args: str) -> Any:
        return run_cli(*args, env=cli_env(KUBECONFIG=self.kubeconfig), timeout=120)

    def created_in(self, namespace: str) -> list[str]:
        return self.webhook.created_in(namespace)

    def leftovers(self, namespace: str) -> dict[str, list[str]]:
        return leftovers(self.server, namespace)


@pytest.fixture(scope="module")
def real(real_cluster) -> Iterator[tuple[Any, str, AdmissionWebhook]]:
    client = real_cluster.client()
    webhook = AdmissionWebhook(client).start()
    try:
        yield client, str(real_cluster.kubeconfig), webhook
    finally:
        webhook.stop()
        client.close()


@pytest.fixture
def cluster(real) -> Iterator[Cluster]:
    """The real cluster; the cluster-scoped objects the test created are deleted after it, the last first."""
    cluster = Cluster(*real)
    yield cluster
    for api_version, kind, name in reversed(cluster.created_cluster_objects):
        with contextlib.suppress(Exception):  # already gone
            cluster.server.delete_object(api_version, kind, name)


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def queues(cluster: Cluster, namespace: str, local_queue: str = "lq") -> str:
    """A ClusterQueue of this test's own (8 GPUs in default-flavor) and a LocalQueue `local_queue` for it, once
    Kueue has seen the LocalQueue (it defaults only into one in its cache): the ClusterQueue's name."""
    name = f"cq-{namespace}"
    make_cluster_queue(cluster.server, name, gpus=8)
    cluster.created_cluster_objects.append((KUEUE, "ClusterQueue", name))
    make_local_queue(cluster.server, local_queue, namespace, name)
    wait_for(lambda: (cluster.server.get_object(KUEUE, "LocalQueue", local_queue, namespace) or {}).get("status"),
             timeout=30, what=f"Kueue to see LocalQueue {local_queue}")  # fmt: skip
    return name


def conditions(obj: Any) -> list[dict[str, Any]]:
    return ((obj or {}).get("status") or {}).get("conditions") or []


def condition_is(obj: Any, kind: str, status: str) -> bool:
    return any(c["type"] == kind and c["status"] == status for c in conditions(obj))


# --- an admission denial ---------------------------------------------------------------------------

FROZEN = "RayJobs are frozen in this namespace until Monday"


def webhook_denial(cluster: Cluster, namespace: str, code: int, reason: str) -> str:
    """The test's webhook refuses RayJob creates in the namespace: the API server's words for it."""
    cluster.webhook.deny(namespace, code, reason, FROZEN)
    return f'admission webhook "{cluster.webhook.name}" denied the request: {FROZEN}'


def policy_denial(cluster: Cluster, namespace: str, code: int, reason: str) -> str:
    """A ValidatingAdmissionPolicy bound to the namespace refuses RayJob creates (its validation's reason,
    Forbidden or Invalid, sets the code: apiserver admission/plugin/policy/validating dispatcher.go)."""
    name = f"frozen-{suffix()}"
    cluster.cluster_object({
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["ray.io"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["rayjobs"]}]},
            "validations": [{"expression": "false", "message": FROZEN, "reason": reason}],
        },
    })  # fmt: skip
    cluster.cluster_object({
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}},
    })  # fmt: skip
    said = f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: {FROZEN}"

    def in_force() -> bool:
        status, answer = dry_run_refusal(cluster, namespace)
        return status == code and said in answer

    wait_for(in_force, timeout=60, what=f"policy {name} in force, refusing with {code}")
    return said


#: The RayJob a dry run creates to see whether a policy is in force (the test's webhook sees it too).
PROBE = "policy-probe"


def dry_run_refusal(cluster: Cluster, namespace: str) -> tuple[int, str]:
    """How the API server refuses a dry-run RayJob create in the namespace: (HTTP status, body); (0, "") when it takes it."""
    from kubernetes import client as k8s

    body = {"apiVersion": RAY, "kind": "RayJob", "metadata": {"name": PROBE, "namespace": namespace}, "spec": {"entrypoint": "true"}}
    with cluster.server.api_client() as api:
        try:
            k8s.CustomObjectsApi(api).create_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", body, dry_run="All")
        except k8s.ApiException as exc:
            return exc.status, str(exc.body)
    return 0, ""


# (case, who refuses, HTTP code and reason of the refusal)
DENIAL_ROWS = [
    ("a webhook, 403 Forbidden", webhook_denial, 403, "Forbidden"),
    ("a webhook, 422 Invalid", webhook_denial, 422, "Invalid"),
    ("a ValidatingAdmissionPolicy, 403 Forbidden", policy_denial, 403, "Forbidden"),
    ("a ValidatingAdmissionPolicy, 422 Invalid", policy_denial, 422, "Invalid"),
]


@pytest.mark.parametrize("case,deny,code,reason", DENIAL_ROWS, ids=[r[0] for r in DENIAL_ROWS])
def test_an_admission_denial_is_bad_input_with_the_api_server_s_words(cluster: Cluster, case: str, deny: Callable[..., str], code: int, reason: str) -> None:
    """Exit 2 with the denial's words; a 403 from admission is the cluster's policy, not a missing permission
    (a ValidatingAdmissionPolicy's 403 was once reported as "permission denied", exit 3)."""
    namespace = cluster.namespace()
    queues(cluster, namespace)
    said = deny(cluster, namespace, code, reason)
    out = cluster.submit(namespace, "--queue", "lq", "--name", "frozen", "--timeout", "5")
    assert out.returncode == 2, out.stderr
    assert f"creating RayJob {namespace}/frozen: " in out.stderr and said in out.stderr
    assert "permission denied" not in out.stderr and "Traceback" not in out.stderr
    assert [name for name in cluster.created_in(namespace) if name != PROBE] == ["frozen"]  # the one create, refused
    assert cluster.leftovers(namespace) == {}


# --- a LocalQueue whose ClusterQueue is missing, inactive, or that is stopped ------------------------


def missing_cluster_queue(cluster: Cluster, namespace: str) -> str:
    make_local_queue(cluster.server, "lq", namespace, f"gone-{namespace}")
    return f"LocalQueue lq points at ClusterQueue gone-{namespace}, which does not exist (ClusterQueues: "


def inactive_cluster_queue(cluster: Cluster, namespace: str) -> str:
    """A ClusterQueue naming a ResourceFlavor that does not exist: Kueue marks it inactive (Active=False,
    FlavorNotFound: kueue@v0.17.0 pkg/cache/scheduler/clusterqueue.go inactiveReason)."""
    flavor = f"h100-{suffix()}"
    name = kueue_queues(cluster, namespace, [flavor_quota(flavor, "64", "8")])
    wait_for(lambda: condition_is(cluster.server.get_object(KUEUE, "ClusterQueue", name), "Active", "False"),
             timeout=30, what="Kueue to find the ClusterQueue inactive")  # fmt: skip
    return (
        f"ClusterQueue {name} (behind LocalQueue lq) is not active: FlavorNotFound: "
        f"Can't admit new workloads: references missing ResourceFlavor(s): {flavor}. (ResourceFlavors: "
    )


def stopped_local_queue(cluster: Cluster, namespace: str) -> str:
    """A LocalQueue with stopPolicy Hold: Kueue admits nothing from it."""
    name = f"cq-{namespace}"
    make_cluster_queue(cluster.server, name, gpus=8)
    cluster.created_cluster_objects.append((KUEUE, "ClusterQueue", name))
    cluster.server.create_object({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
                                  "spec": {"clusterQueue": name, "stopPolicy": "Hold"}})  # fmt: skip
    return f"LocalQueue lq in namespace {namespace} is stopped (stopPolicy Hold): Kueue admits nothing from it until it is resumed"


# (case, sets up the queues in a namespace and returns what the one-line error must say)
QUEUE_ROWS: list[tuple[str, Callable[[Cluster, str], str]]] = [
    ("ClusterQueue missing", missing_cluster_queue),
    ("ClusterQueue Kueue found inactive", inactive_cluster_queue),
    ("LocalQueue stopped", stopped_local_queue),
]


@pytest.mark.parametrize("case,setup", QUEUE_ROWS, ids=[r[0] for r in QUEUE_ROWS])
def test_a_broken_cluster_queue_is_refused_before_anything_is_created(cluster: Cluster, case: str, setup: Callable[[Cluster, str], str]) -> None:
    namespace = cluster.namespace()
    expected = setup(cluster, namespace)
    out = cluster.submit(namespace, "--queue", "lq", "--name", "never", "--timeout", "5")
    assert out.returncode == 2, out.stderr
    assert expected in out.stderr
    assert "Traceback" not in out.stderr and "created RayJob" not in out.stderr
    assert cluster.created_in(namespace) == []  # not even attempted
    assert cluster.leftovers(namespace) == {}


def test_a_cluster_queue_kueue_v0_17_0_found_inactive_names_the_flavors_there_are(cluster: Cluster) -> None:
    """The ClusterQueue names flavor h100-<id>, which does not exist: Kueue marks it inactive and admits
    nothing; the error lists the ResourceFlavors the cluster has (default-flavor, and others' on the shared
    cluster), and not the missing one."""
    namespace = cluster.namespace()
    make_resource_flavor(cluster.server)  # shared, never deleted
    expected = inactive_cluster_queue(cluster, namespace)
    missing = expected.split("references missing ResourceFlavor(s): ", 1)[1].split(".", 1)[0]
    out = cluster.submit(namespace, "--queue", "lq", "--name", "never", "--gpus", "8", "--timeout", "30")
    assert out.returncode == 2, out.stderr
    assert expected in out.stderr
    named = {name.strip() for name in out.stderr.split(expected, 1)[1].split(")", 1)[0].split(",")}
    assert "default-flavor" in named and missing not in named, named
    assert "Traceback" not in out.stderr and cluster.created_in(namespace) == []
    assert cluster.leftovers(namespace) == {}


# --- what the server set: the defaulted queue and the orphan protection -----------------------------


def hold_all_quota(cluster: Cluster, namespace: str, local_queue: str = "lq") -> None:
    """A Workload of its own (no job behind it) that takes the queue's whole quota: Kueue admits nothing
    else from it until the Workload is deleted, so a submit waits in the queue."""
    requests = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}
    cluster.server.create_object({
        "apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "holder", "namespace": namespace},
        "spec": {"queueName": local_queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "hold", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}]}}}]},
    })  # fmt: skip
    wait_for(lambda: condition_is(cluster.server.get_object(KUEUE, "Workload", "holder", namespace), "Admitted", "True"),
             timeout=30, what="the holder admitted")  # fmt: skip


ORPHAN_LINE = (
    "orphan protection: if raybridge stops renewing it, the RayJob fails within 30m and frees its cluster and quota "
    "(spec.activeDeadlineSeconds, renewed while raybridge runs)"
)


def test_one_orphan_protection_on_kuberay_v1_6_1(cluster: Cluster) -> None:
    """The fields the real KubeRay v1.6.1 and Kueue v0.17.0 keep (activeDeadlineSeconds, the job id set from the
    start), and no one-day cap on the run as a side effect. The queue is full, so the submit stops on its
    --timeout before anything runs, and --keep leaves the RayJob as the server stored it."""
    namespace = cluster.namespace()
    queues(cluster, namespace)
    hold_all_quota(cluster, namespace)
    started = time.monotonic()
    out = cluster.submit(namespace, "--queue", "lq", "--name", "guarded", "--submission-id", "guarded-run-1", "--timeout", "2", "--keep", "-v")
    ran = math.ceil(time.monotonic() - started)
    assert out.returncode == 3, out.stderr  # not admitted within the timeout; what matters came before
    assert "was not admitted within 2s" in out.stderr and "Traceback" not in out.stderr
    assert ORPHAN_LINE in out.stderr
    assert out.stderr.count("orphan protection:") == 1  # nothing claimed that the server dropped
    stored = cluster.server.get_object(RAY, "RayJob", "guarded", namespace)
    labels, spec = stored["metadata"].get("labels") or {}, stored["spec"]
    # 30 minutes after the last renewal: KubeRay v1.6.1 sets status.startTime as it first takes the RayJob into
    # Initializing (rayjob_controller.go initRayJobStatusIfNeed), before it sees Kueue's suspend, and raybridge
    # counts the seconds it saw since then into the deadline (jobs/decision/orphan_guard.py renewed_deadline).
    assert 1800 <= spec["activeDeadlineSeconds"] <= 1800 + ran, spec["activeDeadlineSeconds"]
    assert spec["jobId"] == "guarded-run-1"
    assert "preRunningDeadlineSeconds" not in spec
    assert MAX_EXEC_LABEL not in labels
    assert cluster.cli("delete", "guarded", "-n", namespace).returncode == 0
    cluster.server.delete_object(KUEUE, "Workload", "holder", namespace)
    wait_for(lambda: cluster.leftovers(namespace) == {}, timeout=60, what="nothing left")


# (case, the LocalQueue in the namespace, the queue label the created RayJob must carry (None: none),
#  what the output says of it)
DEFAULTING_ROWS = [
    ("a default LocalQueue: Kueue fills it in", "default", "default", "in queue default"),
    ("no default LocalQueue: not queued", "other", None, "(not queued by Kueue)"),
]


@pytest.mark.parametrize("case,local_queue,label,said", DEFAULTING_ROWS, ids=[r[0] for r in DEFAULTING_ROWS])
def test_without_queue_the_output_names_the_queue_the_created_object_carries(cluster: Cluster, case: str, local_queue: str, label: Any, said: str) -> None:
    """Kueue v0.17.0's LocalQueue defaulting (GA) labels a RayJob without a queue in a namespace with a LocalQueue
    named `default`; elsewhere the RayJob is not Kueue's, and KubeRay runs it at once. The job runs to its end
    either way; --keep leaves the RayJob to read back."""
    namespace = cluster.namespace()
    queues(cluster, namespace, local_queue)
    out = cluster.submit(namespace, "--name", "unlabelled", "--keep", "--timeout", "120")
    assert out.returncode == 0, out.stderr
    assert f"created RayJob {namespace}/unlabelled {said}" in out.stderr
    stored = cluster.server.get_object(RAY, "RayJob", "unlabelled", namespace)
    assert (stored["metadata"].get("labels") or {}).get(QUEUE_LABEL) == label
    assert cluster.cli("delete", "unlabelled", "-n", namespace).returncode == 0
    wait_for(lambda: cluster.leftovers(namespace) == {}, timeout=60, what="nothing left")


# --- what Kueue v0.17.0 says about the queues ---------------------------------------------------------


def flavor_quota(name: str, cpu: str, gpus: str) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "512Gi"},
                                        {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}  # fmt: skip


def kueue_queues(cluster: Cluster, namespace: str, flavors: list[dict[str, Any]], *, cohort: str = "", existing: tuple[str, ...] = ()) -> str:
    """ResourceFlavors `existing`, a ClusterQueue with one resource group over `flavors`, a LocalQueue lq: its ClusterQueue's name."""
    for name in existing:
        cluster.cluster_object({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}})
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": flavors}]}
    if cohort:
        spec["cohortName"] = cohort
    name = f"cq-{namespace}"
    cluster.cluster_object({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    make_local_queue(cluster.server, "lq", namespace, name)
    return name


def cohort_object(cluster: Cluster, name: str, gpus: str, flavor: str, parent: str = "") -> None:
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}  # fmt: skip
    if parent:
        spec["parentName"] = parent
    cluster.cluster_object({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})


def test_a_job_that_fits_only_with_the_quota_of_cohort_objects_is_accepted_by_kueue_v0_17_0(cluster: Cluster) -> None:
    """4 GPUs of its own, 2 of its Cohort team, 4 of team's parent org: 10 GPUs can be admitted, and are."""
    namespace = cluster.namespace()
    flavor = f"flavor-{namespace}"
    kueue_queues(cluster, namespace, [flavor_quota(flavor, "64", "4")], cohort=f"team-{namespace}", existing=(flavor,))
    cohort_object(cluster, f"org-{namespace}", "4", flavor)
    cohort_object(cluster, f"team-{namespace}", "2", flavor, parent=f"org-{namespace}")
    wait_for(lambda: condition_is(cluster.server.get_object(KUEUE, "ClusterQueue", f"cq-{namespace}"), "Active", "True"),
             timeout=30, what="Kueue to find the ClusterQueue active")  # fmt: skip
    out = cluster.submit(namespace, "--queue", "lq", "--name", "wide", "--gpus", "10", "--timeout", "120", "--no-wait",
                         entrypoint="import time; time.sleep(300)")  # fmt: skip
    assert out.returncode == 0, out.stderr  # queued to run by itself
    assert "can ever hold" not in out.stderr and "Traceback" not in out.stderr
    rayjob = cluster.server.get_object(RAY, "RayJob", "wide", namespace)

    def admitted_workloads() -> list[dict[str, Any]]:
        workloads = cluster.server.list_objects(KUEUE, "Workload", namespace, label_selector=f"kueue.x-k8s.io/job-uid={rayjob['metadata']['uid']}")
        return [wl for wl in workloads if condition_is(wl, "Admitted", "True")]

    admitted = wait_for(admitted_workloads, timeout=60, what="Kueue to admit the job")
    assert len(admitted) == 1, admitted
    usage = {a["name"]: a["resourceUsage"] for a in admitted[0]["status"]["admission"]["podSetAssignments"]}
    assert sum(int(podset.get("nvidia.com/gpu", "0")) for podset in usage.values()) == 10, usage
    assert cluster.cli("delete", "wide", "-n", namespace).returncode == 0  # KubeRay stops the job as it deletes the RayJob
    wait_for(lambda: cluster.leftovers(namespace) == {}, timeout=60, what="nothing left")


def test_cpu_that_fits_one_flavor_and_gpus_another_are_refused_by_kueue_v0_17_0_with_the_arithmetic(cluster: Cluster) -> None:
    """Kueue gives a pod set one flavor for all the resources of a group: a has the CPUs, b the GPUs, neither both."""
    namespace = cluster.namespace()
    a, b = f"a-{namespace}", f"b-{namespace}"
    name = kueue_queues(cluster, namespace, [flavor_quota(a, "64", "4"), flavor_quota(b, "8", "16")], existing=(a, b))
    wait_for(lambda: condition_is(cluster.server.get_object(KUEUE, "ClusterQueue", name), "Active", "True"),
             timeout=30, what="Kueue to find the ClusterQueue active")  # fmt: skip
    out = cluster.submit(namespace, "--queue", "lq", "--name", "split", "--gpus", "8", "--timeout", "30")
    assert out.returncode == 2, out.stderr
    assert f"no flavor of ClusterQueue {name} can ever take it (flavor {a}: nvidia.com/gpu 8 > 4 it can ever hold; flavor {b}: cpu 32 > 8 it can ever hold)" in out.stderr
    assert "one flavor for all of cpu, memory, nvidia.com/gpu" in out.stderr
    assert "Traceback" not in out.stderr and "created RayJob" not in out.stderr
    assert cluster.created_in(namespace) == [] and cluster.leftovers(namespace) == {}
