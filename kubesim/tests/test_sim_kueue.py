"""The simulated Kueue (Kueue's main branch, the newest CRDs): API version, webhook, missing priority classes, preemption,
cohort quota (Cohort objects, nested cohorts), ClusterQueue activity, flavor assignment per resource group,
deactivation on the maximum execution time.

Why this module exists: raybridge's tests trust FakeKueue to be no more lenient
than Kueue. Each row and test here pins one behaviour to what Kueue's main
branch does: the pure webhook checks first, then FakeKueue against a test API
server started with the newest CRDs. The releases run for real
(tests/e2e/test_release_matrix.py); FakeKueue plays none (tested here).

What it deliberately does not do: test KubeRay's side (test_controllers.py)
or raybridge itself (tests/e2e).
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any, Iterator, Optional

import pytest

from kubesim.errors import ApiError
from kubesim.tests.objects import rayjob_manifest, report_status, wait_for
from kubesim.server import KubeApiServer
from kubesim.sim_common import condition_is_true, find_condition
from kubesim.sim_kueue import (
    CohortForest,
    FakeKueue,
    assign_flavors,
    cluster_queue_inactive,
    kueue_api_version,
    kueue_create_errors,
    kueue_update_errors,
    preemption_message,
    provisioning_check_condition,
    quota_limits,
)

RAY_API = "ray.io/v1"
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"


def job(
    *,
    groups: int = 1,
    queue: Optional[str] = "lq",
    labels: Optional[dict[str, str]] = None,
    suspend: Optional[bool] = None,
    **spec: Any,
) -> dict:
    """A RayJob with `groups` worker groups named w0, w1, ..."""
    manifest = rayjob_manifest("j", queue=queue, **spec)
    cluster = manifest["spec"]["rayClusterSpec"]
    if cluster is not None:
        template = cluster["workerGroupSpecs"][0]
        cluster["workerGroupSpecs"] = [{**copy.deepcopy(template), "groupName": f"w{i}"} for i in range(groups)]
    manifest["metadata"]["labels"].update(labels or {})
    if suspend is not None:
        manifest["spec"]["suspend"] = suspend
    return manifest


def renamed_group(name: str) -> dict:
    manifest = job()
    manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] = name
    return manifest


SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

# (RayJob, the errors of Kueue's validating webhook on CREATE)
CREATE_ROWS = [
    (job(groups=17), []),
    (job(groups=18), ["spec.rayClusterSpec.workerGroupSpecs: Too many: 19: must have at most 18 items"]),
    (renamed_group("head"), ['spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group']),
    (job(queue="team-a.gpu"), []),
    (job(labels={MAX_EXEC: "0"}), [f"metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0"]),
    (job(labels={MAX_EXEC: "ten"}), [f'metadata.labels[{MAX_EXEC}]: Invalid value: "ten": strconv.Atoi: parsing "ten": invalid syntax']),
    (job(clusterSelector={"ray.io/cluster": "c"}), ['spec.clusterSelector: Invalid value: map[string]string{"ray.io/cluster":"c"}: a kueue managed job should not use an existing cluster']),
    (job(shutdownAfterJobFinishes=False, clusterSelector={"ray.io/cluster": "c"}), ['spec.clusterSelector: Invalid value: map[string]string{"ray.io/cluster":"c"}: a kueue managed job should not use an existing cluster']),
    (job(queue=None, groups=30), []),
]  # fmt: skip
_AUTOSCALING = job()
_AUTOSCALING["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
CREATE_ROWS += [
    (_AUTOSCALING, ["spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use autoscaling when workload slicing is enabled"]),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "errors"), CREATE_ROWS)
def test_the_create_webhook_checks_what_kueue_checks(manifest: dict, errors: list[str]) -> None:
    assert kueue_create_errors("RayJob", manifest) == errors


RUNNING, SUSPENDED = False, True
# (old labels, old suspended, new labels, new suspended, errors of the UPDATE webhook)
UPDATE_ROWS = [
    ({QUEUE: "lq"}, RUNNING, {QUEUE: "other"}, RUNNING, [f'metadata.labels[{QUEUE}]: Invalid value: "other": field is immutable']),
    ({QUEUE: "lq"}, SUSPENDED, {QUEUE: "other"}, SUSPENDED, []),
    ({QUEUE: "lq"}, RUNNING, {QUEUE: "lq", PRIORITY: "high"}, RUNNING, [f'metadata.labels[{PRIORITY}]: Invalid value: "high": WorkloadPriorityClass cannot be added to a non-suspended workload']),
    ({QUEUE: "lq", PRIORITY: "high"}, SUSPENDED, {QUEUE: "lq"}, SUSPENDED, [f'metadata.labels[{PRIORITY}]: Invalid value: "": WorkloadPriorityClass cannot be removed from a workload']),
    ({QUEUE: "lq", MAX_EXEC: "60"}, RUNNING, {QUEUE: "lq", MAX_EXEC: "600"}, RUNNING, [f'metadata.labels[{MAX_EXEC}]: Invalid value: "600": field is immutable']),
    ({QUEUE: "lq", MAX_EXEC: "60"}, SUSPENDED, {QUEUE: "lq", MAX_EXEC: "600"}, SUSPENDED, []),
    ({QUEUE: "lq"}, RUNNING, {}, RUNNING, [f'metadata.labels[{QUEUE}]: Invalid value: "": field is immutable']),
]  # fmt: skip


@pytest.mark.parametrize(("old_labels", "old_suspended", "new_labels", "new_suspended", "errors"), UPDATE_ROWS)
def test_the_update_webhook_checks_what_kueue_checks(
    old_labels: dict, old_suspended: bool, new_labels: dict, new_suspended: bool, errors: list[str]
) -> None:
    old, new = job(queue=None, suspend=old_suspended), job(queue=None, suspend=new_suspended)
    old["metadata"]["labels"], new["metadata"]["labels"] = old_labels, new_labels
    assert kueue_update_errors("RayJob", old, new) == errors


def test_an_emptied_queue_name_is_refused_where_a_default_queue_exists() -> None:
    old, new = job(suspend=True), job(queue=None, suspend=True)
    assert kueue_update_errors("RayJob", old, new, default_queue_exists=True) == [
        f'metadata.labels[{QUEUE}]: Invalid value: "": queue-name must not be empty in namespace with default queue'
    ]


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (None, "Preempted to accommodate a workload (UID: wl-1, JobUID: job-1) due to prioritization in the ClusterQueue"),
        (("/cq", "/cq"), "Preempted to accommodate a workload (UID: wl-1, JobUID: job-1) due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"),
    ],
)  # fmt: skip
def test_preemption_message_is_kueues(paths: Optional[tuple[str, str]], message: str) -> None:
    preemptor = {"metadata": {"uid": "wl-1", "labels": {"kueue.x-k8s.io/job-uid": "job-1"}}}
    assert preemption_message(preemptor, "InClusterQueue", paths) == message


def gpu_queue(gpus: int, cohort: str = "", borrowing: Optional[int] = None, lending: Optional[int] = None) -> dict:
    quota: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}
    if borrowing is not None:
        quota["borrowingLimit"] = str(borrowing)
    if lending is not None:
        quota["lendingLimit"] = str(lending)
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [quota]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"spec": spec}


GPU = ("f", "nvidia.com/gpu")
# (ClusterQueue a, ClusterQueue b, GPUs in use in a and b, a's (maximum capacity, available))
QUOTA_ROWS = [
    (gpu_queue(4), gpu_queue(4), (1, 0), (4, 3)),                                  # no cohort: nominal only
    (gpu_queue(4, "c"), gpu_queue(4, "c"), (0, 0), (8, 8)),                        # b lends all it has
    (gpu_queue(4, "c"), gpu_queue(4, "c"), (2, 3), (8, 3)),
    (gpu_queue(4, "c", borrowing=2), gpu_queue(4, "c"), (0, 0), (6, 6)),           # borrowingLimit caps it
    (gpu_queue(4, "c"), gpu_queue(4, "c", lending=1), (0, 0), (5, 5)),             # b keeps 3 to itself
    (gpu_queue(4, "c", lending=0), gpu_queue(4, "c"), (0, 4), (8, 4)),             # a keeps its 4 while b uses its own
    (gpu_queue(4, "c"), gpu_queue(4, "other"), (0, 0), (4, 4)),                    # another cohort lends nothing
]  # fmt: skip


@pytest.mark.parametrize(("a", "b", "in_use", "expected"), QUOTA_ROWS)
def test_quota_limits_add_what_the_cohort_lends(a: dict, b: dict, in_use: tuple[int, int], expected: tuple[int, int]) -> None:
    used = {"a": {GPU: Decimal(in_use[0])}, "b": {GPU: Decimal(in_use[1])}}
    assert quota_limits("a", {"a": a, "b": b}, used)[GPU] == tuple(Decimal(v) for v in expected)


def cohort(gpus: Optional[int] = None, parent: str = "", borrowing: Optional[int] = None, lending: Optional[int] = None) -> dict:
    """A Cohort object: its own GPU quota in flavor f (None: no quota of its own) and its parent."""
    spec: dict[str, Any] = {}
    if gpus is not None:
        spec = gpu_queue(gpus, borrowing=borrowing, lending=lending)["spec"]
    if parent:
        spec["parentName"] = parent
    return {"spec": spec}


# (case, ClusterQueues, Cohort objects, GPUs in use per ClusterQueue, a's (maximum capacity, available))
COHORT_ROWS = [
    ("a Cohort object's own quota is lent to its members", {"a": gpu_queue(4, "c")}, {"c": cohort(4)}, {}, (8, 8)),
    ("no Cohort object for the name: a cohort without quota", {"a": gpu_queue(4, "c")}, {}, {}, (4, 4)),
    ("the parent's quota and its other children's", {"a": gpu_queue(4, "c"), "b": gpu_queue(2, "root")},
     {"c": cohort(parent="root"), "root": cohort(8)}, {}, (14, 14)),
    ("a parent named but missing adds nothing", {"a": gpu_queue(4, "c")}, {"c": cohort(2, parent="gone")}, {}, (6, 6)),
    ("a Cohort's borrowingLimit caps what its subtree takes from the parent", {"a": gpu_queue(4, "c")},
     {"c": cohort(0, parent="root", borrowing=2), "root": cohort(8)}, {}, (6, 6)),
    ("a Cohort's lendingLimit keeps the rest from its siblings", {"a": gpu_queue(1, "root"), "b": gpu_queue(0, "c")},
     {"c": cohort(4, parent="root", lending=1), "root": cohort()}, {}, (2, 2)),
    ("a sibling subtree's borrowing is not available", {"a": gpu_queue(4, "c"), "b": gpu_queue(4, "root")},
     {"c": cohort(parent="root"), "root": cohort()}, {"b": 6}, (8, 2)),
]  # fmt: skip


@pytest.mark.parametrize(("case", "queues", "cohorts", "in_use", "expected"), COHORT_ROWS, ids=[r[0] for r in COHORT_ROWS])
def test_quota_limits_add_up_cohort_objects_and_their_parents(case: str, queues: dict, cohorts: dict, in_use: dict, expected: tuple[int, int]) -> None:
    used = {name: {GPU: Decimal(amount)} for name, amount in in_use.items()}
    assert quota_limits("a", queues, used, cohorts)[GPU] == tuple(Decimal(v) for v in expected)


def test_a_cycle_of_parents_leaves_its_queues_out_of_scheduling() -> None:
    forest = CohortForest({"a": gpu_queue(4, "c"), "b": gpu_queue(4)}, {"c": cohort(parent="d"), "d": cohort(4, parent="c")})
    assert (forest.in_cycle("a"), forest.in_cycle("b")) == (True, False)
    assert forest.limits("a") == {}


def queue_naming(flavors: list[str], checks: list[str] = (), stop: Optional[str] = None) -> dict:
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": "1"}]} for f in flavors]}]}  # fmt: skip
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    if stop:
        spec["stopPolicy"] = stop
    return {"spec": spec}


ACTIVE = {"status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": ""}]}}
NOT_ACTIVE: dict = {"status": {}}
# (case, ClusterQueue, existing ResourceFlavors, existing AdmissionChecks, Active=False (reason, message) or None)
ACTIVITY_ROWS = [
    ("everything exists", queue_naming(["a"], ["prov"]), ["a"], {"prov": ACTIVE}, None),
    ("a missing flavor", queue_naming(["a", "gpu", "b"]), ["a"], {},
     ("FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): gpu,b.")),
    ("a missing and an inactive check, sorted", queue_naming(["a"], ["zeta", "prov", "ghost"]), ["a"], {"prov": NOT_ACTIVE, "zeta": ACTIVE},
     ("AdmissionCheckNotFound", "Can't admit new workloads: references missing AdmissionCheck(s): ghost, references inactive AdmissionCheck(s): prov.")),
    ("stopped comes first", queue_naming(["gpu"], stop="Hold"), [], {},
     ("Stopped", "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): gpu.")),
    ("stopPolicy None is running", queue_naming(["a"], stop="None"), ["a"], {}, None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "queue", "flavors", "checks", "expected"), ACTIVITY_ROWS, ids=[r[0] for r in ACTIVITY_ROWS])
def test_a_cluster_queue_is_inactive_for_kueue_s_reasons(case: str, queue: dict, flavors: list, checks: dict, expected: Any) -> None:
    assert cluster_queue_inactive(queue, flavors, checks) == expected


def check_with(parameters: Optional[dict]) -> dict:
    spec: dict[str, Any] = {"controllerName": "kueue.x-k8s.io/provisioning-request"}
    if parameters is not None:
        spec["parameters"] = parameters
    return {"spec": spec}


CONFIG_REF = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws"}
# (case, AdmissionCheck, existing ProvisioningRequestConfigs, (active, reason, message))
CHECK_ROWS = [
    ("its config exists", check_with(CONFIG_REF), ["dws"], (True, "Active", "The admission check is active")),
    ("no parameters", check_with(None), ["dws"], (False, "BadParametersRef", "missing parameters reference")),
    ("its config is missing", check_with(CONFIG_REF), [], (False, "BadParametersRef", 'provisioningrequestconfigs.kueue.x-k8s.io "dws" not found')),
    ("another kind", check_with({**CONFIG_REF, "kind": "ConfigMap"}), ["dws"],
     (False, "BadParametersRef", 'wrong kind "ConfigMap", expecting "ProvisioningRequestConfig": bad parameters reference')),
]  # fmt: skip


@pytest.mark.parametrize(("case", "check", "configs", "expected"), CHECK_ROWS, ids=[r[0] for r in CHECK_ROWS])
def test_a_provisioning_check_is_active_while_its_config_exists(case: str, check: dict, configs: list, expected: tuple) -> None:
    assert provisioning_check_condition(check, configs) == expected


def test_one_flavor_per_resource_group_cpu_in_one_and_gpus_in_another_never_fit() -> None:
    """flavorassigner.go findFlavorForPodSetResource: every resource of the group in the same flavor."""

    def flavor(name: str, cpu: str, gpus: str) -> dict:
        return {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}

    cq = {"spec": {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [flavor("a", "64", "4"), flavor("b", "8", "16")]}]}}
    workers = {"name": "workers", "count": 2, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "16", "nvidia.com/gpu": "4"}}}]}}}
    fit = assign_flavors(cq, [workers], used={})
    assert not fit.fits
    assert fit.message == (
        "couldn't assign flavors to pod set workers: "
        "insufficient quota for nvidia.com/gpu in flavor a, previously considered podsets requests (0) + current podset request (8) > maximum capacity (4), "
        "insufficient quota for cpu in flavor b, previously considered podsets requests (0) + current podset request (32) > maximum capacity (8)"
    )
    split = copy.deepcopy(cq)
    split["spec"]["resourceGroups"] = [
        {"coveredResources": ["cpu"], "flavors": [{"name": "a", "resources": [{"name": "cpu", "nominalQuota": "64"}]}]},
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "b", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]},
    ]  # fmt: skip
    assert assign_flavors(split, [workers], used={}).pod_set_assignments[0]["flavors"] == {"cpu": "a", "nvidia.com/gpu": "b"}


def test_a_flavor_with_a_taint_the_pod_set_does_not_tolerate_is_skipped() -> None:
    """flavorassigner.go: FindMatchingUntoleratedTaint over the flavor's NoSchedule/NoExecute taints."""
    quota = [{"name": "cpu", "nominalQuota": "64"}]
    cq = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "tainted", "resources": quota}, {"name": "small", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}}  # fmt: skip
    specs = {"tainted": {"nodeTaints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}, "small": {}}
    pod = {"name": "workers", "count": 1, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "8"}}}]}}}
    fit = assign_flavors(cq, [pod], {}, None, None, specs)
    assert fit.message == (
        "couldn't assign flavors to pod set workers: untolerated taint dedicated=ml:NoSchedule in flavor tainted, "
        "insufficient quota for cpu in flavor small, previously considered podsets requests (0) + current podset request (8) > maximum capacity (1)"
    )
    tolerant = copy.deepcopy(pod)
    tolerant["template"]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    assert assign_flavors(cq, [tolerant], {}, None, None, specs).pod_set_assignments[0]["flavors"] == {"cpu": "tainted"}


