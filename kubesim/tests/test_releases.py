"""The test API server per supported KubeRay and Kueue release, through the official client.

Why: raybridge must work on every release in the matrix; the server has to
serve exactly what that release's CRDs serve (versions, fields) and convert
Kueue objects between v1beta1 and v1beta2 the way Kueue's conversion does.
What this deliberately does not do: test the simulated controllers per
release (test_controllers.py) or raybridge itself (tests/e2e).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubesim import schemas
from kubesim.server import KubeApiServer

# What each release serves, as the upstream release notes say it
# (not read back from the CRD files, so that a wrong file choice fails here).
SERVED = {
    "kuberay-v1.3.2": ("ray.io", ["v1", "v1alpha1"]),
    "kuberay-v1.5.2": ("ray.io", ["v1", "v1alpha1"]),
    "kuberay-newest": ("ray.io", ["v1", "v1alpha1"]),
    "kueue-v0.13.10": ("kueue.x-k8s.io", ["v1beta1"]),
    "kueue-v0.15.8": ("kueue.x-k8s.io", ["v1beta2", "v1beta1"]),
    "kueue-newest": ("kueue.x-k8s.io", ["v1beta2", "v1beta1"]),
}
# spec.preRunningDeadlineSeconds exists in the RayJob CRD from KubeRay v1.6.0 on.
HAS_PRE_RUNNING_DEADLINE = {"kuberay-v1.3.2": False, "kuberay-v1.5.2": False, "kuberay-newest": True}


def test_release_ids() -> None:
    assert schemas.RELEASES == (
        "kuberay-v1.3.2", "kuberay-v1.5.2", "kuberay-newest", "kueue-v0.13.10", "kueue-v0.15.8", "kueue-newest",
    )
    with pytest.raises(ValueError, match="unknown release"):
        schemas.release_files("kueue-v0.1.0")


def test_every_release_has_its_crd_files(release: str) -> None:
    assert schemas.release_files(release), release


def test_release_fixture_ids_select_one_release(request: pytest.FixtureRequest, release: str) -> None:
    assert request.node.name.endswith(f"[{release}]")


def test_discovery_lists_exactly_the_served_versions(release_server: KubeApiServer, release: str) -> None:
    group, versions = SERVED[release]
    with release_server.api_client() as api:
        groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
        assert [v.version for v in groups[group].versions] == versions
        assert groups[group].preferred_version.version == versions[0]
        for version in ("v1", "v1alpha1", "v1beta1", "v1beta2", "v2"):
            if version in versions:
                listed = client.CustomObjectsApi(api).get_api_resources(group, version)
                assert listed.group_version == f"{group}/{version}"
                continue
            with pytest.raises(ApiException) as caught:
                client.CustomObjectsApi(api).get_api_resources(group, version)
            assert caught.value.status == 404


def test_an_unserved_version_is_404_like_a_real_server() -> None:
    with KubeApiServer(release="kueue-v0.13.10") as server, server.api_client() as api:
        custom = client.CustomObjectsApi(api)
        with pytest.raises(ApiException) as caught:
            custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        assert caught.value.status == 404
        assert json.loads(caught.value.body)["message"] == "the server could not find the requested resource"
        assert custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues")["items"] == []


@pytest.mark.parametrize("release", schemas.KUBERAY_RELEASES)
@pytest.mark.parametrize("field_validation", [None, "Strict"])
def test_pre_running_deadline_exists_only_where_the_release_has_it(release: str, field_validation: str | None) -> None:
    manifest = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
                "spec": {"entrypoint": "python x.py", "preRunningDeadlineSeconds": 60}}
    kwargs = {"field_validation": field_validation} if field_validation else {}
    with KubeApiServer(release=release) as server, server.api_client() as api:
        custom = client.CustomObjectsApi(api)
        if HAS_PRE_RUNNING_DEADLINE[release]:
            created = custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", manifest, **kwargs)
            assert created["spec"]["preRunningDeadlineSeconds"] == 60
        elif field_validation == "Strict":
            with pytest.raises(ApiException) as caught:
                custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", manifest, **kwargs)
            assert caught.value.status == 400
            assert json.loads(caught.value.body)["message"] == (
                'RayJob in version "v1" cannot be handled as a RayJob: strict decoding error: '
                'unknown field "spec.preRunningDeadlineSeconds"')
        else:
            data, status, headers = custom.create_namespaced_custom_object_with_http_info(
                "ray.io", "v1", "default", "rayjobs", manifest)
            assert status == 201 and "preRunningDeadlineSeconds" not in data["spec"]
            assert headers["Warning"] == '299 - "unknown field \\"spec.preRunningDeadlineSeconds\\""'


# --- Kueue v1beta1 <-> v1beta2 -------------------------------------------------------

def _cluster_queue(version: str, cohort_field: str) -> dict[str, Any]:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {cohort_field: "pool", "namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]},
    }


def _workload(version: str, priority: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Workload", "metadata": {"name": "wl"},
        "spec": {"queueName": "lq", "priority": 5, **priority, "podSets": [
            {"name": "head", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}}]},
    }


WPC_REF = {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}}
WPC_V1BETA1 = {"priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "priorityClassName": "high"}
POD_REF = {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "system"}}
POD_V1BETA1 = {"priorityClassSource": "scheduling.k8s.io/priorityclass", "priorityClassName": "system"}

CONVERSION_CASES = [
    # (label, plural, namespaced, written, read version, expected spec subset)
    ("cohort up", "clusterqueues", False, _cluster_queue("v1beta1", "cohort"), "v1beta2", {"cohortName": "pool"}),
    ("cohort down", "clusterqueues", False, _cluster_queue("v1beta2", "cohortName"), "v1beta1", {"cohort": "pool"}),
    ("workload class up", "workloads", True, _workload("v1beta1", WPC_V1BETA1), "v1beta2", WPC_REF),
    ("workload class down", "workloads", True, _workload("v1beta2", WPC_REF), "v1beta1", WPC_V1BETA1),
    ("pod class up", "workloads", True, _workload("v1beta1", POD_V1BETA1), "v1beta2", POD_REF),
    ("pod class down", "workloads", True, _workload("v1beta2", POD_REF), "v1beta1", POD_V1BETA1),
]


@pytest.mark.parametrize("release", ["kueue-v0.15.8", "kueue-newest"])
@pytest.mark.parametrize(("plural", "namespaced", "written", "read_version", "expected"),
                         [c[1:] for c in CONVERSION_CASES], ids=[c[0] for c in CONVERSION_CASES])
def test_kueue_objects_read_back_converted_in_the_other_version(
    release: str, plural: str, namespaced: bool, written: dict[str, Any], read_version: str, expected: dict[str, Any],
) -> None:
    group, written_version = "kueue.x-k8s.io", written["apiVersion"].rpartition("/")[2]
    with KubeApiServer(release=release) as server, server.api_client() as api:
        custom = client.CustomObjectsApi(api)
        name = written["metadata"]["name"]
        if namespaced:
            custom.create_namespaced_custom_object(group, written_version, "default", plural, written,
                                                   field_validation="Strict")
            read = custom.get_namespaced_custom_object(group, read_version, "default", plural, name)
            listed = custom.list_namespaced_custom_object(group, read_version, "default", plural)["items"]
        else:
            custom.create_cluster_custom_object(group, written_version, plural, written, field_validation="Strict")
            read = custom.get_cluster_custom_object(group, read_version, plural, name)
            listed = custom.list_cluster_custom_object(group, read_version, plural)["items"]
        assert read["apiVersion"] == f"{group}/{read_version}"
        for key, value in expected.items():
            assert read["spec"][key] == value
        written_only = set(written["spec"]) - set(read["spec"]) - {"priority"}
        assert written_only.isdisjoint(expected)
        assert listed == [read]
        # And back again: the round trip is lossless for these fields.
        back = (custom.get_namespaced_custom_object(group, written_version, "default", plural, name) if namespaced
                else custom.get_cluster_custom_object(group, written_version, plural, name))
        for key, value in written["spec"].items():
            assert back["spec"][key] == value, key


def test_a_status_written_in_one_version_reads_in_the_other() -> None:
    with KubeApiServer(release="kueue-newest") as server, server.api_client() as api:
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"},
            "spec": {"clusterQueue": "cq"}})
        old = custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", "default", "localqueues", "lq")
        old["status"] = {"flavorUsage": [{"name": "default", "resources": [{"name": "cpu", "total": "2"}]}]}
        custom.replace_namespaced_custom_object_status("kueue.x-k8s.io", "v1beta1", "default", "localqueues", "lq", old)
        new = custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues", "lq")
        assert new["status"]["flavorsUsage"] == [{"name": "default", "resources": [{"name": "cpu", "total": "2"}]}]
        assert "flavorUsage" not in new["status"]


def test_kueue_v0_15_stores_v1beta1_and_still_serves_v1beta2_fields() -> None:
    with KubeApiServer(release="kueue-v0.15.8") as server:
        created = server.create_object(_cluster_queue("v1beta2", "cohortName"))
        assert created["spec"]["cohortName"] == "pool"
        assert server.get_object("kueue.x-k8s.io/v1beta1", "ClusterQueue", "cq")["spec"]["cohort"] == "pool"
