"""The simulated Kueue per supported Kueue release: API version, webhook, missing priority classes, preemption.

Why this module exists: raybridge's tests trust FakeKueue to be no more lenient
than the Kueue release under test. Each row and test here pins one behaviour to
what that release's source does (tags v0.13.10 and v0.15.8, and main for
`kueue-newest`): the pure webhook checks first, then FakeKueue against a test
API server started with that release's CRDs.

What it deliberately does not do: test KubeRay's side (test_controllers.py)
or raybridge itself (tests/e2e); cohorts, borrowing and admission checks are
not simulated (see sim_kueue.py).
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any, Iterator, Optional

import pytest

from tests.kubeapi.errors import ApiError
from tests.kubeapi.fixtures import rayjob_manifest, wait_for
from tests.kubeapi.server import KubeApiServer
from tests.kubeapi.sim_common import condition_is_true, find_condition
from tests.kubeapi.sim_kueue import (
    FakeKueue,
    kueue_api_version,
    kueue_create_errors,
    kueue_update_errors,
    preemption_message,
    quota_limits,
)
from tests.schemas import KUEUE_RELEASES

RAY_API = "ray.io/v1"
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
OLD, MID, NEW = KUEUE_RELEASES  # kueue-v0.13.10, kueue-v0.15.8, kueue-newest


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

# (release, RayJob, the errors of Kueue's validating webhook on CREATE)
CREATE_ROWS = [
    (OLD, job(groups=7), []),
    (OLD, job(groups=8), ["spec.rayClusterSpec.workerGroupSpecs: Too many: 8: must have at most 7 items"]),
    (MID, job(groups=8), ["spec.rayClusterSpec.workerGroupSpecs: Too many: 8: must have at most 7 items"]),
    (NEW, job(groups=17), []),
    (NEW, job(groups=18), ["spec.rayClusterSpec.workerGroupSpecs: Too many: 19: must have at most 18 items"]),
    (NEW, renamed_group("head"), ['spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group']),
    (OLD, job(queue="Team_A"), [f'metadata.labels[{QUEUE}]: Invalid value: "Team_A": {SUBDOMAIN}']),
    (NEW, job(queue="team-a.gpu"), []),
    (NEW, job(labels={MAX_EXEC: "0"}), [f"metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0"]),
    (MID, job(labels={MAX_EXEC: "ten"}), [f'metadata.labels[{MAX_EXEC}]: Invalid value: "ten": strconv.Atoi: parsing "ten": invalid syntax']),
    (OLD, job(labels={MAX_EXEC: "600"}), []),
    (OLD, job(rayClusterSpec=None), ["spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector"]),
    (NEW, job(clusterSelector={"ray.io/cluster": "c"}), ['spec.clusterSelector: Invalid value: map[string]string{"ray.io/cluster":"c"}: a kueue managed job should not use an existing cluster']),
    (NEW, job(shutdownAfterJobFinishes=False, clusterSelector={"ray.io/cluster": "c"}), ['spec.clusterSelector: Invalid value: map[string]string{"ray.io/cluster":"c"}: a kueue managed job should not use an existing cluster']),
    (NEW, job(queue=None, groups=30), []),
]  # fmt: skip
_AUTOSCALING_OLD = job()
_AUTOSCALING_OLD["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
CREATE_ROWS += [
    (OLD, _AUTOSCALING_OLD, ["spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should not use autoscaling"]),
    (NEW, _AUTOSCALING_OLD, ["spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use autoscaling when workload slicing is enabled"]),
]  # fmt: skip


@pytest.mark.parametrize(("release", "manifest", "errors"), CREATE_ROWS)
def test_the_create_webhook_checks_what_that_release_checks(release: str, manifest: dict, errors: list[str]) -> None:
    assert kueue_create_errors("RayJob", manifest, release) == errors


RUNNING, SUSPENDED = False, True
# (release, old labels, old suspended, new labels, new suspended, errors of the UPDATE webhook)
UPDATE_ROWS = [
    (NEW, {QUEUE: "lq"}, RUNNING, {QUEUE: "other"}, RUNNING, [f'metadata.labels[{QUEUE}]: Invalid value: "other": field is immutable']),
    (OLD, {QUEUE: "lq"}, RUNNING, {QUEUE: "other"}, RUNNING, [f'metadata.labels[{QUEUE}]: Invalid value: "other": field is immutable']),
    (NEW, {QUEUE: "lq"}, SUSPENDED, {QUEUE: "other"}, SUSPENDED, []),
    (NEW, {QUEUE: "lq"}, RUNNING, {QUEUE: "lq", PRIORITY: "high"}, RUNNING, [f'metadata.labels[{PRIORITY}]: Invalid value: "high": WorkloadPriorityClass cannot be added to a non-suspended workload']),
    (OLD, {QUEUE: "lq"}, RUNNING, {QUEUE: "lq", PRIORITY: "high"}, RUNNING, [f'metadata.labels[{PRIORITY}]: Invalid value: "high": field is immutable']),
    (MID, {QUEUE: "lq", PRIORITY: "high"}, SUSPENDED, {QUEUE: "lq"}, SUSPENDED, [f'metadata.labels[{PRIORITY}]: Invalid value: "": WorkloadPriorityClass cannot be removed from a workload']),
    (OLD, {QUEUE: "lq", PRIORITY: "high"}, SUSPENDED, {QUEUE: "lq", PRIORITY: "low"}, SUSPENDED, []),
    (NEW, {QUEUE: "lq", MAX_EXEC: "60"}, RUNNING, {QUEUE: "lq", MAX_EXEC: "600"}, RUNNING, [f'metadata.labels[{MAX_EXEC}]: Invalid value: "600": field is immutable']),
    (NEW, {QUEUE: "lq", MAX_EXEC: "60"}, SUSPENDED, {QUEUE: "lq", MAX_EXEC: "600"}, SUSPENDED, []),
    (NEW, {QUEUE: "lq"}, RUNNING, {}, RUNNING, [f'metadata.labels[{QUEUE}]: Invalid value: "": field is immutable']),
    (MID, {QUEUE: "lq"}, RUNNING, {}, RUNNING, []),  # ValidateRayAndSparkJobUpdates came with 0.18
]  # fmt: skip


@pytest.mark.parametrize(("release", "old_labels", "old_suspended", "new_labels", "new_suspended", "errors"), UPDATE_ROWS)
def test_the_update_webhook_checks_what_that_release_checks(
    release: str, old_labels: dict, old_suspended: bool, new_labels: dict, new_suspended: bool, errors: list[str]
) -> None:
    old, new = job(queue=None, suspend=old_suspended), job(queue=None, suspend=new_suspended)
    old["metadata"]["labels"], new["metadata"]["labels"] = old_labels, new_labels
    assert kueue_update_errors("RayJob", old, new, release) == errors


def test_an_emptied_queue_name_is_refused_where_a_default_queue_exists() -> None:
    old, new = job(suspend=True), job(queue=None, suspend=True)
    assert kueue_update_errors("RayJob", old, new, NEW, default_queue_exists=True) == [
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


# --------------------------------------------------------------------------
# FakeKueue against a server of each Kueue release
# --------------------------------------------------------------------------


@pytest.fixture(params=KUEUE_RELEASES)
def kueue_server(request: pytest.FixtureRequest) -> Iterator[tuple[KubeApiServer, FakeKueue, str]]:
    with KubeApiServer(release=request.param) as server:
        kueue = FakeKueue(server).start()
        try:
            yield server, kueue, request.param
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
    if admission_check:
        server.create_object(
            {"apiVersion": api, "kind": "AdmissionCheck", "metadata": {"name": admission_check},
             "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}
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
    rayjob = server.get_object(RAY_API, "RayJob", name, "default")
    rayjob["status"] = {"jobDeploymentStatus": deployment, "jobStatus": "RUNNING" if deployment == "Running" else ""}
    server.update_status(rayjob)


def test_fake_kueue_speaks_the_api_version_of_its_release(kueue_server: tuple) -> None:
    server, _, release = kueue_server
    make_queues(server, gpus=8)
    server.create_object(rayjob_manifest("a", workers=1, gpus_per_worker=4))
    wl = wait_for(lambda: admitted(server, "a"), what="admission of a")
    assert wl["apiVersion"] == kueue_api_version(server)
    assert kueue_api_version(server) == ("kueue.x-k8s.io/v1beta1" if release == OLD else "kueue.x-k8s.io/v1beta2")
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
    if release == NEW:  # kueue#13775: only the newest Kueue records it
        assert [(e["type"], e["reason"], e["message"]) for e in events] == [
            ("Warning", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "nope" not found')
        ]
        assert events[0]["involvedObject"]["kind"] == "RayJob"
    else:
        assert events == []
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
    if release == NEW:
        server.create_object(groups)
    else:
        with pytest.raises(ApiError, match="Too many: 8: must have at most 7 items"):
            server.create_object(groups)


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
    expected = preemption_message(preemptor, "InClusterQueue", None if release == OLD else ("/cq", "/cq"))
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
