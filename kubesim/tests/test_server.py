"""Tests of the in-process Kubernetes API server, through the official client.

Why: the rest of the suite trusts `kubesim/server.py` to behave like
kube-apiserver; these tests pin each behaviour it claims (status codes,
Status bodies, resourceVersion/generation, subresources, patches,
finalizers, garbage collection, watch, logs, port-forward, extension points)
using `kubernetes.client` the way application code does.
What they deliberately do not do: compare against a real cluster (the opt-in
e2e suite does that) or test the simulated controllers (test_controllers.py).
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client, config, dynamic, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import portforward

from kubesim import schemas
from kubesim.errors import AdmissionDenied, ApiError
from kubesim.tests.objects import report_status
from kubesim.server import TOKEN, KubeApiServer

RAY = ("ray.io", "v1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")


# --- helpers --------------------------------------------------------------------


def status_body(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


def pod_manifest(name: str, labels: dict[str, str] | None = None, node: str | None = None,
                 containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox:1.36"} for c in containers]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def running_pod(server: KubeApiServer, name: str) -> dict[str, Any]:
    manifest = pod_manifest(name, node="node-1")
    manifest["status"] = {"phase": "Running", "podIP": "127.0.0.1"}
    return server.create_object(manifest)


def rayjob_manifest(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {"entrypoint": "python main.py", **spec},
    }


def configmap_manifest(name: str, owner: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}}


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }


def expect_api_error(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, status_body(caught.value)


# --- discovery and configuration --------------------------------------------


def test_discovery_lists_builtin_groups_and_every_crd_group(kube_api: client.ApiClient) -> None:
    assert client.CoreApi(kube_api).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(kube_api).get_api_versions().groups}
    assert {"apps", "batch", "coordination.k8s.io", "scheduling.k8s.io", "ray.io", "kueue.x-k8s.io"} <= set(groups)
    assert groups["ray.io"].preferred_version.version == "v1"
    assert groups["kueue.x-k8s.io"].preferred_version.version == "v1beta2"
    assert {v.version for v in groups["ray.io"].versions} == {"v1", "v1alpha1"}

    core = {r.name: r for r in client.CoreV1Api(kube_api).get_api_resources().resources}
    assert core["pods"].namespaced and not core["nodes"].namespaced
    assert {"pods/status", "pods/log", "pods/portforward"} <= set(core)
    ray = {r.name: r for r in client.CustomObjectsApi(kube_api).get_api_resources("ray.io", "v1").resources}
    assert ray["rayjobs"].kind == "RayJob" and ray["rayjobs"].namespaced
    assert "rayjobs/status" in ray
    kueue = {r.name: r for r in client.CustomObjectsApi(kube_api).get_api_resources(*KUEUE).resources}
    assert kueue["clusterqueues"].namespaced is False
    assert "resourceflavors/status" not in kueue  # the CRD has no status subresource


def test_dynamic_client_finds_kinds_through_discovery(kube_api: client.ApiClient) -> None:
    resources = dynamic.DynamicClient(kube_api).resources
    assert resources.get(api_version="ray.io/v1", kind="RayJob").name == "rayjobs"
    assert resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="LocalQueue").namespaced is True
    assert resources.get(api_version="scheduling.k8s.io/v1", kind="PriorityClass").namespaced is False


def test_kubeconfig_is_accepted_by_load_kube_config(kube_server: KubeApiServer, tmp_path: Path) -> None:
    path = kube_server.write_kubeconfig(tmp_path / "kubeconfig", namespace="team-a", context="ctx")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == kube_server.url
    _, active = config.list_kube_config_contexts(config_file=str(path))
    assert active["name"] == "ctx" and active["context"]["namespace"] == "team-a"
    with client.ApiClient(configuration) as api:
        names = {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
    assert {"default", "kube-system", "kube-public"} <= names


# --- CRUD on every kind of resource ------------------------------------------


@dataclass(frozen=True)
class CrudCase:
    """One kind, driven through its own official-client API class."""

    label: str
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    body: dict[str, Any]
    change: dict[str, Any]  # top-level fields replaced in the PUT
    changed: Callable[[dict[str, Any]], Any]  # reads back what the change set
    expected: Any

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def call(self, api: client.ApiClient, verb: str, name: str, body: dict[str, Any] | None = None) -> Any:
        args: list[Any] = []
        if self.group in ("ray.io", "kueue.x-k8s.io"):
            custom = client.CustomObjectsApi(api)
            group, version = self.api_version.split("/")
            scope = "namespaced" if self.namespaced else "cluster"
            method = getattr(custom, f"{ {'read': 'get'}.get(verb, verb)}_{scope}_custom_object")
            args = [group, version] + (["default"] if self.namespaced else []) + [self.plural]
            args += [name] if verb != "create" else []
            args += [body] if body is not None else []
            return method(*args)
        family = {
            "": client.CoreV1Api,
            "apps": client.AppsV1Api,
            "batch": client.BatchV1Api,
            "coordination.k8s.io": client.CoordinationV1Api,
            "scheduling.k8s.io": client.SchedulingV1Api,
        }[self.group](api)
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in self.kind).lstrip("_")
        method = getattr(family, f"{verb}_{'namespaced_' if self.namespaced else ''}{snake}")
        args = ([] if verb == "create" else [name]) + (["default"] if self.namespaced else [])
        args += [body] if body is not None else []
        return api.sanitize_for_serialization(method(*args))


_POD_TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}
CRUD_CASES = [
    CrudCase("configmap", "v1", "ConfigMap", "configmaps", True, {"data": {"a": "1"}}, {"data": {"a": "2"}},
             lambda o: o["data"]["a"], "2"),
    CrudCase("secret", "v1", "Secret", "secrets", True, {"stringData": {"token": "s3cret"}},
             {"data": {"token": "Yg=="}}, lambda o: o["data"], {"token": "Yg=="}),
    CrudCase("service", "v1", "Service", "services", True, {"spec": {"ports": [{"port": 8265}]}},
             {"spec": {"ports": [{"port": 8266}]}}, lambda o: (o["spec"]["ports"][0]["port"], bool(o["spec"]["clusterIP"])),
             (8266, True)),
    CrudCase("node", "v1", "Node", "nodes", False, {"metadata": {"labels": {"zone": "a"}}},
             {"spec": {"unschedulable": True}}, lambda o: o["spec"]["unschedulable"], True),
    CrudCase("deployment", "apps/v1", "Deployment", "deployments", True,
             {"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": _POD_TEMPLATE}},
             {"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}}, "template": _POD_TEMPLATE}},
             lambda o: (o["spec"]["replicas"], o["metadata"]["generation"]), (3, 2)),
    CrudCase("job", "batch/v1", "Job", "jobs", True,
             {"spec": {"template": {"spec": {"restartPolicy": "Never",
                                             "containers": [{"name": "c", "image": "busybox:1"}]}}}},
             {"metadata": {"name": "thing", "labels": {"changed": "yes"}}}, lambda o: o["metadata"]["labels"],
             {"changed": "yes"}),
    CrudCase("lease", "coordination.k8s.io/v1", "Lease", "leases", True, {"spec": {"holderIdentity": "a"}},
             {"spec": {"holderIdentity": "b"}}, lambda o: o["spec"]["holderIdentity"], "b"),
    CrudCase("priorityclass", "scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False, {"value": 1000},
             {"description": "changed"}, lambda o: (o["description"], o["value"]), ("changed", 1000)),
    CrudCase("rayjob", "ray.io/v1", "RayJob", "rayjobs", True, {"spec": {"entrypoint": "python a.py"}},
             {"spec": {"entrypoint": "python b.py"}}, lambda o: o["spec"]["entrypoint"], "python b.py"),
    CrudCase("localqueue", "kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True,
             {"spec": {"clusterQueue": "cq"}}, {"spec": {"clusterQueue": "cq", "stopPolicy": "Hold"}},
             lambda o: o["spec"]["stopPolicy"], "Hold"),  # clusterQueue itself is immutable (a CEL rule)
    CrudCase("resourceflavor", "kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False,
             {"spec": {"nodeLabels": {"gpu": "mi300x"}}}, {"spec": {"nodeLabels": {"gpu": "h100"}}},
             lambda o: o["spec"]["nodeLabels"], {"gpu": "h100"}),
]


@pytest.mark.parametrize("case", CRUD_CASES, ids=lambda c: c.label)
def test_create_get_replace_delete(kube_api: client.ApiClient, case: CrudCase) -> None:
    manifest = {"apiVersion": case.api_version, "kind": case.kind, "metadata": {"name": "thing"}}
    for key, value in case.body.items():
        manifest[key] = {**manifest.get(key, {}), **value} if key == "metadata" else value

    created = case.call(kube_api, "create", "thing", manifest)
    meta = created["metadata"]
    assert meta["name"] == "thing" and meta["uid"] and meta["creationTimestamp"]
    assert int(meta["resourceVersion"]) > 0
    assert meta.get("namespace") == ("default" if case.namespaced else None)

    fetched = case.call(kube_api, "read", "thing")
    assert fetched["metadata"]["uid"] == meta["uid"]
    assert fetched["metadata"]["resourceVersion"] == meta["resourceVersion"]

    changed = {**fetched, **case.change}
    if "metadata" in case.change:
        changed["metadata"] = {**fetched["metadata"], **case.change["metadata"]}
    replaced = case.call(kube_api, "replace", "thing", changed)
    assert int(replaced["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert case.changed(replaced) == case.expected
    assert case.changed(case.call(kube_api, "read", "thing")) == case.expected

    case.call(kube_api, "delete", "thing")
    code, body = expect_api_error(lambda: case.call(kube_api, "read", "thing"))
    qualified = f"{case.plural}.{case.group}" if case.group else case.plural
    assert code == 404
    assert body["reason"] == "NotFound" and body["message"] == f'{qualified} "thing" not found'
    assert body["details"]["name"] == "thing" and body["details"]["kind"] == case.plural


def test_delete_returns_the_object_for_pods_and_a_status_for_the_rest(kube_api: client.ApiClient) -> None:
    core, custom = client.CoreV1Api(kube_api), client.CustomObjectsApi(kube_api)
    core.create_namespaced_pod("default", pod_manifest("p"))
    deleted_pod = core.delete_namespaced_pod("p", "default")
    assert isinstance(deleted_pod, client.V1Pod) and deleted_pod.metadata.name == "p"

    created = custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    answer = custom.delete_namespaced_custom_object(*RAY, "default", "rayjobs", "j")
    assert answer == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "j", "group": "ray.io", "kind": "rayjobs", "uid": created["metadata"]["uid"]},
    }


def test_objects_are_served_under_every_version_of_their_group(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    created = custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    old = custom.get_namespaced_custom_object("ray.io", "v1alpha1", "default", "rayjobs", "j")
    assert old["apiVersion"] == "ray.io/v1alpha1"
    assert old["metadata"]["uid"] == created["metadata"]["uid"]
    listed = custom.list_namespaced_custom_object("ray.io", "v1alpha1", "default", "rayjobs")
    assert listed["kind"] == "RayJobList" and [i["apiVersion"] for i in listed["items"]] == ["ray.io/v1alpha1"]


def test_crd_defaults_are_applied_like_the_real_server(kube_api: client.ApiClient) -> None:
    created = client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        *RAY, "default", "rayjobs", rayjob_manifest("j", suspend=None)
    )
    assert created["spec"]["submissionMode"] == "K8sJobMode"  # `default:` in the RayJob CRD
    assert created["spec"]["backoffLimit"] == 0
    assert "suspend" not in created["spec"]  # null in a non-nullable field is dropped


# --- names, conflicts, validation -----------------------------------------------


def test_generate_name_appends_five_random_characters(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    names = {
        core.create_namespaced_config_map("default", {"metadata": {"generateName": "cfg-"}}).metadata.name
        for _ in range(3)
    }
    assert len(names) == 3
    assert all(n.startswith("cfg-") and len(n) == len("cfg-") + 5 for n in names)


def test_create_twice_is_409_already_exists(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("twice"))
    code, body = expect_api_error(
        lambda: custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("twice"))
    )
    assert code == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'rayjobs.ray.io "twice" already exists'
    assert body["details"] == {"name": "twice", "group": "ray.io", "kind": "rayjobs"}


def test_replace_with_a_stale_resource_version_is_409_conflict(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    first = core.create_namespaced_config_map("default", configmap_manifest("cm"))
    core.patch_namespaced_config_map("cm", "default", {"data": {"k": "newer"}})
    stale = kube_api.sanitize_for_serialization(first)
    code, body = expect_api_error(lambda: core.replace_namespaced_config_map("cm", "default", stale))
    assert code == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "cm": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    del stale["metadata"]["resourceVersion"]  # an unconditional update goes through
    assert core.replace_namespaced_config_map("cm", "default", stale).data == {"k": "v"}


def test_custom_resources_refuse_unconditional_updates(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    created = custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    del created["metadata"]["resourceVersion"]
    code, body = expect_api_error(
        lambda: custom.replace_namespaced_custom_object(*RAY, "default", "rayjobs", "j", created))
    assert code == 422
    assert body["message"] == (
        'rayjobs.ray.io "j" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update')


INVALID_CASES = [
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespaced_pod("default", pod_manifest("Bad_Name")),
        "metadata.name", "a lowercase RFC 1123 subdomain must consist of", id="pod name is a DNS-1123 subdomain"),
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespaced_service(
            "default", {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}),
        "metadata.name", "a DNS-1035 label must consist of", id="service name is a DNS-1035 label"),
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespace({"metadata": {"name": "a.b"}}),
        "metadata.name", "a lowercase RFC 1123 label must consist of", id="namespace name is a DNS-1123 label"),
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespaced_config_map(
            "default", {"metadata": {"name": "cm", "labels": {"app": "has space"}}}),
        "metadata.labels", "a valid label must be an empty string or consist of", id="label values are checked"),
    pytest.param(
        lambda api: client.BatchV1Api(api).create_namespaced_job("default", {
            "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
        "spec.template.spec.restartPolicy", 'Unsupported value: "Always"', id="job pods must not restart Always"),
    pytest.param(
        lambda api: client.CustomObjectsApi(api).create_namespaced_custom_object(
            *RAY, "default", "rayjobs", rayjob_manifest("j", shutdownAfterJobFinishes="yes")),
        "spec.shutdownAfterJobFinishes", "in body must be of type boolean", id="rayjob field of the wrong type"),
    pytest.param(
        lambda api: client.CustomObjectsApi(api).create_cluster_custom_object(
            *KUEUE, "clusterqueues",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
             "spec": {"queueingStrategy": "Random", "resourceGroups": [{"coveredResources": ["cpu"]}]}}),
        "spec.queueingStrategy", 'Unsupported value: "Random": supported values: "StrictFIFO", "BestEffortFIFO"',
        id="clusterqueue enum and required fields"),
]


@pytest.mark.parametrize(("create", "field", "expected"), INVALID_CASES)
def test_invalid_objects_are_422_with_field_causes(
    kube_api: client.ApiClient, create: Callable[[client.ApiClient], Any], field: str, expected: str
) -> None:
    code, body = expect_api_error(lambda: create(kube_api))
    assert code == 422
    assert body["reason"] == "Invalid" and " is invalid: " in body["message"]
    causes = body["details"]["causes"]
    assert any(c["field"] == field and expected in c["message"] for c in causes), causes
    assert expected in body["message"]


def test_schema_violations_match_tests_schemas(kube_api: client.ApiClient) -> None:
    manifest = rayjob_manifest("typed", backoffLimit="three")
    assert schemas.schema_errors(manifest)  # the same validator decides
    code, body = expect_api_error(lambda: client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        *RAY, "default", "rayjobs", manifest))
    assert code == 422
    assert body["message"] == (
        'RayJob.ray.io "typed" is invalid: [spec.backoffLimit: Invalid value: "string": '
        'spec.backoffLimit in body must be of type integer: "string", '
        '<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; '
        'correct the existing errors to complete validation]'
    )
    assert body["details"]["kind"] == "RayJob" and body["details"]["group"] == "ray.io"


@pytest.mark.parametrize(
    ("field_validation", "expected_code", "kept"),
    [
        (None, 201, False),  # Warn, as a real server's default
        ("Strict", 400, None),
        ("Warn", 201, False),
        ("Ignore", 201, False),
    ],
)
def test_unknown_fields_follow_field_validation(
    kube_api: client.ApiClient, field_validation: str | None, expected_code: int, kept: bool | None
) -> None:
    manifest = rayjob_manifest("unknown", entrypointTypo="python x.py")
    assert schemas.schema_errors(manifest)
    custom = client.CustomObjectsApi(kube_api)
    kwargs = {"field_validation": field_validation} if field_validation else {}
    if expected_code == 400:
        code, body = expect_api_error(
            lambda: custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", manifest, **kwargs))
        assert code == 400 and body["reason"] == "BadRequest"
        assert body["message"] == (
            'RayJob in version "v1" cannot be handled as a RayJob: strict decoding error: '
            'unknown field "spec.entrypointTypo"'
        )
        return
    data, status, headers = custom.create_namespaced_custom_object_with_http_info(
        *RAY, "default", "rayjobs", manifest, **kwargs)
    assert status == expected_code
    assert ("entrypointTypo" in data["spec"]) is kept
    warning = headers.get("Warning")
    assert (warning == '299 - "unknown field \\"spec.entrypointTypo\\""') is (field_validation != "Ignore")


def _job(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {**spec, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}}


IMMUTABLE_CASES = [
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespaced_pod("default", pod_manifest("p")),
        lambda api: client.CoreV1Api(api).patch_namespaced_pod("p", "default", {"spec": {"nodeSelector": {"a": "b"}}}),
        "spec", "Forbidden: pod updates may not change fields other than", id="pod spec"),
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespaced_pod("default", pod_manifest("p")),
        lambda api: client.CoreV1Api(api).patch_namespaced_pod(
            "p", "default", {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}),
        None, None, id="pod image may change"),
    pytest.param(
        lambda api: client.BatchV1Api(api).create_namespaced_job("default", _job("j")),
        lambda api: client.BatchV1Api(api).patch_namespaced_job(
            "j", "default", {"spec": {"template": {"spec": {"nodeSelector": {"gpu": "yes"}}}}}),
        "spec.template", "field is immutable", id="job template"),
    pytest.param(
        lambda api: client.BatchV1Api(api).create_namespaced_job("default", _job("j", suspend=True)),
        lambda api: client.BatchV1Api(api).patch_namespaced_job(
            "j", "default", {"spec": {"template": {"spec": {"nodeSelector": {"gpu": "yes"}}}}}),
        None, None, id="suspended job may change scheduling directives"),
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespaced_config_map(
            "default", {"metadata": {"name": "cm"}, "data": {"k": "v"}, "immutable": True}),
        lambda api: client.CoreV1Api(api).patch_namespaced_config_map("cm", "default", {"data": {"k": "w"}}),
        "data", "field is immutable when `immutable` is set", id="immutable configmap"),
    pytest.param(
        lambda api: client.CoreV1Api(api).create_namespaced_service(
            "default", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
        lambda api: client.CoreV1Api(api).patch_namespaced_service(
            "svc", "default", {"spec": {"clusterIP": "10.96.200.200"}}),
        "spec.clusterIPs[0]", "may not change once set", id="service clusterIP"),
    pytest.param(
        lambda api: client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": "pc"}, "value": 10}),
        lambda api: client.SchedulingV1Api(api).patch_priority_class("pc", {"value": 20}),
        "value", "may not be changed in an update", id="priority class value"),
]


@pytest.mark.parametrize(("create", "update", "field", "expected"), IMMUTABLE_CASES)
def test_updates_respect_immutable_fields(
    kube_api: client.ApiClient, create: Callable[[client.ApiClient], Any], update: Callable[[client.ApiClient], Any],
    field: str | None, expected: str | None,
) -> None:
    create(kube_api)
    if field is None:
        update(kube_api)
        return
    code, body = expect_api_error(lambda: update(kube_api))
    assert code == 422 and body["reason"] == "Invalid"
    assert any(c["field"] == field and expected in c["message"] for c in body["details"]["causes"]), body


def test_pod_admission_resolves_priority_classes(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    missing = pod_manifest("p")
    missing["spec"]["priorityClassName"] = "urgent"
    code, body = expect_api_error(lambda: core.create_namespaced_pod("default", missing))
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == 'pods "p" is forbidden: no PriorityClass with name urgent was found'
    kube_server.create_object({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": "urgent"}, "value": 1000})
    created = core.create_namespaced_pod("default", missing)
    assert created.spec.priority == 1000 and created.spec.service_account_name == "default"


def test_secret_string_data_is_stored_base64_encoded(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    created = core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"token": "abc"}})
    assert created.data == {"token": "YWJj"} and created.string_data is None and created.type == "Opaque"
    code, body = expect_api_error(lambda: core.create_namespaced_secret(
        "default", {"metadata": {"name": "t"}, "data": {"token": "not base64!"}}))
    assert code == 400 and "illegal base64 data" in body["message"]


def test_put_creates_leases_but_not_config_maps(kube_api: client.ApiClient) -> None:
    coordination, core = client.CoordinationV1Api(kube_api), client.CoreV1Api(kube_api)
    _, status, _ = coordination.replace_namespaced_lease_with_http_info(
        "leader", "default", {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "me"}})
    assert status == 201
    code, _ = expect_api_error(lambda: core.replace_namespaced_config_map("cm", "default", configmap_manifest("cm")))
    assert code == 404


def test_dry_run_validates_without_storing(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    answer = custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("dry"), dry_run="All")
    assert answer["metadata"]["name"] == "dry" and answer["spec"]["submissionMode"] == "K8sJobMode"
    assert kube_server.get_object("ray.io/v1", "RayJob", "dry", "default") is None
    code, _ = expect_api_error(lambda: custom.create_namespaced_custom_object(
        *RAY, "default", "rayjobs", rayjob_manifest("dry", backoffLimit="x"), dry_run="All"))
    assert code == 422


def test_crds_are_served_read_only_and_can_be_left_out(kube_api: client.ApiClient) -> None:
    extensions = client.ApiextensionsV1Api(kube_api)
    response = extensions.read_custom_resource_definition("localqueues.kueue.x-k8s.io", _preload_content=False)
    crd = json.loads(response.read())
    assert crd["spec"]["names"]["kind"] == "LocalQueue"
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    code, body = expect_api_error(lambda: extensions.delete_custom_resource_definition("localqueues.kueue.x-k8s.io"))
    assert code == 405 and body["reason"] == "MethodNotAllowed"

    only_ray = [c for (group, _), c in schemas.crds().items() if group == "ray.io"]
    with KubeApiServer(crds=only_ray) as bare, bare.api_client() as api:
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "ray.io" in groups and "kueue.x-k8s.io" not in groups
        code, _ = expect_api_error(lambda: client.CustomObjectsApi(api).list_cluster_custom_object(
            *KUEUE, "clusterqueues"))
        assert code == 404


BUILTIN_SCHEMA_CASES = [
    pytest.param(
        {**pod_manifest("p"), "spec": {"containers": [{"name": "c", "image": "busybox:1", "imagee": "typo"}]}},
        "Strict", 400, 'strict decoding error: unknown field "spec.containers[0].imagee"', id="unknown pod field, strict"),
    pytest.param(
        {**pod_manifest("p"), "spec": {"containers": [{"name": "c", "image": "busybox:1", "imagee": "typo"}]}},
        "Warn", 201, "", id="unknown pod field, warn"),
    pytest.param(
        {**pod_manifest("p"), "spec": {"containers": [{"name": "c", "image": "busybox:1", "imagee": "typo"}]}},
        None, 201, "", id="unknown pod field, default is warn"),
    pytest.param(
        {**pod_manifest("p"), "spec": {"containers": [{"name": "c", "image": "b:1", "ports": [{"containerPort": "80"}]}]}},
        None, 400, "json: cannot unmarshal string into Go struct field .spec.containers[0].ports[0].containerPort",
        id="wrong type is a decode error"),
    pytest.param(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"image": "b:1"}]}},
        None, 422, "spec.containers[0].name: Required value", id="missing required field"),
    pytest.param(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}, "lables": {}},
         "spec": {"containers": [{"name": "c", "image": "b:1"}]}},
        "Strict", 400, 'unknown field "metadata.lables"', id="unknown metadata field"),
]


@pytest.mark.parametrize(("manifest", "field_validation", "expected_code", "message"), BUILTIN_SCHEMA_CASES)
def test_built_in_kinds_are_checked_against_the_kubernetes_schema(
    kube_api: client.ApiClient, manifest: dict[str, Any], field_validation: str | None, expected_code: int,
    message: str,
) -> None:
    # The typed APIs refuse such bodies client-side (pydantic); the dynamic client sends them as they are.
    pods = dynamic.DynamicClient(kube_api).resources.get(api_version="v1", kind="Pod")
    query = [("fieldValidation", field_validation)] if field_validation else []
    if expected_code >= 400:
        code, body = expect_api_error(lambda: pods.create(body=manifest, namespace="default", query_params=query))
        assert code == expected_code and message in body["message"], body
        return
    response = pods.create(body=manifest, namespace="default", query_params=query, serialize=False)
    assert response.status == 201
    assert "imagee" not in json.loads(response.data)["spec"]["containers"][0]
    assert response.headers["Warning"] == '299 - "unknown field \\"spec.containers[0].imagee\\""'


def test_create_in_a_missing_namespace_is_404(kube_api: client.ApiClient) -> None:
    code, body = expect_api_error(
        lambda: client.CoreV1Api(kube_api).create_namespaced_config_map("nowhere", configmap_manifest("cm")))
    assert code == 404
    assert body["message"] == 'namespaces "nowhere" not found'
    assert body["details"] == {"name": "nowhere", "kind": "namespaces"}


# --- list and selectors -------------------------------------------------------


@pytest.fixture
def labelled_pods(kube_server: KubeApiServer) -> KubeApiServer:
    kube_server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    rows = [
        ("a", "default", {"app": "ray", "tier": "head"}, "node-1", "Running"),
        ("b", "default", {"app": "ray", "tier": "worker"}, "node-1", "Pending"),
        ("c", "default", {"app": "web"}, "node-2", "Running"),
        ("d", "other", {"app": "ray", "tier": "worker", "gpu": "true"}, "node-2", "Running"),
    ]
    for name, namespace, labels, node, phase in rows:
        manifest = pod_manifest(name, labels, node)
        manifest["metadata"]["namespace"] = namespace
        manifest["status"] = {"phase": phase}
        kube_server.create_object(manifest)
    return kube_server


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=ray", {"a", "b", "d"}),
        ("app==ray", {"a", "b", "d"}),
        ("app!=ray", {"c"}),
        ("tier in (head, worker)", {"a", "b", "d"}),
        ("tier notin (worker)", {"a", "c"}),
        ("gpu", {"d"}),
        ("!tier", {"c"}),
        ("app=ray,tier=worker", {"b", "d"}),
        ("app=ray,!gpu", {"a", "b"}),
    ],
)
def test_label_selectors_across_all_namespaces(
    labelled_pods: KubeApiServer, kube_api: client.ApiClient, selector: str, expected: set[str]
) -> None:
    listed = client.CoreV1Api(kube_api).list_pod_for_all_namespaces(label_selector=selector)
    assert {p.metadata.name for p in listed.items} == expected
    assert int(listed.metadata.resource_version) > 0


@pytest.mark.parametrize(
    ("selector", "namespace", "expected"),
    [
        ("metadata.name=a", None, {"a"}),
        ("metadata.namespace=other", None, {"d"}),
        ("spec.nodeName=node-1", None, {"a", "b"}),
        ("status.phase=Running", "default", {"a", "c"}),
        ("status.phase!=Running", None, {"b"}),
        ("spec.nodeName=node-2,status.phase=Running", None, {"c", "d"}),
    ],
)
def test_field_selectors(
    labelled_pods: KubeApiServer, kube_api: client.ApiClient, selector: str, namespace: str | None, expected: set[str]
) -> None:
    core = client.CoreV1Api(kube_api)
    if namespace:
        listed = core.list_namespaced_pod(namespace, field_selector=selector)
    else:
        listed = core.list_pod_for_all_namespaces(field_selector=selector)
    assert {p.metadata.name for p in listed.items} == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda api: client.CoreV1Api(api).list_namespaced_pod("default", field_selector="spec.foo=x"),
         "field label not supported: spec.foo"),
        (lambda api: client.CustomObjectsApi(api).list_namespaced_custom_object(
            *RAY, "default", "rayjobs", field_selector="spec.entrypoint=x"),
         '"spec.entrypoint" is not a known field selector: only "metadata.name", "metadata.namespace"'),
        (lambda api: client.CoreV1Api(api).list_namespaced_pod("default", label_selector="app in (a"),
         "unable to parse requirement"),
    ],
)
def test_bad_selectors_are_400(kube_api: client.ApiClient, call: Callable[[client.ApiClient], Any], message: str) -> None:
    code, body = expect_api_error(lambda: call(kube_api))
    assert code == 400 and body["reason"] == "BadRequest" and message in body["message"]


def test_typed_lists_drop_item_kinds_and_crd_lists_keep_them(labelled_pods: KubeApiServer, kube_api: client.ApiClient) -> None:
    response = client.CoreV1Api(kube_api).list_namespaced_pod("default", _preload_content=False)
    raw = json.loads(response.read())
    assert raw["kind"] == "PodList" and raw["apiVersion"] == "v1"
    assert all("kind" not in item for item in raw["items"])
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    items = custom.list_namespaced_custom_object(*RAY, "default", "rayjobs")["items"]
    assert items[0]["kind"] == "RayJob"


# --- status subresource, generation --------------------------------------------


def test_status_subresource_is_separate_from_the_main_resource(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    manifest = rayjob_manifest("j")
    manifest["status"] = {"jobStatus": "RUNNING"}
    created = custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", manifest)
    assert "status" not in created  # create drops status

    with_status = custom.patch_namespaced_custom_object_status(
        *RAY, "default", "rayjobs", "j", {"status": {"jobStatus": "PENDING"}, "spec": {"entrypoint": "ignored"}})
    assert with_status["status"]["jobStatus"] == "PENDING"
    assert with_status["spec"]["entrypoint"] == "python main.py"  # /status changes only status

    main = custom.patch_namespaced_custom_object(
        *RAY, "default", "rayjobs", "j", {"status": {"jobStatus": "FAILED"}, "spec": {"suspend": True}})
    assert main["status"]["jobStatus"] == "PENDING"  # the main resource ignores status
    assert main["spec"]["suspend"] is True

    core = client.CoreV1Api(kube_api)
    core.create_namespaced_pod("default", pod_manifest("p"))
    pod = core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running", "podIP": "10.0.0.9"}})
    assert (pod.status.phase, pod.status.pod_ip) == ("Running", "10.0.0.9")
    pod = core.patch_namespaced_pod("p", "default", {"status": {"phase": "Failed"}, "metadata": {"labels": {"x": "y"}}})
    assert pod.status.phase == "Running" and pod.metadata.labels == {"x": "y"}


@pytest.mark.parametrize(
    ("label", "patch", "status", "bumps"),
    [
        ("spec change", {"spec": {"suspend": True}}, False, True),
        ("label change", {"metadata": {"labels": {"a": "b"}}}, False, False),
        ("annotation change", {"metadata": {"annotations": {"a": "b"}}}, False, False),
        ("status change", {"status": {"jobStatus": "RUNNING"}}, True, False),
        ("no change", {"spec": {"entrypoint": "python main.py"}}, False, False),
    ],
)
def test_generation_moves_only_with_spec(
    kube_api: client.ApiClient, label: str, patch: dict[str, Any], status: bool, bumps: bool
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    created = custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    assert created["metadata"]["generation"] == 1
    method = custom.patch_namespaced_custom_object_status if status else custom.patch_namespaced_custom_object
    patched = method(*RAY, "default", "rayjobs", "j", patch)
    assert patched["metadata"]["generation"] == (2 if bumps else 1), label
    unchanged = label == "no change"
    assert (patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]) is unchanged


# --- patches ------------------------------------------------------------------


def test_custom_objects_take_merge_and_json_patch(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(
        *RAY, "default", "rayjobs", rayjob_manifest("j", metadata={"k": "v"}))
    merged = custom.patch_namespaced_custom_object(  # a dict goes out as merge-patch
        *RAY, "default", "rayjobs", "j", {"metadata": {"labels": {"q": "1"}}, "spec": {"metadata": None}})
    assert merged["metadata"]["labels"] == {"q": "1"} and "metadata" not in merged["spec"]
    patched = custom.patch_namespaced_custom_object(
        *RAY, "default", "rayjobs", "j",
        [{"op": "test", "path": "/spec/entrypoint", "value": "python main.py"},
         {"op": "replace", "path": "/spec/entrypoint", "value": "python other.py"},
         {"op": "add", "path": "/metadata/labels/r", "value": "2"}],
        _content_type="application/json-patch+json")
    assert patched["spec"]["entrypoint"] == "python other.py"
    assert patched["metadata"]["labels"] == {"q": "1", "r": "2"}

    code, body = expect_api_error(lambda: custom.patch_namespaced_custom_object(
        *RAY, "default", "rayjobs", "j", [{"op": "test", "path": "/spec/entrypoint", "value": "nope"}],
        _content_type="application/json-patch+json"))
    assert code == 422 and body["reason"] == "Invalid"


def test_strategic_merge_patch_is_415_for_custom_objects(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    code, body = expect_api_error(lambda: custom.patch_namespaced_custom_object(
        *RAY, "default", "rayjobs", "j", {"spec": {"suspend": True}},
        _content_type="application/strategic-merge-patch+json"))
    assert code == 415 and body["reason"] == "UnsupportedMediaType"
    assert body["message"].startswith("the body of the request was in an unknown format - accepted media types include:")


def test_strategic_merge_patch_merges_containers_by_name_on_built_in_kinds(kube_api: client.ApiClient) -> None:
    apps = client.AppsV1Api(kube_api)
    apps.create_namespaced_deployment("default", {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}},
    })
    # A dict body with the typed API goes out as strategic-merge-patch.
    patched = apps.patch_namespaced_deployment(
        "d", "default", {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}})
    images = {c.name: c.image for c in patched.spec.template.spec.containers}
    assert images == {"a": "a:1", "b": "b:2"}
    assert patched.metadata.generation == 2


JSON_PATCH_CASES = [
    pytest.param([{"op": "add", "path": "/metadata/labels", "value": {"a": "1"}}],
                 lambda o: o["metadata"]["labels"], {"a": "1"}, id="add"),
    pytest.param([{"op": "remove", "path": "/spec/entrypoint"}], lambda o: "entrypoint" in o["spec"], False,
                 id="remove"),
    pytest.param([{"op": "move", "from": "/spec/entrypoint", "path": "/spec/jobId"}],
                 lambda o: (o["spec"].get("entrypoint"), o["spec"]["jobId"]), (None, "python main.py"), id="move"),
    pytest.param([{"op": "copy", "from": "/spec/entrypoint", "path": "/spec/jobId"}],
                 lambda o: o["spec"]["jobId"], "python main.py", id="copy"),
    pytest.param([{"op": "add", "path": "/spec/entrypointResources", "value": "{}"},
                  {"op": "replace", "path": "/spec/entrypointResources", "value": '{"x": 1}'}],
                 lambda o: o["spec"]["entrypointResources"], '{"x": 1}', id="add then replace"),
]


@pytest.mark.parametrize(("operations", "read", "expected"), JSON_PATCH_CASES)
def test_json_patch_operations_on_custom_objects(
    kube_api: client.ApiClient, operations: list[dict[str, Any]], read: Callable[[dict[str, Any]], Any], expected: Any
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    patched = custom.patch_namespaced_custom_object(
        *RAY, "default", "rayjobs", "j", operations, _content_type="application/json-patch+json")
    assert read(patched) == expected


def test_strategic_merge_patch_directives(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map("default", configmap_manifest("cm", finalizers=["a.io/x"]))
    patched = core.patch_namespaced_config_map("cm", "default", {"metadata": {"finalizers": ["b.io/y"]}})
    assert patched.metadata.finalizers == ["a.io/x", "b.io/y"]  # finalizers merge as a set
    patched = core.patch_namespaced_config_map(
        "cm", "default", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x"]}})
    assert patched.metadata.finalizers == ["b.io/y"]
    apps = client.AppsV1Api(kube_api)
    apps.create_namespaced_deployment("default", {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}},
    })
    patched_deployment = apps.patch_namespaced_deployment(
        "d", "default", {"spec": {"template": {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}}})
    assert [c.name for c in patched_deployment.spec.template.spec.containers] == ["b"]


# --- finalizers and garbage collection -------------------------------------------


def test_finalizers_hold_the_object_until_removed(kube_api: client.ApiClient, kube_server: KubeApiServer) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map("default", configmap_manifest("held", finalizers=["example.com/hold"]))
    answer = core.delete_namespaced_config_map("held", "default")
    assert answer["kind"] == "ConfigMap" and answer["metadata"]["deletionTimestamp"]  # the object, not a Status
    pending = core.read_namespaced_config_map("held", "default")
    assert pending.metadata.deletion_timestamp is not None
    assert core.delete_namespaced_config_map("held", "default")  # deleting again is fine
    code, body = expect_api_error(lambda: core.patch_namespaced_config_map(
        "held", "default", {"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}))
    assert code == 422 and "no new finalizers can be added" in body["message"]
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    assert kube_server.get_object("v1", "ConfigMap", "held", "default") is None


@pytest.mark.parametrize(
    ("policy", "owner_left", "dependents_left", "references_left"),
    [
        (None, False, False, None),  # Background is the default for most kinds
        ("Background", False, False, None),
        ("Foreground", False, False, None),
        ("Orphan", False, True, False),
    ],
)
def test_garbage_collection_follows_propagation_policy(
    kube_server: KubeApiServer, kube_api: client.ApiClient,
    policy: str | None, owner_left: bool, dependents_left: bool, references_left: bool | None,
) -> None:
    owner = kube_server.create_object(rayjob_manifest("owner"))
    cluster = kube_server.create_object({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "owner-abcde", "ownerReferences": [owner_reference(owner)]},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.55.0"}]}}}},
    })
    pod = pod_manifest("owner-abcde-head")
    pod["metadata"]["ownerReferences"] = [owner_reference(cluster)]
    kube_server.create_object(pod)

    kwargs = {"propagation_policy": policy} if policy else {}
    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(*RAY, "default", "rayjobs", "owner", **kwargs)
    kube_server.wait_for_garbage_collection()

    assert (kube_server.get_object("ray.io/v1", "RayJob", "owner", "default") is not None) is owner_left
    remaining_cluster = kube_server.get_object("ray.io/v1", "RayCluster", "owner-abcde", "default")
    remaining_pod = kube_server.get_object("v1", "Pod", "owner-abcde-head", "default")
    assert (remaining_cluster is not None) is dependents_left
    assert (remaining_pod is not None) is dependents_left  # the grandchild follows its own owner
    if references_left is not None:
        assert remaining_cluster is not None
        assert ("ownerReferences" in remaining_cluster["metadata"]) is references_left


def test_background_deletion_removes_dependents_later_on_the_collector_thread(kube_server: KubeApiServer) -> None:
    owner = kube_server.create_object(configmap_manifest("owner"))
    kube_server.create_object(configmap_manifest("child", owner=owner))
    with kube_server.store.lock:  # the collector cannot run while the test holds the store
        kube_server.delete_object("v1", "ConfigMap", "owner", "default", propagation_policy="Background")
        assert kube_server.get_object("v1", "ConfigMap", "owner", "default") is None  # gone at once
        assert kube_server.get_object("v1", "ConfigMap", "child", "default") is not None  # not yet collected
    kube_server.wait_for_garbage_collection()
    assert kube_server.get_object("v1", "ConfigMap", "child", "default") is None


@pytest.mark.parametrize(("block", "owner_waits"), [(True, True), (False, False)],
                         ids=["blockOwnerDeletion", "not blocking"])
def test_foreground_deletion_waits_only_for_blocking_dependents(
    kube_server: KubeApiServer, block: bool, owner_waits: bool
) -> None:
    owner = kube_server.create_object(configmap_manifest("owner"))
    child = configmap_manifest("child", owner=owner, finalizers=["example.com/hold"])
    child["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = block
    kube_server.create_object(child)
    kube_server.delete_object("v1", "ConfigMap", "owner", "default", propagation_policy="Foreground")
    kube_server.wait_for_garbage_collection()
    assert kube_server.get_object("v1", "ConfigMap", "child", "default")["metadata"]["deletionTimestamp"]
    waiting = kube_server.get_object("v1", "ConfigMap", "owner", "default")
    assert (waiting is not None) is owner_waits
    if waiting is not None:
        assert waiting["metadata"]["deletionTimestamp"] and "foregroundDeletion" in waiting["metadata"]["finalizers"]
    kube_server.patch_object("v1", "ConfigMap", "child", {"metadata": {"finalizers": None}}, "default")
    kube_server.wait_for_garbage_collection()
    assert kube_server.get_object("v1", "ConfigMap", "child", "default") is None
    assert kube_server.get_object("v1", "ConfigMap", "owner", "default") is None


def test_orphan_deletion_holds_the_owner_until_references_are_removed(kube_server: KubeApiServer) -> None:
    owner = kube_server.create_object(configmap_manifest("owner"))
    kube_server.create_object(configmap_manifest("child", owner=owner))
    with kube_server.store.lock:
        answer = kube_server.delete_object("v1", "ConfigMap", "owner", "default", propagation_policy="Orphan")
        assert answer["metadata"]["finalizers"] == ["orphan"] and answer["metadata"]["deletionTimestamp"]
    kube_server.wait_for_garbage_collection()
    assert kube_server.get_object("v1", "ConfigMap", "owner", "default") is None
    assert "ownerReferences" not in kube_server.get_object("v1", "ConfigMap", "child", "default")["metadata"]


def test_jobs_orphan_their_pods_by_default_like_batch_v1(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    job = kube_server.create_object({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "submitter"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}},
    })
    assert job["spec"]["selector"]["matchLabels"] == {"batch.kubernetes.io/controller-uid": job["metadata"]["uid"]}
    pod = pod_manifest("submitter-x")
    pod["metadata"]["ownerReferences"] = [owner_reference(job)]
    kube_server.create_object(pod)
    client.BatchV1Api(kube_api).delete_namespaced_job("submitter", "default")
    kube_server.wait_for_garbage_collection()
    orphan = kube_server.get_object("v1", "Pod", "submitter-x", "default")
    assert orphan is not None and "ownerReferences" not in orphan["metadata"]


def test_deleting_a_namespace_deletes_its_content(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", configmap_manifest("cm"))
    terminating = core.delete_namespace("team")
    assert terminating["status"]["phase"] == "Terminating"
    kube_server.wait_for_garbage_collection()
    assert kube_server.list_objects("v1", "ConfigMap", "team") == []
    assert kube_server.get_object("v1", "Namespace", "team") is None


def test_a_terminating_namespace_refuses_new_content(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", configmap_manifest("held", finalizers=["example.com/hold"]))
    core.delete_namespace("team")
    assert core.read_namespace("team").status.phase == "Terminating"
    code, body = expect_api_error(lambda: core.create_namespaced_config_map("team", configmap_manifest("new")))
    assert code == 403
    assert body["message"] == (
        'configmaps "new" is forbidden: unable to create new content in namespace team because it is being terminated')
    assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    core.patch_namespaced_config_map("held", "team", {"metadata": {"finalizers": None}})
    kube_server.wait_for_garbage_collection()
    assert kube_server.get_object("v1", "Namespace", "team") is None


# --- watch ------------------------------------------------------------------------


def _watch_in_thread(func: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple["queue.Queue[Any]", threading.Thread]:
    events: queue.Queue[Any] = queue.Queue()

    def run() -> None:
        try:
            for event in watch.Watch().stream(func, *args, **kwargs):
                events.put((event["type"], event["raw_object"]))
        except Exception as error:  # surfaced to the test through the queue
            events.put(("EXCEPTION", error))
        events.put(("END", None))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return events, thread


@pytest.mark.realtime
def test_watch_replays_changes_after_a_resource_version_and_ends_at_the_timeout(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    start = custom.list_namespaced_custom_object(*RAY, "default", "rayjobs")["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("j"))
    custom.patch_namespaced_custom_object(*RAY, "default", "rayjobs", "j", {"spec": {"suspend": True}})
    custom.delete_namespaced_custom_object(*RAY, "default", "rayjobs", "j")

    began = time.monotonic()
    seen = [
        (e["type"], e["raw_object"]["metadata"]["name"], e["raw_object"]["metadata"]["resourceVersion"])
        for e in watch.Watch().stream(custom.list_namespaced_custom_object, *RAY, "default", "rayjobs",
                                      resource_version=start, timeout_seconds=1)
    ]
    elapsed = time.monotonic() - began
    assert [(kind, name) for kind, name, _ in seen] == [("ADDED", "j"), ("MODIFIED", "j"), ("DELETED", "j")]
    versions = [int(rv) for _, _, rv in seen]
    assert versions == sorted(versions) and len(set(versions)) == 3
    assert 0.9 <= elapsed < 3


def test_watch_without_resource_version_starts_with_the_current_objects(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map("default", configmap_manifest("existing"))
    events, _ = _watch_in_thread(core.list_namespaced_config_map, "default", timeout_seconds=2)
    assert events.get(timeout=2)[0] == "ADDED"
    core.create_namespaced_config_map("default", configmap_manifest("live"))
    kind, obj = events.get(timeout=2)
    assert (kind, obj["metadata"]["name"]) == ("ADDED", "live")
    assert obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"


def test_watch_honours_selectors_and_reports_objects_leaving_them(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap_manifest("in", labels={"team": "a"}))
    core.create_namespaced_config_map("default", configmap_manifest("out", labels={"team": "b"}))
    core.patch_namespaced_config_map("in", "default", {"metadata": {"labels": {"team": "b"}}})
    core.patch_namespaced_config_map("out", "default", {"metadata": {"labels": {"team": "a"}}})
    seen = [
        (e["type"], e["raw_object"]["metadata"]["name"])
        for e in watch.Watch().stream(core.list_namespaced_config_map, "default", label_selector="team=a",
                                      resource_version=start, timeout_seconds=1)
    ]
    assert seen == [("ADDED", "in"), ("DELETED", "in"), ("ADDED", "out")]
    by_name = [
        e["raw_object"]["metadata"]["name"]
        for e in watch.Watch().stream(core.list_namespaced_config_map, "default", field_selector="metadata.name=out",
                                      resource_version=start, timeout_seconds=1)
    ]
    assert by_name == ["out", "out"]


def test_watch_from_a_compacted_resource_version_gets_410_expired(kube_api: client.ApiClient, kube_server: KubeApiServer) -> None:
    core = client.CoreV1Api(kube_api)
    old = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap_manifest("cm"))
    kube_server.compact()
    current = core.list_namespaced_config_map("default").metadata.resource_version

    response = core.list_namespaced_config_map("default", watch=True, resource_version=old, timeout_seconds=1,
                                                _preload_content=False)
    assert response.status == 200
    lines = [json.loads(line) for line in response.read().decode().splitlines() if line]
    assert lines == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {old} ({current})", "reason": "Expired", "code": 410}}]

    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=1))
    assert caught.value.status == 410
    # From the current version on, watching works again.
    assert list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=current,
                                     timeout_seconds=1)) == []


def test_a_bounded_history_expires_old_versions_by_itself() -> None:
    with KubeApiServer(history_limit=3) as server:
        with server.api_client() as api:
            core = client.CoreV1Api(api)
            start = core.list_namespaced_config_map("default").metadata.resource_version
            for index in range(5):
                core.create_namespaced_config_map("default", configmap_manifest(f"cm-{index}"))
            with pytest.raises(ApiException) as caught:
                list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start,
                                          timeout_seconds=1))
    assert caught.value.status == 410 and "too old resource version" in caught.value.reason


@pytest.mark.realtime
def test_stop_ends_open_watches_log_streams_and_port_forwards_promptly(
    kube_server: KubeApiServer, kube_api: client.ApiClient, echo_server: int
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map("default", configmap_manifest("cm"))
    events, watcher = _watch_in_thread(core.list_namespaced_config_map, "default", timeout_seconds=60)
    assert events.get(timeout=2)[0] == "ADDED"  # the stream is open
    running_pod(kube_server, "p")
    kube_server.set_pod_log("default", "p", "line\n")
    log = core.read_namespaced_pod_log("p", "default", follow=True, _preload_content=False)
    kube_server.set_port_forward_target(lambda namespace, pod, port: ("127.0.0.1", echo_server))
    forward = portforward(core.connect_get_namespaced_pod_portforward, "p", "default", ports="8265")
    forwarded = forward.socket(8265)
    assert _round_trip(forwarded, b"up") == b"up"

    began = time.monotonic()
    kube_server.stop()
    watcher.join(timeout=5)
    assert not watcher.is_alive()
    assert log.read() == b"line\n"  # the follow stream ended
    forwarded.settimeout(5)
    assert forwarded.recv(10) == b""  # the forwarded connection was closed
    assert time.monotonic() - began < 3


# --- pod logs and port-forward ----------------------------------------------------


def test_pod_log_reads_the_text_the_test_set(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    running_pod(kube_server, "p")
    kube_server.set_pod_log("default", "p", "one\ntwo\nthree\n")
    assert core.read_namespaced_pod_log("p", "default") == "one\ntwo\nthree\n"
    assert core.read_namespaced_pod_log("p", "default", tail_lines=1) == "three\n"
    code, body = expect_api_error(lambda: core.read_namespaced_pod_log("missing", "default"))
    assert code == 404 and body["message"] == 'pods "missing" not found'


@pytest.mark.parametrize(("node", "status", "code", "text"), [
    (None, None, 200, ""),
    ("node-1", None, 400, 'container "main" in pod "p" is waiting to start: ContainerCreating'),
    ("node-1", {"phase": "Pending", "containerStatuses": [
        {"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff"}}, "ready": False, "restartCount": 0,
         "image": "busybox:1.36", "imageID": ""}]}, 400,
     'container "main" in pod "p" is waiting to start: ImagePullBackOff'),
], ids=["unscheduled", "scheduled, not started", "image pull back-off"])
def test_pod_log_of_a_pod_that_has_not_started(
    kube_server: KubeApiServer, kube_api: client.ApiClient, node: str | None, status: dict[str, Any] | None,
    code: int, text: str,
) -> None:
    manifest = pod_manifest("p", node=node)
    if status:
        manifest["status"] = status
    kube_server.create_object(manifest)
    kube_server.set_pod_log("default", "p", "never shown\n")
    core = client.CoreV1Api(kube_api)
    if code == 200:
        assert core.read_namespaced_pod_log("p", "default") == text
        return
    code_seen, body = expect_api_error(lambda: core.read_namespaced_pod_log("p", "default"))
    assert code_seen == code and body["message"] == text


def test_pod_log_needs_a_container_name_when_the_pod_has_several(kube_server: KubeApiServer,
                                                                  kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    manifest = pod_manifest("p", node="node-1", containers=("ray-head", "sidecar"))
    manifest["status"] = {"phase": "Running"}
    kube_server.create_object(manifest)
    code, body = expect_api_error(lambda: core.read_namespaced_pod_log("p", "default"))
    assert code == 400
    assert body["message"] == "a container name must be specified for pod p, choose one of: [ray-head sidecar]"
    assert core.read_namespaced_pod_log("p", "default", container="ray-head") == ""


def test_pod_log_follow_streams_until_the_log_is_closed(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    running_pod(kube_server, "p")
    kube_server.set_pod_log("default", "p", "first\n")
    lines: queue.Queue[str | None] = queue.Queue()

    def follow() -> None:
        for line in watch.Watch().stream(core.read_namespaced_pod_log, "p", "default"):
            lines.put(line)
        lines.put(None)

    threading.Thread(target=follow, daemon=True).start()
    assert lines.get(timeout=2) == "first"
    kube_server.append_pod_log("default", "p", "second\n")
    assert lines.get(timeout=2) == "second"
    kube_server.close_pod_log("default", "p")
    assert lines.get(timeout=2) is None


@pytest.mark.realtime
def test_pod_log_follow_ends_when_the_pod_is_deleted(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    running_pod(kube_server, "p")
    response = core.read_namespaced_pod_log("p", "default", follow=True, _preload_content=False)
    core.delete_namespaced_pod("p", "default")
    began = time.monotonic()
    assert response.read() == b""
    assert time.monotonic() - began < 3


@pytest.fixture
def echo_server() -> Iterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve(connection: socket.socket) -> None:
        with connection:
            while data := connection.recv(65536):
                connection.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def _round_trip(sock: Any, payload: bytes) -> bytes:
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def test_port_forward_round_trip_to_the_resolved_target(
    kube_server: KubeApiServer, kube_api: client.ApiClient, echo_server: int
) -> None:
    core = client.CoreV1Api(kube_api)
    running_pod(kube_server, "head")
    asked: list[tuple[str, str, int]] = []

    def resolve(namespace: str, pod: str, port: int) -> tuple[str, int]:
        asked.append((namespace, pod, port))
        return "127.0.0.1", echo_server

    kube_server.set_port_forward_target(resolve)
    forward = portforward(core.connect_get_namespaced_pod_portforward, "head", "default", ports="8265")
    sock = forward.socket(8265)
    payload = b"hello over v4.channel.k8s.io " * 5000  # several frames each way
    assert _round_trip(sock, payload) == payload
    assert forward.error(8265) is None
    sock.close()
    assert asked == [("default", "head", 8265)]


def test_port_forward_defaults_to_the_pod_ip_and_same_port(
    kube_server: KubeApiServer, kube_api: client.ApiClient, echo_server: int
) -> None:
    manifest = pod_manifest("head")
    manifest["status"] = {"podIP": "127.0.0.1", "phase": "Running"}
    kube_server.create_object(manifest)
    core = client.CoreV1Api(kube_api)
    forward = portforward(core.connect_get_namespaced_pod_portforward, "head", "default", ports=str(echo_server))
    sock = forward.socket(echo_server)
    assert _round_trip(sock, b"ping") == b"ping"
    sock.close()


@pytest.mark.parametrize(("node", "phase", "code", "message"), [
    (None, None, 400, "pod head does not have a host assigned"),
    ("node-1", "Pending", 500, "failed to find sandboxID for pod head_default("),
    ("node-1", "Succeeded", 500, "failed to find sandboxID for pod head_default("),
], ids=["unscheduled", "pending", "completed"])
def test_port_forward_to_a_pod_that_is_not_running_fails_the_handshake(
    kube_server: KubeApiServer, kube_api: client.ApiClient, node: str | None, phase: str | None, code: int,
    message: str,
) -> None:
    manifest = pod_manifest("head", node=node)
    if phase:
        manifest["status"] = {"phase": phase}
    kube_server.create_object(manifest)
    kube_server.set_port_forward_target(lambda namespace, pod, port: ("127.0.0.1", 9))
    core = client.CoreV1Api(kube_api)
    with pytest.raises(ApiException) as caught:
        portforward(core.connect_get_namespaced_pod_portforward, "head", "default", ports="8265")
    assert str(code) in str(caught.value.reason) or caught.value.status == code
    assert message in str(caught.value.body or caught.value.reason)


def test_port_forward_to_a_missing_pod_fails_the_handshake_with_404(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    with pytest.raises(ApiException) as caught:
        portforward(core.connect_get_namespaced_pod_portforward, "missing", "default", ports="8265")
    assert "404" in str(caught.value.reason)


def test_port_forward_reports_an_unreachable_target_on_the_error_channel(
    kube_server: KubeApiServer, kube_api: client.ApiClient
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there any more
    kube_server.set_port_forward_target(lambda namespace, pod, requested: ("127.0.0.1", port))
    core = client.CoreV1Api(kube_api)
    running_pod(kube_server, "head")
    forward = portforward(core.connect_get_namespaced_pod_portforward, "head", "default", ports="8265")
    sock = forward.socket(8265)
    sock.settimeout(3)
    assert sock.recv(10) == b""
    assert "error forwarding port 8265 to pod head" in (forward.error(8265) or "")


def test_websocket_server_side_of_rfc_6455() -> None:
    from kubesim.websocket import OP_BINARY, OP_CLOSE, OP_PONG, WebSocketConnection, accept_key

    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455, section 1.3

    def masked(opcode: int, payload: bytes, fin: bool = True) -> bytes:
        mask = b"\x01\x02\x03\x04"
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return bytes([(0x80 if fin else 0) | opcode, 0x80 | len(payload)]) + mask + body

    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        ws = WebSocketConnection(server_side.makefile("rb"), server_side)
        client_side.sendall(masked(0x9, b"hi") + masked(OP_BINARY, b"\x00ab", fin=False) + masked(0x0, b"cd"))
        assert ws.receive() == (OP_BINARY, b"\x00abcd")  # fragments joined, ping answered on the way
        assert client_side.recv(4) == bytes([0x80 | OP_PONG, 2]) + b"hi"
        client_side.sendall(masked(OP_CLOSE, b"\x03\xe8"))
        assert ws.receive() is None
        assert client_side.recv(4) == bytes([0x80 | OP_CLOSE, 2]) + b"\x03\xe8"

    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        ws = WebSocketConnection(server_side.makefile("rb"), server_side)
        client_side.sendall(bytes([0x80 | OP_BINARY, 1]) + b"x")  # unmasked: a protocol error
        assert ws.receive() is None
        frame = client_side.recv(64)
        assert frame[0] == 0x80 | OP_CLOSE and frame[2:4] == b"\x03\xea"  # close 1002, protocol error


# --- extension points -------------------------------------------------------------


def test_mutating_hook_changes_objects_before_validation_and_may_deny(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    calls: list[str] = []

    def kueue_like(obj: dict[str, Any], operation: str) -> None:
        calls.append(operation)
        if obj["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name") and operation == "CREATE":
            obj["spec"]["suspend"] = True
        if obj["spec"].get("entrypoint") == "forbidden":
            raise AdmissionDenied("vrayjob.kb.io", "entrypoint is not allowed")

    kube_server.add_mutating_hook("ray.io", "RayJob", kueue_like)
    custom = client.CustomObjectsApi(kube_api)
    queued = rayjob_manifest("queued")
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    assert custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", queued)["spec"]["suspend"] is True
    plain = custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", rayjob_manifest("plain"))
    assert "suspend" not in plain["spec"]
    custom.patch_namespaced_custom_object(*RAY, "default", "rayjobs", "plain", {"spec": {"suspend": False}})
    assert calls == ["CREATE", "CREATE", "UPDATE"]

    code, body = expect_api_error(lambda: custom.create_namespaced_custom_object(
        *RAY, "default", "rayjobs", rayjob_manifest("denied", entrypoint="forbidden")))
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == 'admission webhook "vrayjob.kb.io" denied the request: entrypoint is not allowed'


def test_custom_handler_answers_an_aggregated_api_path(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    def pending(match: Any, query: dict[str, list[str]], body: bytes | None) -> tuple[int, dict[str, Any]]:
        return 200, {"kind": "PendingWorkloadsSummary", "items": [{"metadata": {"name": match["cq"]}}],
                     "limit": query.get("limit", ["?"])[0]}

    kube_server.add_handler(
        "GET", r"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/(?P<cq>[^/]+)/pendingworkloads", pending)
    method, url, headers, _, _ = kube_api.param_serialize(
        "GET", "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{name}/pendingworkloads",
        path_params={"name": "gpu-cq"}, query_params=[("limit", "10")],
        header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
    response = kube_api.call_api(method, url, headers)
    response.read()
    assert response.status == 200
    assert json.loads(response.data) == {
        "kind": "PendingWorkloadsSummary", "items": [{"metadata": {"name": "gpu-cq"}}], "limit": "10"}


def test_direct_access_goes_through_the_same_logic(kube_server: KubeApiServer) -> None:
    node = kube_server.create_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                      "status": {"capacity": {"amd.com/gpu": "8"}}})
    assert node["status"]["capacity"] == {"amd.com/gpu": "8"}  # nodes keep status on create
    pod = kube_server.create_object({**pod_manifest("p"), "status": {"phase": "Running"}})
    assert pod["status"]["phase"] == "Running"  # written through /status after the create
    assert pod["spec"]["restartPolicy"] == "Always"  # defaults apply
    updated = kube_server.update_status({**pod, "status": {"phase": "Succeeded"}})
    assert updated["status"]["phase"] == "Succeeded"
    with pytest.raises(ApiError) as conflict:
        kube_server.update_status({**pod, "status": {"phase": "Failed"}})  # pod's resourceVersion is stale
    assert conflict.value.code == 409
    assert [p["metadata"]["name"] for p in kube_server.list_objects("v1", "Pod", "default")] == ["p"]
    assert kube_server.list_objects("v1", "Pod", "default", label_selector="app=none") == []
    with pytest.raises(ApiError) as invalid:
        kube_server.create_object(rayjob_manifest("bad", backoffLimit="x"))
    assert invalid.value.code == 422
    kube_server.delete_object("v1", "Pod", "p", "default")
    assert kube_server.get_object("v1", "Pod", "p", "default") is None


def test_a_status_report_reads_again_when_another_writer_got_there_first(kube_server: KubeApiServer) -> None:
    """objects.report_status: a write between its read and its update is a 409, read again, not a failure."""
    kube_server.create_object(pod_manifest("raced"))
    real_get = kube_server.get_object
    raced = []

    def get_then_another_writer(*args: Any, **kwargs: Any) -> Any:
        obj = real_get(*args, **kwargs)
        if not raced:  # another controller updates the pod after the first read
            raced.append(kube_server.update_status({**obj, "status": {"phase": "Pending"}}))
        return obj

    kube_server.get_object = get_then_another_writer  # type: ignore[method-assign]
    reported = report_status(kube_server, "v1", "Pod", "raced", {"phase": "Running"})
    assert raced and reported["status"]["phase"] == "Running"
    assert real_get("v1", "Pod", "raced", "default")["status"]["phase"] == "Running"


# --- paged lists ----------------------------------------------------------------------


def test_paged_lists_show_the_first_pages_snapshot(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    for name in ("cm-1", "cm-2", "cm-3", "cm-4", "cm-5"):
        core.create_namespaced_config_map("default", configmap_manifest(name, labels={"set": "a"}))
    first = core.list_namespaced_config_map("default", limit=2)
    assert [i.metadata.name for i in first.items] == ["cm-1", "cm-2"]
    assert first.metadata.remaining_item_count == 3 and first.metadata._continue
    # Changes after the first page do not show up in later pages.
    core.delete_namespaced_config_map("cm-4", "default")
    core.create_namespaced_config_map("default", configmap_manifest("cm-6"))
    second = core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    assert [i.metadata.name for i in second.items] == ["cm-3", "cm-4"]
    assert second.metadata.resource_version == first.metadata.resource_version
    third = core.list_namespaced_config_map("default", limit=2, _continue=second.metadata._continue)
    assert [i.metadata.name for i in third.items] == ["cm-5"]
    assert third.metadata._continue is None and third.metadata.remaining_item_count is None
    # A selector: pages hold matching items only, and no remaining count is given.
    selected = core.list_namespaced_config_map("default", limit=1, label_selector="set=a")
    assert [i.metadata.name for i in selected.items] == ["cm-1"]
    assert selected.metadata._continue and selected.metadata.remaining_item_count is None


def test_a_continue_token_older_than_the_history_is_410_expired(kube_server: KubeApiServer,
                                                                 kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    for name in ("cm-1", "cm-2", "cm-3"):
        core.create_namespaced_config_map("default", configmap_manifest(name))
    first = core.list_namespaced_config_map("default", limit=1)
    core.create_namespaced_config_map("default", configmap_manifest("cm-0"))
    kube_server.compact()
    code, body = expect_api_error(lambda: core.list_namespaced_config_map(
        "default", limit=1, _continue=first.metadata._continue))
    assert code == 410 and body["reason"] == "Expired"
    assert body["message"].startswith("The provided continue parameter is too old to display a consistent list result.")
    rest = core.list_namespaced_config_map("default", _continue=body["metadata"]["continue"])
    assert [i.metadata.name for i in rest.items] == ["cm-2", "cm-3"]  # inconsistent: from now, after cm-1
    code, body = expect_api_error(lambda: core.list_namespaced_config_map("default", _continue="garbage"))
    assert code == 400


# --- pod validation and the Priority admission plugin ---------------------------------------------

GPU = "nvidia.com/gpu"
QUANTITY_REGEX = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
HALF_A_GPU = ('resource.Quantity{i:resource.int64Amount{value:5, scale:-1}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, '
              's:"", Format:"DecimalSI"}')


def pod_with(name: str, container: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    manifest = pod_manifest(name)
    manifest["spec"]["containers"][0].update(container or {})
    manifest["spec"].update(spec)
    return manifest


def template_of(kind: str, name: str, container: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A Job, Deployment or PodTemplate whose one container is `container` (api version, manifest)."""
    pod_spec = {"containers": [{"name": "c", "image": "busybox:1.36", **container}]}
    if kind == "PodTemplate":
        return "v1", {"apiVersion": "v1", "kind": kind, "metadata": {"name": name},
                      "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}
    pod_spec["restartPolicy"] = "Never" if kind == "Job" else "Always"
    spec: dict[str, Any] = {"template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}
    if kind == "Deployment":
        spec["selector"] = {"matchLabels": {"app": name}}
    api_version = "batch/v1" if kind == "Job" else "apps/v1"
    return api_version, {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


POD_VALIDATION_CASES = [
    pytest.param(pod_with("q", {"resources": {"limits": {"cpu": "2x"}}}), 400,
                 f"Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression "
                 f"'{QUANTITY_REGEX}'", id="a quantity that does not parse"),
    pytest.param(pod_with("s", {"resources": {"requests": {"memory": "1MM"}}}), 400,
                 "Pod in version \"v1\" cannot be handled as a Pod: unable to parse quantity's suffix",
                 id="a quantity with an unknown suffix"),
    pytest.param(pod_with("f", {"resources": {"limits": {GPU: "0.5"}}}), 422,
                 f'Pod "f" is invalid: [spec.containers[0].resources.limits[{GPU}]: Invalid value: {HALF_A_GPU}: must be '
                 f"an integer, spec.containers[0].resources.requests[{GPU}]: Invalid value: {HALF_A_GPU}: must be an "
                 "integer]", id="a fractional extended resource (the request defaults to the limit)"),
    pytest.param(pod_with("ne", {"resources": {"limits": {GPU: 2}, "requests": {GPU: 1}}}), 422,
                 f'Pod "ne" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
                 f"{GPU} limit of 2", id="an extended resource request below its limit"),
    pytest.param(pod_with("rq", {"resources": {"requests": {GPU: 1}}}), 422,
                 'Pod "rq" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for non '
                 "overcommitable resources", id="an extended resource request without a limit"),
    pytest.param(pod_with("cpu", {"resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1500m"}}}), 422,
                 'Pod "cpu" is invalid: spec.containers[0].resources.requests: Invalid value: "1500m": must be less '
                 "than or equal to cpu limit of 1", id="a cpu request above its limit"),
    pytest.param(pod_with("neg", {"resources": {"requests": {"memory": "-1Gi"}}}), 422,
                 'Pod "neg" is invalid: spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be '
                 "greater than or equal to 0", id="a negative quantity"),
    pytest.param(pod_with("t", tolerations=[{"key": "k", "operator": "Exists", "value": "v", "effect": "NoSchedule"}]),
                 422, 'Pod "t" is invalid: spec.tolerations[0].operator: Invalid value: core.Toleration{Key:"k", '
                 'Operator:"Exists", Value:"v", Effect:"NoSchedule", TolerationSeconds:(*int64)(nil)}: value must be '
                 "empty when `operator` is 'Exists'", id="a toleration with operator Exists and a value"),
    pytest.param(pod_with("te", tolerations=[{"key": "k", "operator": "Equal", "value": "v", "effect": "Sometimes"}]),
                 422, 'Pod "te" is invalid: spec.tolerations[0].effect: Unsupported value: "Sometimes": supported '
                 'values: "NoSchedule", "PreferNoSchedule", "NoExecute"', id="a toleration with an unknown effect"),
    pytest.param(pod_with("ts", tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule",
                                              "tolerationSeconds": 30}]),
                 422, 'Pod "ts" is invalid: spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be '
                 "'NoExecute' when `tolerationSeconds` is set", id="tolerationSeconds without NoExecute"),
    pytest.param(pod_with("tk", tolerations=[{"operator": "Equal", "value": "v"}]),
                 422, 'Pod "tk" is invalid: spec.tolerations[0].operator: Invalid value: "Equal": operator must be '
                 'Exists when `key` is empty, which means "match all values and all keys"',
                 id="a toleration without a key that is not Exists"),
    pytest.param(pod_with("ns", nodeSelector={"gpu type": "a100"}), 422,
                 'Pod "ns" is invalid: spec.nodeSelector: Invalid value: "gpu type": name part must consist of '
                 "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                 "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')", id="a node selector key that is not a label key"),
    pytest.param(pod_with("aff", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In"}]}]}}}),
                 422, 'Pod "aff" is invalid: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution'
                 ".nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` "
                 "is 'In' or 'NotIn'", id="a node affinity requirement In without values"),
    pytest.param(pod_with("w", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                     {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}),
                 422, 'Pod "w" is invalid: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution'
                 "[0].weight: Invalid value: 0: must be in the range 1-100", id="a preferred term of weight 0"),
]


@pytest.mark.parametrize(("manifest", "code", "message"), POD_VALIDATION_CASES)
def test_pods_are_validated_as_kube_apiserver_does(
    kube_api: client.ApiClient, manifest: dict[str, Any], code: int, message: str
) -> None:
    pods = dynamic.DynamicClient(kube_api).resources.get(api_version="v1", kind="Pod")
    got, body = expect_api_error(lambda: pods.create(body=manifest, namespace="default"))
    assert (got, body["reason"], body["message"]) == (code, "BadRequest" if code == 400 else "Invalid", message)


@pytest.mark.parametrize("kind", ["Job", "Deployment", "PodTemplate"])
def test_pod_templates_are_validated_like_pods(kube_api: client.ApiClient, kind: str) -> None:
    api_version, manifest = template_of(kind, "tpl", {"resources": {"requests": {GPU: 1}}})
    resource = dynamic.DynamicClient(kube_api).resources.get(api_version=api_version, kind=kind)
    code, body = expect_api_error(lambda: resource.create(body=manifest, namespace="default"))
    path = "template.spec" if kind == "PodTemplate" else "spec.template.spec"
    group = api_version.rpartition("/")[0]
    assert (code, body["message"]) == (422, f'{kind}{"." + group if group else ""} "tpl" is invalid: '
                                            f"{path}.containers[0].resources.limits: Required value: Limit must be set "
                                            "for non overcommitable resources")


def test_custom_resources_get_their_schema_only_not_the_pod_rules(kube_api: client.ApiClient) -> None:
    # A real server validates a RayJob's pod templates against the CRD schema alone.
    job = rayjob_manifest("frac", rayClusterSpec={"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
        "containers": [{"name": "head", "image": "ray:2", "resources": {"limits": {GPU: "0.5"}}}]}}}})
    created = client.CustomObjectsApi(kube_api).create_namespaced_custom_object(*RAY, "default", "rayjobs", job)
    assert created["metadata"]["name"] == "frac"


