"""Tests of the simulated Kueue controller and of what it shares with the rest of kubesim.

Why this module exists: raybridge's end-to-end tests trust these fakes to
behave like the real controllers, so their decisions (quota fit, Kueue's
messages, FIFO positions) are pinned here, first as pure functions and then
against the in-process API server. KubeRay is no longer simulated: the tests run
the real operator on the real test cluster (testcluster/).

What it deliberately does not do: it does not test the API server itself
(that has its own tests), and it does not exercise raybridge; the server-backed
tests are skipped while `kubesim/server.py` does not exist.
"""

from __future__ import annotations

import json
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