# --------------------------------------------------------------------------
# FakeKueue against a server with the newest CRDs
# --------------------------------------------------------------------------


@pytest.fixture
def kueue_server() -> Iterator[tuple[KubeApiServer, FakeKueue, str]]:
    with KubeApiServer() as server:
        kueue = FakeKueue(server).start()
        try:
            yield server, kueue, server.kueue
        finally:
            kueue.stop()
        assert kueue.last_error is None or "recording event" not in kueue.last_error, kueue.last_error
    assert server.internal_errors == [], "\n".join(server.internal_errors)


def make_queues(
    server: KubeApiServer,
    gpus: int,
    *,
    preemption: Optional[str] = None,
    name: str = "cq",
    local_queue: str = "lq",
    cohort: str = "",
    borrowing_limit: Optional[int] = None,
    admission_check: str = "",
) -> None:
    """ResourceFlavor, a ClusterQueue (cpu, memory, GPUs) and a LocalQueue in default, in the release's version."""
    api = kueue_api_version(server)
    if server.get_object(api, "ResourceFlavor", "default-flavor") is None:
        server.create_object({"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}})
    resources = [("cpu", "64"), ("memory", "512Gi"), ("nvidia.com/gpu", str(gpus))]
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [name for name, _ in resources],
                "flavors": [{"name": "default-flavor", "resources": [{"name": n, "nominalQuota": q} for n, q in resources]}],
            }
        ],
    }
    if preemption:
        spec["preemption"] = {"withinClusterQueue": preemption}
    if cohort:
        spec["cohort" if api.endswith("v1beta1") else "cohortName"] = cohort
    if borrowing_limit is not None:
        spec["resourceGroups"][0]["flavors"][0]["resources"][2]["borrowingLimit"] = str(borrowing_limit)
    if admission_check:  # a ProvisioningRequest check is active only while its config exists
        server.create_object(
            {"apiVersion": api, "kind": "ProvisioningRequestConfig", "metadata": {"name": f"{admission_check}-config"},
             "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"}}
        )  # fmt: skip
        server.create_object(
            {"apiVersion": api, "kind": "AdmissionCheck", "metadata": {"name": admission_check},
             "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                     "name": f"{admission_check}-config"}}}
        )  # fmt: skip
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    server.create_object({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    server.create_object(
        {"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": "default"},
         "spec": {"clusterQueue": name}}
    )  # fmt: skip


def workload_of(server: KubeApiServer, name: str) -> Optional[dict]:
    rayjob = server.get_object(RAY_API, "RayJob", name, "default")
    if rayjob is None:
        return None
    found = server.list_objects(
        kueue_api_version(server), "Workload", "default", label_selector=f"kueue.x-k8s.io/job-uid={rayjob['metadata']['uid']}"
    )
    return found[0] if found else None


def admitted(server: KubeApiServer, name: str) -> Optional[dict]:
    wl = workload_of(server, name)
    return wl if wl and condition_is_true(wl, "Admitted") else None


def suspended(server: KubeApiServer, name: str) -> Optional[bool]:
    return ((server.get_object(RAY_API, "RayJob", name, "default") or {}).get("spec") or {}).get("suspend")


def set_deployment_status(server: KubeApiServer, name: str, deployment: str) -> None:
    """What KubeRay reports: Running while the cluster runs, Suspended once it is torn down."""
    status = {"jobDeploymentStatus": deployment, "jobStatus": "RUNNING" if deployment == "Running" else ""}
    report_status(server, RAY_API, "RayJob", name, status)


def test_fake_kueue_speaks_v1beta2(kueue_server: tuple) -> None:
    server, _, release = kueue_server
    make_queues(server, gpus=8)
    server.create_object(rayjob_manifest("a", workers=1, gpus_per_worker=4))
    wl = wait_for(lambda: admitted(server, "a"), what="admission of a")
    assert wl["apiVersion"] == kueue_api_version(server)
    assert kueue_api_version(server) == "kueue.x-k8s.io/v1beta2"
    wait_for(lambda: suspended(server, "a") is False, what="a started")
    lq = wait_for(lambda: (server.get_object(kueue_api_version(server), "LocalQueue", "lq", "default") or {}).get("status", {}).get("admittedWorkloads"), what="LocalQueue status")  # fmt: skip
    assert lq == 1


def test_no_workload_for_a_missing_priority_class_until_it_exists(kueue_server: tuple) -> None:
    server, kueue, release = kueue_server
    make_queues(server, gpus=8)
    orphan = rayjob_manifest("classless", workers=1)
    orphan["metadata"]["labels"][PRIORITY] = "nope"
    server.create_object(orphan)
    kueue.wait_passes(4)
    assert workload_of(server, "classless") is None
    assert suspended(server, "classless") is True
    events = [e for e in server.list_objects("v1", "Event", "default") if e["involvedObject"]["name"] == "classless"]
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [  # kueue#13775
        ("Warning", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "nope" not found')
    ]
    assert events[0]["involvedObject"]["kind"] == "RayJob"
    server.create_object(
        {"apiVersion": kueue_api_version(server), "kind": "WorkloadPriorityClass", "metadata": {"name": "nope"}, "value": 7}
    )
    wl = wait_for(lambda: admitted(server, "classless"), what="admission once the class exists")
    assert wl["spec"]["priority"] == 7


def test_the_webhook_refuses_a_queue_change_of_a_running_job(kueue_server: tuple) -> None:
    server, _, release = kueue_server
    make_queues(server, gpus=8)
    server.create_object(rayjob_manifest("moving", workers=1))
    wait_for(lambda: suspended(server, "moving") is False, what="moving started")
    with pytest.raises(ApiError) as denied:
        server.patch_object(RAY_API, "RayJob", "moving", {"metadata": {"labels": {QUEUE: "elsewhere"}}}, "default")
    assert denied.value.code == 403
    assert str(denied.value.message) == (
        'admission webhook "vrayjob.kb.io" denied the request: '
        f'metadata.labels[{QUEUE}]: Invalid value: "elsewhere": field is immutable'
    )
    groups = job(groups=8)
    groups["metadata"]["name"] = "wide"
    server.create_object(groups)  # up to 18 pod sets


def test_a_higher_priority_job_preempts_within_the_cluster_queue(kueue_server: tuple) -> None:
    server, _, release = kueue_server
    make_queues(server, gpus=4, preemption="LowerPriority")
    api = kueue_api_version(server)
    server.create_object({"apiVersion": api, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100})
    server.create_object(rayjob_manifest("low", workers=1, gpus_per_worker=4))
    wait_for(lambda: admitted(server, "low"), what="low admitted")
    set_deployment_status(server, "low", "Running")
    urgent = rayjob_manifest("urgent", workers=1, gpus_per_worker=4)
    urgent["metadata"]["labels"][PRIORITY] = "high"
    server.create_object(urgent)

    evicted = wait_for(lambda: find_condition(workload_of(server, "low") or {}, "Evicted"), what="low evicted")
    preemptor = wait_for(lambda: workload_of(server, "urgent"), what="urgent's workload")
    expected = preemption_message(preemptor, "InClusterQueue", ("/cq", "/cq"))
    assert expected.startswith(f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: ")
    assert (evicted["status"], evicted["reason"], evicted["message"]) == ("True", "Preempted", expected)
    preempted = find_condition(workload_of(server, "low"), "Preempted")
    assert (preempted["status"], preempted["reason"], preempted["message"]) == ("True", "InClusterQueue", expected)
    assert workload_of(server, "low")["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ]
    wait_for(lambda: suspended(server, "low") is True, what="low suspended")
    waiting = find_condition(workload_of(server, "urgent"), "QuotaReserved")
    assert waiting["message"].endswith(". Pending the preemption of 1 workload(s)"), waiting

    set_deployment_status(server, "low", "Suspended")  # KubeRay tore the cluster down
    wait_for(lambda: admitted(server, "urgent"), what="urgent admitted")
    low = wait_for(lambda: (lambda wl: wl if find_condition(wl, "Requeued") else None)(workload_of(server, "low")), what="low requeued")  # fmt: skip
    assert find_condition(low, "Requeued")["status"] == "True"  # real Kueue requeues a preempted workload at once
    assert not (low.get("status") or {}).get("admission")
    assert find_condition(low, "QuotaReserved")["status"] == "False"


def test_lower_priority_policy_never_preempts_an_equal_priority_job(kueue_server: tuple) -> None:
    server, kueue, _ = kueue_server
    make_queues(server, gpus=4, preemption="LowerPriority")
    server.create_object(rayjob_manifest("first", workers=1, gpus_per_worker=4))
    wait_for(lambda: admitted(server, "first"), what="first admitted")
    server.create_object(rayjob_manifest("second", workers=1, gpus_per_worker=4))
    kueue.wait_passes(4)
    assert find_condition(workload_of(server, "first"), "Evicted") is None
    assert "Pending the preemption" not in find_condition(workload_of(server, "second"), "QuotaReserved")["message"]


def test_a_cluster_queue_borrows_what_its_cohort_lends_up_to_its_borrowing_limit(kueue_server: tuple) -> None:
    server, _, _ = kueue_server
    make_queues(server, gpus=4, name="cq-a", local_queue="lq-a", cohort="pool", borrowing_limit=2)
    make_queues(server, gpus=4, name="cq-b", local_queue="lq-b", cohort="pool")
    server.create_object(rayjob_manifest("borrower", queue="lq-a", workers=1, gpus_per_worker=6))
    wait_for(lambda: admitted(server, "borrower"), what="admission borrowing 2 GPUs")
    usage = wait_for(
        lambda: {
            r["name"]: r.get("borrowed")
            for f in (server.get_object(kueue_api_version(server), "ClusterQueue", "cq-a").get("status") or {}).get("flavorsReservation") or []
            for r in f["resources"]
            if r.get("total") not in (None, "0")
        },
        what="cq-a's reservation",
    )  # fmt: skip
    assert usage["nvidia.com/gpu"] == "2"
    server.create_object(rayjob_manifest("greedy", queue="lq-a", workers=1, gpus_per_worker=7))
    cond = wait_for(lambda: (lambda c: c if c and c["status"] == "False" else None)(find_condition(workload_of(server, "greedy") or {}, "QuotaReserved")), what="greedy pending")  # fmt: skip
    assert "insufficient quota for nvidia.com/gpu in flavor default-flavor, previously considered podsets requests (0) + current podset request (7) > maximum capacity (6)" in cond["message"]
    server.create_object(rayjob_manifest("lender", queue="lq-b", workers=1, gpus_per_worker=3))
    cond = wait_for(lambda: (lambda c: c if c and c["status"] == "False" else None)(find_condition(workload_of(server, "lender") or {}, "QuotaReserved")), what="lender pending")  # fmt: skip
    assert "insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 1 more needed" in cond["message"]


def test_a_workload_waits_quota_reserved_until_its_admission_check_is_ready(kueue_server: tuple) -> None:
    server, kueue, _ = kueue_server
    make_queues(server, gpus=8, admission_check="provision")
    server.create_object(rayjob_manifest("gated", workers=1, gpus_per_worker=4))
    wl = wait_for(lambda: (lambda w: w if w and condition_is_true(w, "QuotaReserved") else None)(workload_of(server, "gated")), what="quota reserved")  # fmt: skip
    admitted_cond = find_condition(wl, "Admitted")
    assert (admitted_cond["status"], admitted_cond["reason"]) == ("False", "UnsatisfiedChecks")
    assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [("provision", "Pending")]
    kueue.wait_passes(3)
    assert suspended(server, "gated") is True  # no pods before the nodes are provisioned
    kueue.set_admission_check("default", wl["metadata"]["name"], "provision", "Ready", "Provisioned")
    wait_for(lambda: admitted(server, "gated"), what="admitted once the check is Ready")
    wait_for(lambda: suspended(server, "gated") is False, what="gated started")


def make_cohort(server: KubeApiServer, name: str, gpus: Optional[int] = None, parent: str = "") -> None:
    """A Cohort object in the release's Kueue version, with its own GPU quota in default-flavor."""
    spec: dict[str, Any] = {}
    if gpus is not None:
        spec["resourceGroups"] = [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]}]}]  # fmt: skip
    if parent:
        spec["parentName"] = parent
    server.create_object({"apiVersion": kueue_api_version(server), "kind": "Cohort", "metadata": {"name": name}, "spec": spec})


def pending_message(server: KubeApiServer, name: str) -> Any:
    """The QuotaReserved=False (reason, message) of a job's Workload, once there is one."""
    cond = find_condition(workload_of(server, name) or {}, "QuotaReserved")
    return (cond["reason"], cond["message"]) if cond and cond["status"] == "False" else None


def test_a_cohort_object_s_quota_and_its_parent_s_are_lent_to_the_queue(kueue_server: tuple) -> None:
    server, _, _ = kueue_server
    make_queues(server, gpus=4, cohort="team")
    make_cohort(server, "team", gpus=2, parent="org")
    make_cohort(server, "org", gpus=4)
    server.create_object(rayjob_manifest("wide", workers=1, gpus_per_worker=10))
    wl = wait_for(lambda: admitted(server, "wide"), what="admission with 4 + 2 + 4 GPUs")
    assert wl["status"]["admission"]["podSetAssignments"][1]["resourceUsage"]["nvidia.com/gpu"] == "10"
    server.create_object(rayjob_manifest("wider", workers=1, gpus_per_worker=11))
    reason, message = wait_for(lambda: pending_message(server, "wider"), what="wider pending")
    assert "current podset request (11) > maximum capacity (10)" in message


def test_a_cluster_queue_naming_a_missing_flavor_admits_nothing_until_it_exists(kueue_server: tuple) -> None:
    server, kueue, _ = kueue_server
    api = kueue_api_version(server)
    make_queues(server, gpus=8)
    cq = server.get_object(api, "ClusterQueue", "cq")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "h100"  # no ResourceFlavor h100 yet
    server.replace_object(cq)

    def active(kind: str, name: str, namespace: Optional[str] = None) -> Any:
        cond = find_condition(server.get_object(api, kind, name, namespace) or {}, "Active")
        return (cond["status"], cond["reason"], cond["message"]) if cond else None

    missing = ("False", "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): h100.")
    wait_for(lambda: active("ClusterQueue", "cq") == missing, what="the ClusterQueue inactive")
    server.create_object(rayjob_manifest("early", workers=1, gpus_per_worker=4))
    wait_for(lambda: active("LocalQueue", "lq", "default") == ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"),
             what="the LocalQueue inactive")  # fmt: skip
    assert wait_for(lambda: pending_message(server, "early"), what="early pending") == ("Inadmissible", "ClusterQueue cq is inactive")
    kueue.wait_passes(3)
    assert admitted(server, "early") is None and suspended(server, "early") is True
    server.create_object({"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "h100"}})
    wait_for(lambda: admitted(server, "early"), what="admission once the flavor exists")
    # The admission and the ClusterQueue's status are written in two steps: wait for the second too.
    wait_for(lambda: active("ClusterQueue", "cq") == ("True", "Ready", "Can admit new workloads"), what="the ClusterQueue active again")


def test_a_queue_with_a_missing_or_inactive_admission_check_is_inactive(kueue_server: tuple) -> None:
    server, _, _ = kueue_server
    api = kueue_api_version(server)
    make_queues(server, gpus=8, admission_check="prov")
    server.delete_object(api, "ProvisioningRequestConfig", "prov-config")
    cq = server.get_object(api, "ClusterQueue", "cq")
    cq["spec"]["admissionChecksStrategy"]["admissionChecks"].append({"name": "ghost"})
    server.replace_object(cq)

    def condition(kind: str, name: str) -> Any:
        cond = find_condition(server.get_object(api, kind, name) or {}, "Active")
        return (cond["status"], cond["reason"], cond["message"]) if cond else None

    wait_for(lambda: condition("AdmissionCheck", "prov") == ("False", "BadParametersRef", 'provisioningrequestconfigs.kueue.x-k8s.io "prov-config" not found'),
             what="the check inactive")  # fmt: skip
    expected = ("False", "AdmissionCheckNotFound",
                "Can't admit new workloads: references missing AdmissionCheck(s): ghost, references inactive AdmissionCheck(s): prov.")  # fmt: skip
    wait_for(lambda: condition("ClusterQueue", "cq") == expected, what="the ClusterQueue inactive")


def test_the_maximum_execution_time_deactivates_the_workload_for_good(kueue_server: tuple) -> None:
    """workload_controller.go: DeactivationTarget, spec.active=false, Evicted DeactivatedDueTo...; never requeued."""
    server, kueue, release = kueue_server
    make_queues(server, gpus=8)
    limited = rayjob_manifest("limited", workers=1, gpus_per_worker=4)
    limited["metadata"]["labels"][MAX_EXEC] = "1"
    server.create_object(limited)
    wl = wait_for(lambda: admitted(server, "limited"), what="limited admitted")
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 1
    set_deployment_status(server, "limited", "Running")

    evicted = wait_for(lambda: find_condition(workload_of(server, "limited") or {}, "Evicted"), what="limited evicted")
    assert (evicted["status"], evicted["reason"], evicted["message"]) == (
        "True", "DeactivatedDueToMaximumExecutionTimeExceeded", "The workload is deactivated due to exceeding the maximum execution time"
    )  # fmt: skip
    wl = workload_of(server, "limited")
    assert wl["spec"]["active"] is False
    assert find_condition(wl, "DeactivationTarget") is None  # removed with the eviction
    stats = {"reason": "Deactivated", "underlyingCause": "MaximumExecutionTimeExceeded"}
    assert wl["status"]["schedulingStats"]["evictions"] == [{**stats, "count": 1}]
    wait_for(lambda: suspended(server, "limited") is True, what="limited suspended")
    events = {(e["type"], e["reason"], e["message"]) for e in server.list_objects("v1", "Event", "default") if e["involvedObject"]["name"] == wl["metadata"]["name"]}
    assert ("Warning", "MaximumExecutionTimeExceeded", "The maximum execution time (1s) exceeded") in events
    assert ("Normal", "EvictedDueToDeactivatedDueToMaximumExecutionTimeExceeded", evicted["message"]) in events

    set_deployment_status(server, "limited", "Suspended")  # KubeRay tore the cluster down
    requeued = wait_for(lambda: find_condition(workload_of(server, "limited") or {}, "Requeued"), what="the reservation released")
    assert (requeued["status"], requeued["reason"]) == ("False", "DeactivatedDueToMaximumExecutionTimeExceeded")
    kueue.wait_passes(4)
    wl = workload_of(server, "limited")
    assert not wl["status"].get("admission") and find_condition(wl, "QuotaReserved")["status"] == "False"
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] >= 1  # the admitted time of this admission, as SyncAdmittedCondition adds it
    assert suspended(server, "limited") is True


def test_fake_kueue_plays_no_release() -> None:
    with KubeApiServer(release="kueue-v0.13.10") as server, pytest.raises(ValueError, match="plays no release"):
        FakeKueue(server)
