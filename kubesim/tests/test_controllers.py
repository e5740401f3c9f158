"""Tests of the simulated Kueue and KubeRay controllers.

Why this module exists: raybridge's end-to-end tests trust these fakes to
behave like the real controllers, so their decisions (quota fit, Kueue's
messages, FIFO positions, the RayJob state machine) are pinned here, first as
pure functions and then against the in-process API server and a real local Ray
head.

What it deliberately does not do: it does not test the API server itself
(that has its own tests), and it does not exercise raybridge; the server-backed
tests are skipped while `kubesim/server.py` does not exist.
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any, Iterator, Optional

import pytest

from kubesim import controllers as ctl
from kubesim.sim_gpu import register_gpu_node
from kubesim.tests.objects import (
    make_cluster_queue,
    make_local_queue,
    make_priority_class,
    raycluster_manifest,
    rayjob_manifest,
    report_status,
    wait_for,
)
from kubesim.tests.ray_head import RayHead

KUEUE_API = "kueue.x-k8s.io/v1beta2"
RAY_API = "ray.io/v1"


# --------------------------------------------------------------------------
# Pure decision logic
# --------------------------------------------------------------------------


def test_quantities_parse_and_format_like_kubernetes() -> None:
    assert ctl.parse_quantity("500m") == Decimal("0.5")
    assert ctl.parse_quantity("4Gi") == 4 * 2**30
    assert ctl.parse_quantity("1e3") == 1000
    assert ctl.parse_quantity(2) == 2
    assert ctl.format_quantity(Decimal(4)) == "4"
    assert ctl.format_quantity(Decimal("0.5")) == "500m"
    assert ctl.format_quantity(Decimal(16 * 2**30)) == "16Gi"
    assert ctl.format_quantity(Decimal(512 * 10**6)) == "512M"
    assert ctl.format_quantity(Decimal(0)) == "0"
    with pytest.raises(ValueError):
        ctl.parse_quantity("four")


def test_pod_requests_fall_back_to_limits_and_take_the_init_container_max() -> None:
    spec = {
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
        "containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2"}}},
        ],
    }
    assert ctl.pod_requests(spec) == {"cpu": Decimal(3), "nvidia.com/gpu": Decimal(2), "memory": Decimal(2**30)}


def _job(name: str = "train", **kwargs: Any) -> dict:
    job = rayjob_manifest(name, **kwargs)
    job["metadata"]["uid"] = "uid-" + name
    return job


def test_podsets_are_head_plus_groups_times_hosts_and_submitter_only_in_k8sjobmode() -> None:
    job = _job(workers=3, gpus_per_worker=4)
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = 2
    podsets = ctl.ray_podsets("RayJob", job)
    assert [(p["name"], p["count"]) for p in podsets] == [("head", 1), ("workers", 6)]
    assert podsets[1]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"

    k8s_mode = _job(submission_mode="K8sJobMode")
    assert [p["name"] for p in ctl.ray_podsets("RayJob", k8s_mode)] == ["head", "workers", "submitter"]


def test_workload_name_is_kind_owner_and_five_hex() -> None:
    name = ctl.workload_name("RayJob", "train", "1234")
    prefix, _, digest = name.rpartition("-")
    assert prefix == "rayjob-train" and len(digest) == 5 and int(digest, 16) >= 0
    assert ctl.workload_name("RayJob", "train", "1234") == name
    assert ctl.workload_name("RayJob", "train", "5678") != name


def _cq(gpus: int = 8, cpu: str = "64", memory: str = "512Gi", flavors: tuple[str, ...] = ("default-flavor",)) -> dict:
    return {
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": name,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": memory},
                                {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
                            ],
                        }
                        for name in flavors
                    ],
                }
            ]
        },
    }


def test_assign_flavors_admits_within_quota_with_kueue_shaped_assignments() -> None:
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(workers=2, gpus_per_worker=4)), used={})
    assert fit.fits
    assert fit.pod_set_assignments == [
        {
            "name": "head",
            "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
            "resourceUsage": {"cpu": "1", "memory": "2Gi"},
            "count": 1,
        },
        {
            "name": "workers",
            "flavors": {"cpu": "default-flavor", "memory": "default-flavor", "nvidia.com/gpu": "default-flavor"},
            "resourceUsage": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"},
            "count": 2,
        },
    ]
    assert fit.usage[("default-flavor", "nvidia.com/gpu")] == 8


def test_assign_flavors_reports_unused_quota_in_kueue_words() -> None:
    used = {("default-flavor", "nvidia.com/gpu"): Decimal(4)}
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(workers=2, gpus_per_worker=4)), used)
    assert not fit.fits
    assert fit.reason == "WaitingForQuota"
    assert fit.message == (
        "couldn't assign flavors to pod set workers: "
        "insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 4 more needed"
    )


def test_assign_flavors_reports_requests_above_the_nominal_quota() -> None:
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(workers=4, gpus_per_worker=4)), used={})
    assert fit.reason == "ExceedsMaxQuota"
    assert fit.message == (
        "couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
        "previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)"
    )


def test_assign_flavors_rejects_resources_the_queue_does_not_cover() -> None:
    fit = ctl.assign_flavors(_cq(), ctl.ray_podsets("RayJob", _job(gpus_per_worker=1, vendor_key="amd.com/gpu")), {})
    assert fit.reason == "NoMatchingFlavor"
    assert fit.message == "couldn't assign flavors to pod set workers: resource amd.com/gpu unavailable in ClusterQueue"


def test_assign_flavors_tries_flavors_in_order_and_honours_node_selectors() -> None:
    cq = _cq(gpus=4, flavors=("h100", "a100"))
    job = _job(workers=1, gpus_per_worker=4)
    used = {("h100", "nvidia.com/gpu"): Decimal(4)}
    fit = ctl.assign_flavors(cq, ctl.ray_podsets("RayJob", job), used)
    assert fit.pod_set_assignments[1]["flavors"]["nvidia.com/gpu"] == "a100"

    labels = {"h100": {"gpu": "h100"}, "a100": {"gpu": "a100"}}
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {"gpu": "h100"}
    fit = ctl.assign_flavors(cq, ctl.ray_podsets("RayJob", job), used, labels)
    assert not fit.fits
    assert fit.message == (
        "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "4 more needed, flavor a100 doesn't match node affinity"
    )


def test_validate_rayjob_matches_kuberay_messages() -> None:
    assert ctl.validate_rayjob(_job()) is None
    assert ctl.validate_rayjob(_job(backoffLimit=1)) == (
        "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode"
    )
    suspended = _job(shutdownAfterJobFinishes=False, suspend=True)
    assert ctl.validate_rayjob(suspended) == (
        "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"
    )


def test_kueue_webhook_errors_for_managed_rayjobs() -> None:
    assert ctl.kueue_create_errors("RayJob", _job()) == []
    assert ctl.kueue_create_errors("RayJob", _job(queue=None, shutdownAfterJobFinishes=False)) == []
    assert ctl.kueue_create_errors("RayJob", _job(shutdownAfterJobFinishes=False)) == [
        "spec.shutdownAfterJobFinishes: Invalid value: false: "
        "a kueue managed job should delete the cluster after finishing"
    ]


def test_merge_patch_for_removes_keys_and_replaces_lists() -> None:
    old = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    new = {"b": {"c": 2}, "e": [2], "f": "x"}
    assert ctl.merge_patch_for(old, new) == {"a": None, "b": {"d": None}, "e": [2], "f": "x"}


def test_pending_summary_positions_in_cluster_and_local_queue() -> None:
    def item(name: str, lq: str) -> dict:
        return {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": None,
            "ownerReferences": [],
            "priority": 0,
            "localQueueName": lq,
        }

    ordered = [item("w1", "a"), item("w2", "b"), item("w3", "a")]
    summary = ctl._pending_summary("v1beta2", ordered, {}, lambda wl: wl["localQueueName"] == "a")
    assert [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in summary["items"]
    ] == [
        ("w1", 0, 0),
        ("w3", 2, 1),
    ]
    assert summary["kind"] == "PendingWorkloadsSummary"


# --------------------------------------------------------------------------
# Against the in-process API server
# --------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[Any]:
    server_module = pytest.importorskip("kubesim.server")
    with server_module.KubeApiServer() as running:
        yield running


@pytest.fixture
def kueue(server: Any) -> Iterator[ctl.FakeKueue]:
    controller = ctl.FakeKueue(server, namespace_default_queue="default")
    controller.start()
    yield controller
    controller.stop()


def _workload_of(server: Any, kind: str, name: str, namespace: str = "default") -> Optional[dict]:
    job = server.get_object(RAY_API, kind, name, namespace)
    if job is None:
        return None
    found = server.list_objects(
        KUEUE_API, "Workload", namespace, label_selector=f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}"
    )
    return found[0] if found else None


def _condition(obj: Optional[dict], cond_type: str) -> Optional[dict]:
    return ctl.find_condition(obj or {}, cond_type)


def _admitted(server: Any, kind: str, name: str) -> Optional[dict]:
    wl = _workload_of(server, kind, name)
    return wl if ctl.condition_is_true(wl or {}, "Admitted") else None


def _pending_reason(server: Any, kind: str, name: str) -> Optional[dict]:
    cond = _condition(_workload_of(server, kind, name), "QuotaReserved")
    return cond if cond and cond["status"] == "False" else None


def _suspend(server: Any, kind: str, name: str) -> Optional[bool]:
    return (server.get_object(RAY_API, kind, name, "default") or {}).get("spec", {}).get("suspend")


def _visibility(server: Any, path: str) -> dict:
    """GET on the aggregated visibility API through the official client's plain REST call."""
    response = server.api_client().call_api("GET", server.url + path, header_params={"Accept": "application/json"})
    response.read()
    assert response.status == 200, response.data
    return json.loads(response.data)