@pytest.mark.parametrize(("classes", "spec", "code", "outcome"), [
    pytest.param([], {"priority": 1000}, 403,
                 'pods "p" is forbidden: the integer value of priority (1000) must not be provided in pod spec; '
                 "priority admission controller computed 0 from the given PriorityClass name",
                 id="a priority without a class"),
    pytest.param([], {"priority": 0}, 201, (0, None, "PreemptLowerPriority"),
                 id="priority 0 without a class is what the plugin computes"),
    pytest.param([("urgent", 1000, False)], {"priorityClassName": "urgent", "priority": 5}, 403,
                 'pods "p" is forbidden: the integer value of priority (5) must not be provided in pod spec; '
                 "priority admission controller computed 1000 from the given PriorityClass name",
                 id="a priority that differs from the class"),
    pytest.param([("urgent", 1000, False)], {"priorityClassName": "urgent", "preemptionPolicy": "Never"}, 403,
                 'pods "p" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
                 "priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
                 id="a preemptionPolicy that differs from the class"),
    pytest.param([("high", 100, True), ("low", 10, True)], {}, 201, (10, "low", "PreemptLowerPriority"),
                 id="the lowest global default applies"),
])
def test_priority_admission_plugin(
    kube_server: KubeApiServer, kube_api: client.ApiClient, classes: list[tuple[str, int, bool]],
    spec: dict[str, Any], code: int, outcome: Any,
) -> None:
    for name, value, default in classes:
        kube_server.create_object({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": name}, "value": value, "globalDefault": default})
    pods = dynamic.DynamicClient(kube_api).resources.get(api_version="v1", kind="Pod")
    manifest = pod_with("p", **spec)
    if code == 403:
        got, body = expect_api_error(lambda: pods.create(body=manifest, namespace="default"))
        assert (got, body["reason"], body["message"]) == (403, "Forbidden", outcome)
        return
    created = pods.create(body=manifest, namespace="default").to_dict()["spec"]
    assert (created["priority"], created.get("priorityClassName"), created["preemptionPolicy"]) == outcome


# --- media types: what the fake does not speak is 415, never a silent misreading ----------------------


def test_a_protobuf_body_is_415(kube_api: client.ApiClient) -> None:
    answer = kube_api.rest_client.pool_manager.request(
        "POST", kube_api.configuration.host + "/api/v1/namespaces/default/configmaps", body=b"k8s\x00\n\x0f",
        headers={"Content-Type": "application/vnd.kubernetes.protobuf", "Authorization": f"Bearer {TOKEN}"})
    body = json.loads(answer.data)
    assert (answer.status, body["reason"]) == (415, "UnsupportedMediaType")
    assert body["message"] == ("the body of the request was in an unknown format - accepted media types include: "
                               "application/json, application/yaml")


def test_server_side_apply_is_415_naming_what_it_speaks(kube_api: client.ApiClient) -> None:
    """kubectl's apply runs against the real API server (tests/e2e/test_kubectl_client.py); here it is refused."""
    custom = client.CustomObjectsApi(kube_api)
    with pytest.raises(client.ApiException) as raised:
        custom.patch_namespaced_custom_object(*RAY, "default", "rayjobs", "applied", rayjob_manifest("applied"),
                                              field_manager="kubectl", _content_type="application/apply-patch+yaml")
    body = json.loads(raised.value.body)
    assert (raised.value.status, body["reason"]) == (415, "UnsupportedMediaType")
    assert "application/merge-patch+json" in body["message"]