def test_kueue_suspends_on_create_and_admits_within_quota(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server, gpus=8)
    make_local_queue(server)
    created = server.create_object(rayjob_manifest("a", workers=1, gpus_per_worker=4))
    assert created["spec"]["suspend"] is True  # Kueue's webhook ran at create

    wl = wait_for(lambda: _admitted(server, "RayJob", "a"), what="admission of a")
    assert wl["metadata"]["name"].startswith("rayjob-a-")
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayJob", "a", True)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("workers", 1)]
    assert wl["status"]["admission"]["clusterQueue"] == "cq"
    assert _condition(wl, "QuotaReserved")["reason"] == "QuotaReserved"
    wait_for(lambda: _suspend(server, "RayJob", "a") is False, what="a unsuspended")


def test_kueue_keeps_over_quota_pending_in_fifo_order_with_visibility(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server, gpus=8)
    make_local_queue(server)
    for name in ("a", "b", "c", "d"):
        server.create_object(rayjob_manifest(name, workers=1, gpus_per_worker=4))
        kueue.wait_passes(1)  # distinct arrival order even within one second
    wait_for(lambda: _admitted(server, "RayJob", "b"), what="admission of b")
    cond = wait_for(lambda: _pending_reason(server, "RayJob", "c"), what="c pending")
    assert cond["reason"] == "Pending"
    assert cond["message"] == (
        "couldn't assign flavors to pod set workers: "
        "insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 4 more needed"
    )
    assert _suspend(server, "RayJob", "c") is True

    kueue.wait_passes(2)
    summary = _visibility(server, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads")
    items = [(i["metadata"]["ownerReferences"][0]["name"], i["positionInClusterQueue"]) for i in summary["items"]]
    assert items == [("c", 0), ("d", 1)]
    in_lq = _visibility(
        server, "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/lq/pendingworkloads"
    )
    assert [(i["localQueueName"], i["positionInLocalQueue"]) for i in in_lq["items"]] == [("lq", 0), ("lq", 1)]

    lq = wait_for(
        lambda: (server.get_object(KUEUE_API, "LocalQueue", "lq", "default") or {})
        .get("status", {})
        .get("pendingWorkloads")
        == 2
        and server.get_object(KUEUE_API, "LocalQueue", "lq", "default"),
        what="LocalQueue counters",
    )
    assert lq["status"]["admittedWorkloads"] == 2 and lq["status"]["reservingWorkloads"] == 2


def test_kueue_releases_quota_when_a_job_finishes_or_is_deleted(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server, gpus=4)
    make_local_queue(server)
    server.create_object(rayjob_manifest("first", workers=1, gpus_per_worker=4))
    wait_for(lambda: _admitted(server, "RayJob", "first"), what="first admitted")
    server.create_object(rayjob_manifest("second", workers=1, gpus_per_worker=4))
    server.create_object(rayjob_manifest("third", workers=1, gpus_per_worker=4))
    wait_for(lambda: _pending_reason(server, "RayJob", "third"), what="third pending")

    # As KubeRay reports a finished job: Kueue marks the Workload Finished and frees its quota.
    finished_status = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "Job finished successfully."}
    report_status(server, RAY_API, "RayJob", "first", finished_status)
    finished = wait_for(
        lambda: _condition(_workload_of(server, "RayJob", "first"), "Finished"), what="Finished condition"
    )
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    wait_for(lambda: _admitted(server, "RayJob", "second"), what="second admitted after first finished")

    server.delete_object(RAY_API, "RayJob", "second", "default")
    wait_for(lambda: _admitted(server, "RayJob", "third"), what="third admitted after second deleted")


def test_kueue_raycluster_holds_quota_until_deleted(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server, gpus=4)
    make_local_queue(server)
    server.create_object(raycluster_manifest("notebook", workers=1, gpus_per_worker=4))
    wl = wait_for(lambda: _admitted(server, "RayCluster", "notebook"), what="raycluster admitted")
    assert wl["metadata"]["name"].startswith("raycluster-notebook-")
    server.create_object(rayjob_manifest("waiting", workers=1, gpus_per_worker=4))
    wait_for(lambda: _pending_reason(server, "RayJob", "waiting"), what="rayjob pending behind the cluster")
    server.delete_object(RAY_API, "RayCluster", "notebook", "default")
    wait_for(lambda: _admitted(server, "RayJob", "waiting"), what="rayjob admitted after cluster deleted")


def test_kueue_missing_local_queue_is_inadmissible(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server)
    server.create_object(rayjob_manifest("lost", queue="nope"))
    cond = wait_for(lambda: _pending_reason(server, "RayJob", "lost"), what="inadmissible")
    assert (cond["reason"], cond["message"]) == ("Inadmissible", "LocalQueue nope doesn't exist")


def test_kueue_eviction_suspends_and_releases_until_requeued(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server, gpus=4)
    make_local_queue(server)
    server.create_object(rayjob_manifest("victim", workers=1, gpus_per_worker=4))
    wl = wait_for(lambda: _admitted(server, "RayJob", "victim"), what="victim admitted")
    # As KubeRay would report it: the job runs, then goes Suspended once suspended.
    report_status(server, RAY_API, "RayJob", "victim", {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})

    kueue.evict("default", wl["metadata"]["name"])
    evicted = wait_for(lambda: _condition(_workload_of(server, "RayJob", "victim"), "Evicted"), what="Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    wait_for(lambda: _suspend(server, "RayJob", "victim") is True, what="victim suspended")
    kueue.wait_passes(3)
    assert (_workload_of(server, "RayJob", "victim") or {})["status"].get("admission"), "quota held while the job runs"

    report_status(server, RAY_API, "RayJob", "victim", {"jobDeploymentStatus": "Suspended", "jobStatus": ""})
    wait_for(
        lambda: not (_workload_of(server, "RayJob", "victim") or {}).get("status", {}).get("admission"),
        what="admission cleared",
    )
    requeued = _condition(_workload_of(server, "RayJob", "victim"), "Requeued")
    assert requeued["status"] == "False"

    kueue.requeue("default", wl["metadata"]["name"])
    readmitted = wait_for(lambda: _admitted(server, "RayJob", "victim"), what="victim readmitted")
    assert _condition(readmitted, "Evicted")["status"] == "False"
    wait_for(lambda: _suspend(server, "RayJob", "victim") is False, what="victim resumed")


def test_kueue_webhook_defaults_the_queue_and_rejects_unmanageable_jobs(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server)
    make_local_queue(server, name="default")
    kueue.wait_passes(2)  # the webhook reads LocalQueues from the controller's cache
    created = server.create_object(rayjob_manifest("unlabelled", queue=None))
    assert created["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert created["spec"]["suspend"] is True
    with pytest.raises(Exception) as denied:
        server.create_object(rayjob_manifest("keeps-cluster", shutdownAfterJobFinishes=False))
    assert "a kueue managed job should delete the cluster after finishing" in str(denied.value)


def test_kueue_priority_orders_the_queue(server: Any, kueue: ctl.FakeKueue) -> None:
    make_cluster_queue(server, gpus=4)
    make_local_queue(server)
    make_priority_class(server, "high", 1000)
    server.create_object(rayjob_manifest("running", workers=1, gpus_per_worker=4))
    wait_for(lambda: _admitted(server, "RayJob", "running"), what="running admitted")
    server.create_object(rayjob_manifest("low", workers=1, gpus_per_worker=4))
    urgent = rayjob_manifest("urgent", workers=1, gpus_per_worker=4)
    urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    server.create_object(urgent)
    wait_for(lambda: _pending_reason(server, "RayJob", "urgent"), what="urgent pending")
    kueue.wait_passes(2)
    summary = _visibility(server, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads")
    assert [(i["metadata"]["ownerReferences"][0]["name"], i["priority"]) for i in summary["items"]] == [
        ("urgent", 1000),
        ("low", 0),
    ]


def test_a_registered_gpu_node_is_labelled_like_gfd(server: Any) -> None:
    nvidia = register_gpu_node(server, "h100-0", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert nvidia["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert nvidia["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert nvidia["spec"]["taints"][0]["key"] == "nvidia.com/gpu"


# --------------------------------------------------------------------------
# KubeRay against a real Ray head
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    pytest.importorskip("kubesim.server")
    head = RayHead(num_cpus=2).start()
    session = head.session_id
    yield head
    head.stop()
    assert RayHead.leftover_pids(session) == [], "Ray processes left behind"


@pytest.fixture
def kuberay(server: Any, ray_head: RayHead) -> Iterator[ctl.FakeKubeRay]:
    controller = ctl.FakeKubeRay(server, dashboard_address=ray_head.dashboard_address, ready_delay=0.3)
    controller.start()
    yield controller
    controller.stop()


class _StateRecorder:
    """Remembers every distinct jobDeploymentStatus a RayJob shows, in order."""

    def __init__(self, server: Any, name: str) -> None:
        self.server, self.name, self.seen = server, name, []

    def poll(self) -> dict:
        job = self.server.get_object(RAY_API, "RayJob", self.name, "default") or {}
        state = (job.get("status") or {}).get("jobDeploymentStatus", "")
        if state and (not self.seen or self.seen[-1] != state):
            self.seen.append(state)
        return job

    def wait_state(self, state: str, timeout: float = 30.0) -> dict:
        return wait_for(
            lambda: (job := self.poll()).get("status", {}).get("jobDeploymentStatus") == state and job,
            timeout=timeout,
            interval=0.02,
            what=f"{self.name} {state} (seen {self.seen})",
        )


def _submit(dashboard_url: str, entrypoint: str, headers: Optional[dict] = None) -> str:
    """Submit through a cluster's dashboard (its `status.dashboardURL`, "host:port")."""
    from ray.job_submission import JobSubmissionClient

    import time

    submission_id = f"rb-{uuid.uuid4().hex[:8]}"
    client, deadline = JobSubmissionClient(f"http://{dashboard_url}", headers=headers), time.monotonic() + 60
    while True:
        try:
            client.submit_job(entrypoint=entrypoint, submission_id=submission_id)
            return submission_id
        except RuntimeError as exc:  # Ray: "No available agent to submit job, please try again later" on a new head
            if "No available agent" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _patch_job_id(server: Any, name: str, job_id: str) -> None:
    from kubernetes import client

    client.CustomObjectsApi(server.api_client()).patch_namespaced_custom_object(
        "ray.io", "v1", "default", "rayjobs", name, {"spec": {"jobId": job_id}}
    )


def test_kuberay_runs_an_interactive_rayjob_through_its_lifecycle(
    server: Any, kueue: ctl.FakeKueue, kuberay: ctl.FakeKubeRay, ray_head: RayHead
) -> None:
    make_cluster_queue(server, gpus=8)
    server.create_object(rayjob_manifest("hello", workers=1, gpus_per_worker=1))
    recorder = _StateRecorder(server, "hello")
    recorder.wait_state("Suspended")  # queued: its LocalQueue does not exist yet
    make_local_queue(server)
    waiting = recorder.wait_state("Waiting")
    cluster_name = waiting["status"]["rayClusterName"]
    assert cluster_name.startswith("hello-") and len(cluster_name) == len("hello-") + 5
    assert waiting["status"]["dashboardURL"] == kuberay.cluster_dashboard("default", cluster_name).address
    assert waiting["status"]["dashboardURL"] != ray_head.dashboard_address  # the cluster's own dashboard
    cluster = server.get_object(RAY_API, "RayCluster", cluster_name, "default")
    assert cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert cluster["metadata"]["ownerReferences"][0]["name"] == "hello"
    assert cluster["status"]["state"] == "ready"
    head = server.list_objects(
        "v1", "Pod", "default", label_selector=f"ray.io/cluster={cluster_name},ray.io/node-type=head"
    )
    assert len(head) == 1 and head[0]["status"]["podIP"] == "127.0.0.1"
    assert server.get_object("v1", "Service", f"{cluster_name}-head-svc", "default") is not None

    _patch_job_id(server, "hello", _submit(waiting["status"]["dashboardURL"], "python -c 'print(42)'"))
    done = recorder.wait_state("Complete", timeout=40)
    assert done["status"]["jobStatus"] == "SUCCEEDED"
    assert recorder.seen[0] in ("Initializing", "Suspending", "Suspended")
    assert "Suspended" in recorder.seen
    assert recorder.seen[-4:] == ["Initializing", "Waiting", "Running", "Complete"]
    assert done["status"]["endTime"] and done["status"]["startTime"]
    wait_for(lambda: server.get_object(RAY_API, "RayCluster", cluster_name, "default") is None, what="cluster deleted")
    # Its pods go after it: the garbage collector deletes dependents of a background-deleted owner.
    wait_for(lambda: server.list_objects("v1", "Pod", "default", label_selector=f"ray.io/cluster={cluster_name}") == [],
             what="the cluster's pods deleted")  # fmt: skip
    wait_for(
        lambda: ctl.condition_is_true(_workload_of(server, "RayJob", "hello") or {}, "Finished"),
        what="Workload Finished",
    )


def test_kuberay_gives_the_cluster_back_when_kueue_evicts_a_running_job(
    server: Any, kueue: ctl.FakeKueue, kuberay: ctl.FakeKubeRay, ray_head: RayHead
) -> None:
    from ray.job_submission import JobSubmissionClient

    make_cluster_queue(server, gpus=4)
    make_local_queue(server)
    server.create_object(rayjob_manifest("long", workers=1, gpus_per_worker=4))
    recorder = _StateRecorder(server, "long")
    waiting = recorder.wait_state("Waiting")
    cluster_name = waiting["status"]["rayClusterName"]
    submission_id = _submit(waiting["status"]["dashboardURL"], "python -c 'import time; time.sleep(120)'")
    _patch_job_id(server, "long", submission_id)
    recorder.wait_state("Running")

    kueue.evict("default", _workload_of(server, "RayJob", "long")["metadata"]["name"])
    suspended = recorder.wait_state("Suspended")
    assert recorder.seen[-3:] == ["Running", "Suspending", "Suspended"]
    assert "rayClusterName" not in suspended["status"] and suspended["status"]["jobStatus"] == ""
    assert server.get_object(RAY_API, "RayCluster", cluster_name, "default") is None
    wait_for(
        lambda: not (_workload_of(server, "RayJob", "long") or {}).get("status", {}).get("admission"), what="quota back"
    )
    jobs = JobSubmissionClient(ray_head.dashboard_url)
    wait_for(lambda: jobs.get_job_status(submission_id).value == "STOPPED", timeout=20, what="the Ray job stopped")


def test_kuberay_marks_a_failing_entrypoint_failed(server: Any, kuberay: ctl.FakeKubeRay, ray_head: RayHead) -> None:
    server.create_object(rayjob_manifest("broken", queue=None))
    recorder = _StateRecorder(server, "broken")
    waiting = recorder.wait_state("Waiting")
    _patch_job_id(server, "broken", _submit(waiting["status"]["dashboardURL"], "python -c 'import sys; sys.exit(3)'"))
    failed = recorder.wait_state("Failed", timeout=40)
    assert (failed["status"]["jobStatus"], failed["status"]["reason"]) == ("FAILED", "AppFailed")
    assert failed["status"]["failed"] == 1


def test_kuberay_validation_and_service_mode(server: Any, ray_head: RayHead) -> None:
    controller = ctl.FakeKubeRay(server, dashboard_address=ray_head.dashboard_address, dashboard_url_mode="service")
    with controller:
        server.create_object(rayjob_manifest("retrying", queue=None, backoffLimit=2))
        invalid = _StateRecorder(server, "retrying").wait_state("ValidationFailed")
        assert invalid["status"]["reason"] == "ValidationFailed"
        assert (
            invalid["status"]["message"]
            == "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode"
        )

        server.create_object(rayjob_manifest("svc", queue=None))
        waiting = _StateRecorder(server, "svc").wait_state("Waiting")
        cluster = waiting["status"]["rayClusterName"]
        assert waiting["status"]["dashboardURL"] == f"{cluster}-head-svc.default.svc.cluster.local:8265"
        host, port = controller._port_forward_target("default", _head_pod(server, cluster), 8265)
        assert f"{host}:{port}" == controller.cluster_dashboard("default", cluster).address
        with pytest.raises(ConnectionRefusedError):
            controller._port_forward_target("default", "no-such-pod", 8265)


def test_controllers_can_be_stopped_and_started_again(server: Any, kueue: ctl.FakeKueue, ray_head: RayHead) -> None:
    first = ctl.FakeKubeRay(server, dashboard_address=ray_head.dashboard_address)
    other = ctl.FakeKubeRay(server, dashboard_address="127.0.0.1:1", dashboard_url_mode="service")
    first.start()
    first.stop()
    other.start()  # takes the port-forward target over while `first` is stopped
    other.stop()
    first.start()
    kueue.stop()
    kueue.start()
    try:
        make_cluster_queue(server)
        make_local_queue(server)
        server.create_object(rayjob_manifest("again"))
        waiting = _StateRecorder(server, "again").wait_state("Waiting")
        cluster = waiting["status"]["rayClusterName"]
        assert waiting["status"]["dashboardURL"] == first.cluster_dashboard("default", cluster).address
        host, port = first._port_forward_target("default", _head_pod(server, cluster), 8265)
        assert f"{host}:{port}" == waiting["status"]["dashboardURL"]
        assert (
            _visibility(server, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads")["items"]
            == []
        )
    finally:
        first.stop()


def _head_pod(server: Any, cluster: str) -> str:
    pods = server.list_objects("v1", "Pod", "default", label_selector=f"ray.io/cluster={cluster},ray.io/node-type=head")
    return pods[0]["metadata"]["name"]


def _cluster_in_state(server: Any, name: str, state: str) -> Optional[dict]:
    cluster = server.get_object(RAY_API, "RayCluster", name, "default") or {}
    return cluster if (cluster.get("status") or {}).get("state") == state else None


def test_kuberay_standalone_raycluster_follows_suspend(server: Any, kuberay: ctl.FakeKubeRay) -> None:
    server.create_object(raycluster_manifest("solo", queue=None, workers=2))
    ready = wait_for(lambda: _cluster_in_state(server, "solo", "ready"), what="solo ready")
    assert ready["status"]["head"]["serviceName"] == "solo-head-svc"
    assert len(server.list_objects("v1", "Pod", "default", label_selector="ray.io/cluster=solo")) == 3
    from kubernetes import client

    client.CustomObjectsApi(server.api_client()).patch_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "solo", {"spec": {"suspend": True}}
    )
    suspended = wait_for(lambda: _cluster_in_state(server, "solo", "suspended"), what="solo suspended")
    assert ctl.condition_is_true(suspended, "RayClusterSuspended")
    assert server.list_objects("v1", "Pod", "default", label_selector="ray.io/cluster=solo") == []


# --------------------------------------------------------------------------
# KubeRay: per-cluster Ray jobs, the finalizer, validation, releases, token auth
# --------------------------------------------------------------------------

from kubesim import sim_kuberay  # noqa: E402  (the pure helpers the re-exports leave out)


def _token_spec(ray_version: Optional[str] = "2.60.0") -> Any:
    """A change to a cluster spec: token auth, with this rayVersion (None: without one)."""

    def change(spec: dict) -> None:
        spec["authOptions"] = {"mode": "token"}
        spec.pop("rayVersion", None)
        if ray_version is not None:
            spec["rayVersion"] = ray_version

    return change


@pytest.mark.parametrize(
    "spec_change, error",
    [
        (lambda s: None, None),
        (lambda s: s["headGroupSpec"]["template"]["spec"].update(containers=[]),
         "headGroupSpec should have at least one container"),
        (lambda s: s["workerGroupSpecs"][0]["template"]["spec"].update(containers=[]),
         "workerGroupSpec should have at least one container"),
        (lambda s: s["headGroupSpec"].setdefault("rayStartParams", {}).update(labels="a=b"),
         "rayStartParams['labels'] is not supported for Head group; please use the top-level Labels field instead"),
        (lambda s: s["headGroupSpec"]["template"]["spec"]["containers"][0].setdefault("env", []).append(
            {"name": "RAY_enable_autoscaler_v2", "value": "1"}),
         "environment variable RAY_enable_autoscaler_v2 cannot be set to '1' when enableInTreeAutoscaling is false. "
         "Please set enableInTreeAutoscaling: true to use autoscaler v2"),
        (_token_spec(None),
         "authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required"),
        (_token_spec("2.50.1"),
         "authOptions.mode is 'token' but minimum Ray version is 2.52.0, got 2.50.1"),
        (_token_spec("2.60.0"), None),
    ],
    ids=["valid", "no-head-container", "no-worker-container", "labels-in-ray-start-params",
         "autoscaler-v2-env-without-autoscaling", "token-without-ray-version", "token-with-old-ray",
         "token-with-new-ray"],
)  # fmt: skip
def test_raycluster_spec_validation_matches_kuberay(spec_change: Any, error: Optional[str]) -> None:
    job = rayjob_manifest("checked", queue=None)
    spec_change(job["spec"]["rayClusterSpec"])
    assert sim_kuberay.validate_raycluster_spec(job["spec"]["rayClusterSpec"]) == error
    expected = None if error is None else f"The RayJob spec is invalid: {error}"
    assert ctl.validate_rayjob(job) == expected


def _dashboard_call(address: str, path: str, headers: Optional[dict] = None) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(f"http://{address}{path}", headers=headers or {}), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_each_cluster_has_its_own_ray_jobs_and_they_vanish_with_it(
    server: Any, kuberay: ctl.FakeKubeRay, ray_head: RayHead
) -> None:
    from ray.job_submission import JobSubmissionClient

    server.create_object(rayjob_manifest("mine", queue=None))
    server.create_object(rayjob_manifest("other", queue=None))
    mine = _StateRecorder(server, "mine").wait_state("Waiting")["status"]
    other = _StateRecorder(server, "other").wait_state("Waiting")["status"]
    assert mine["dashboardURL"] != other["dashboardURL"]
    job_id = _submit(mine["dashboardURL"], "python -c 'import time; time.sleep(120)'")

    assert _dashboard_call(mine["dashboardURL"], f"/api/jobs/{job_id}")[0] == 200
    assert _dashboard_call(other["dashboardURL"], f"/api/jobs/{job_id}") == (404, f"Job {job_id} does not exist")
    listed = json.loads(_dashboard_call(other["dashboardURL"], "/api/jobs/")[1])
    assert job_id not in [job["submission_id"] for job in listed]
    assert job_id in [job["submission_id"] for job in json.loads(_dashboard_call(mine["dashboardURL"], "/api/jobs/")[1])]

    # The log-tail WebSocket reaches the job through the cluster's dashboard too.
    assert JobSubmissionClient(f"http://{mine['dashboardURL']}").get_job_status(job_id).value in ("PENDING", "RUNNING")

    server.delete_object(RAY_API, "RayJob", "mine", "default")
    wait_for(lambda: server.get_object(RAY_API, "RayCluster", mine["rayClusterName"], "default") is None, timeout=20,
             what="mine's cluster deleted")  # fmt: skip
    wait_for(lambda: kuberay.cluster_dashboard("default", mine["rayClusterName"]) is None, what="dashboard gone")
    with pytest.raises(OSError):
        _dashboard_call(mine["dashboardURL"], "/api/version")
    jobs = JobSubmissionClient(ray_head.dashboard_url)
    wait_for(lambda: jobs.get_job_status(job_id).value == "STOPPED", timeout=20, what="the cluster's job stopped")


def test_rayjob_finalizer_is_added_and_stops_the_job_before_the_rayjob_goes(
    server: Any, kuberay: ctl.FakeKubeRay, ray_head: RayHead
) -> None:
    from ray.job_submission import JobSubmissionClient

    server.create_object(rayjob_manifest("final", queue=None))
    waiting = _StateRecorder(server, "final").wait_state("Waiting")
    assert waiting["metadata"]["finalizers"] == ["ray.io/rayjob-finalizer"]
    job_id = _submit(waiting["status"]["dashboardURL"], "python -c 'import time; time.sleep(120)'")
    _patch_job_id(server, "final", job_id)
    _StateRecorder(server, "final").wait_state("Running")

    kuberay.stop()  # no operator: the finalizer holds the RayJob
    server.delete_object(RAY_API, "RayJob", "final", "default")
    held = server.get_object(RAY_API, "RayJob", "final", "default")
    assert held is not None and held["metadata"].get("deletionTimestamp")
    kuberay.start()
    wait_for(lambda: server.get_object(RAY_API, "RayJob", "final", "default") is None, timeout=20, what="RayJob gone")
    jobs = JobSubmissionClient(ray_head.dashboard_url)
    wait_for(lambda: jobs.get_job_status(job_id).value == "STOPPED", timeout=20, what="the Ray job stopped")


def test_validation_failed_is_a_failure_that_creates_nothing(server: Any, kuberay: ctl.FakeKubeRay) -> None:
    job = rayjob_manifest("tokenless", queue=None)
    job["spec"]["rayClusterSpec"]["authOptions"] = {"mode": "token"}
    job["spec"]["rayClusterSpec"].pop("rayVersion", None)
    server.create_object(job)
    failed = _StateRecorder(server, "tokenless").wait_state("ValidationFailed")["status"]
    assert failed["reason"] == "ValidationFailed"
    assert failed["message"].startswith("The RayJob spec is invalid: authOptions.mode is 'token' but RayVersion")
    assert "endTime" not in failed and "rayClusterName" not in failed
    assert not (server.get_object(RAY_API, "RayJob", "tokenless", "default")["metadata"].get("finalizers"))
    kuberay.wait_passes(3)
    assert server.list_objects(RAY_API, "RayCluster", "default") == []

    solo = raycluster_manifest("bad-solo", queue=None)
    solo["spec"]["headGroupSpec"].setdefault("rayStartParams", {})["labels"] = "a=b"
    server.create_object(solo)
    kuberay.wait_passes(3)
    assert not server.get_object(RAY_API, "RayCluster", "bad-solo", "default").get("status")
    assert server.list_objects("v1", "Pod", "default", label_selector="ray.io/cluster=bad-solo") == []


def test_token_auth_secret_and_refusals(server: Any, kuberay: ctl.FakeKubeRay) -> None:
    import base64

    job = rayjob_manifest("locked", queue=None)
    job["spec"]["rayClusterSpec"].update(authOptions={"mode": "token"}, rayVersion="2.60.0")
    server.create_object(job)
    status = _StateRecorder(server, "locked").wait_state("Waiting")["status"]
    secret = server.get_object("v1", "Secret", status["rayClusterName"], "default")
    assert secret["metadata"]["ownerReferences"][0]["name"] == status["rayClusterName"]
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    address = status["dashboardURL"]
    assert _dashboard_call(address, "/api/version") == (401, "Unauthorized: Missing authentication token")
    assert _dashboard_call(address, "/api/version", {"Authorization": "Bearer wrong"}) == (
        403,
        "Forbidden: Invalid authentication token",
    )
    assert _dashboard_call(address, "/api/version", {"Authorization": f"Bearer {token}"})[0] == 200
    assert _dashboard_call(address, "/api/version", {"X-Ray-Authorization": f"Bearer {token}"})[0] == 200
    assert _dashboard_call(address, "/api/healthz")[0] not in (401, 403)  # public, as in Ray


def test_the_pre_running_deadline_fails_a_job_left_waiting(server: Any, ray_head: RayHead) -> None:
    """kuberay@v1.6.0 checkPreRunningDeadlineAndUpdateStatusIfNeeded, in Waiting as in Initializing."""
    with ctl.FakeKubeRay(server, dashboard_address=ray_head.dashboard_address) as newest:
        server.create_object(rayjob_manifest("new", queue=None, preRunningDeadlineSeconds=1))
        failed = _StateRecorder(server, "new").wait_state("Failed", timeout=20)["status"]
        assert failed["reason"] == "PreRunningDeadlineExceeded"
        newest.wait_passes(1)


def test_waiting_checks_neither_suspend_nor_active_deadline_but_a_preset_job_id_leaves_it(server: Any, ray_head: RayHead) -> None:
    """kuberay@v1.3.2..v1.7.0 rayjob_controller.go, case Waiting: no updateStatusToSuspendingIfNeeded and no
    checkActiveDeadlineAndUpdateStatusIfNeeded; with spec.jobId set it moves on to Running, where both act."""
    import time

    with ctl.FakeKubeRay(server, dashboard_address=ray_head.dashboard_address) as kuberay:
        stuck, passing = "stuck", "passing"
        server.create_object(rayjob_manifest(stuck, queue=None, activeDeadlineSeconds=2))
        _StateRecorder(server, stuck).wait_state("Waiting")
        server.patch_object(RAY_API, "RayJob", stuck, {"spec": {"suspend": True}}, "default")
        server.create_object(rayjob_manifest(passing, queue=None, activeDeadlineSeconds=2, jobId=f"{passing}-id"))
        failed = _StateRecorder(server, passing).wait_state("Failed", timeout=20)["status"]
        assert failed["reason"] == "DeadlineExceeded"
        time.sleep(0.5)
        kuberay.wait_passes(2)
        assert server.get_object(RAY_API, "RayJob", stuck, "default")["status"]["jobDeploymentStatus"] == "Waiting"
