"""Server-side apply and managedFields in the test API server, through the official client.

Why: controllers and CLIs that apply their objects (`fieldManager`, `force`)
must meet the same ownership rules and 409 conflicts as on a real server.
What this deliberately does not do: compare merge results item by item with
structured-merge-diff's ordering (README lists that difference).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from kubesim import ssa
from kubesim.server import KubeApiServer

APPLY = "application/apply-patch+yaml"


def _cm(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", **meta}, "data": data}


def _apply(api: client.ApiClient, body: dict[str, Any], manager: str, force: bool | None = None) -> Any:
    kwargs: dict[str, Any] = {"field_manager": manager, "_content_type": APPLY}
    if force is not None:
        kwargs["force"] = force
    return client.CoreV1Api(api).patch_namespaced_config_map("cfg", "default", body, **kwargs)


def _owners(obj: Any) -> dict[str, set[str]]:
    """manager -> owned paths, as text."""
    entries = obj.metadata.managed_fields if hasattr(obj, "metadata") else obj["metadata"]["managedFields"]
    out = {}
    for entry in entries or []:
        raw = entry if isinstance(entry, dict) else client.ApiClient().sanitize_for_serialization(entry)
        out[raw["manager"]] = {ssa.path_text(p) for p in ssa.from_fields_v1(raw["fieldsV1"])}
    return out


def _error(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body)


def test_apply_creates_the_object_and_records_the_manager(kube_api: client.ApiClient) -> None:
    _, status, _ = client.CoreV1Api(kube_api).patch_namespaced_config_map_with_http_info(
        "cfg", "default", _cm({"a": "1"}, labels={"app": "x"}), field_manager="deployer", _content_type=APPLY)
    assert status == 201
    created = client.CoreV1Api(kube_api).read_namespaced_config_map("cfg", "default")
    assert created.data == {"a": "1"}
    entry = created.metadata.managed_fields[0]
    assert (entry.manager, entry.operation, entry.api_version, entry.fields_type) == (
        "deployer", "Apply", "v1", "FieldsV1")
    assert entry.fields_v1 == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}


@pytest.mark.parametrize(("query", "content_type", "message"), [
    ({}, APPLY, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'),
    ({"field_manager": "m", "force": True}, "application/merge-patch+json",
     'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'),
], ids=["apply without fieldManager", "force on a merge patch"])
def test_patch_options_are_validated(kube_api: client.ApiClient, query: dict[str, Any], content_type: str,
                                     message: str) -> None:
    client.CoreV1Api(kube_api).create_namespaced_config_map("default", _cm({"a": "1"}))
    code, body = _error(lambda: client.CoreV1Api(kube_api).patch_namespaced_config_map(
        "cfg", "default", _cm({"a": "2"}), _content_type=content_type, **query))
    assert code == 422 and body["message"] == message


def test_a_field_owned_by_another_applier_conflicts_unless_forced(kube_api: client.ApiClient) -> None:
    _apply(kube_api, _cm({"a": "1", "b": "1"}), "first")
    code, body = _error(lambda: _apply(kube_api, _cm({"a": "2"}), "second"))
    assert code == 409 and body["reason"] == "Conflict"
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "first": .data.a'
    assert body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "first"', "field": ".data.a"}]
    code, body = _error(lambda: _apply(kube_api, _cm({"a": "2", "b": "2"}), "second"))
    assert body["message"] == ('Apply failed with 2 conflicts: conflicts with "first":\n- .data.a\n- .data.b')
    forced = _apply(kube_api, _cm({"a": "2"}), "second", force=True)
    assert forced.data == {"a": "2", "b": "1"}
    assert _owners(forced) == {"first": {".data.b"}, "second": {".data.a"}}
    same = _apply(kube_api, _cm({"b": "1"}), "third")  # the same value is shared, not a conflict
    assert _owners(same)["third"] == {".data.b"}


def test_fields_changed_by_an_update_conflict_with_appliers(kube_api: client.ApiClient) -> None:
    _apply(kube_api, _cm({"a": "1"}), "deployer")
    client.CoreV1Api(kube_api).patch_namespaced_config_map("cfg", "default", {"data": {"a": "edited"}},
                                                           field_manager="kubectl-edit")
    code, body = _error(lambda: _apply(kube_api, _cm({"a": "1"}), "deployer"))
    assert code == 409
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.a'


def test_fields_an_applier_stops_applying_are_removed_unless_someone_else_owns_them(
    kube_api: client.ApiClient,
) -> None:
    _apply(kube_api, _cm({"a": "1", "b": "1", "c": "1"}), "first")
    _apply(kube_api, _cm({"c": "1"}), "second")
    result = _apply(kube_api, _cm({"a": "1"}), "first")
    assert result.data == {"a": "1", "c": "1"}  # b went; c stays, "second" still owns it


def test_lists_merge_by_their_keys_and_sets_union(kube_api: client.ApiClient) -> None:
    def deployment(container: str, finalizer: str) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "finalizers": [finalizer]},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": container, "image": f"{container}:1"}]}}}}

    apps = client.AppsV1Api(kube_api)
    apps.patch_namespaced_deployment("web", "default", deployment("main", "example.com/a"), field_manager="one",
                                     _content_type=APPLY)
    merged = apps.patch_namespaced_deployment("web", "default", deployment("sidecar", "example.com/b"),
                                              field_manager="two", _content_type=APPLY)
    assert [c.name for c in merged.spec.template.spec.containers] == ["main", "sidecar"]
    assert merged.metadata.finalizers == ["example.com/a", "example.com/b"]
    owners = _owners(merged)
    assert '.spec.template.spec.containers[name="sidecar"].image' in owners["two"]
    assert '.spec.template.spec.containers[name="main"]' in owners["one"]
    assert ".metadata.finalizers[\"example.com/b\"]" in owners["two"]


def test_custom_resources_apply_through_the_dynamic_client(kube_api: client.ApiClient) -> None:
    rayjobs = dynamic.DynamicClient(kube_api).resources.get(api_version="ray.io/v1", kind="RayJob")
    body = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"entrypoint": "python a.py"}}
    created = rayjobs.server_side_apply(body=body, field_manager="submitter")
    assert created.spec.entrypoint == "python a.py"
    body["spec"]["entrypoint"] = "python b.py"
    with pytest.raises(ApiException) as caught:
        rayjobs.server_side_apply(body=body, field_manager="other")
    assert caught.value.status == 409
    updated = rayjobs.server_side_apply(body=body, field_manager="other", force_conflicts=True)
    assert updated.spec.entrypoint == "python b.py"
    status = rayjobs.status.patch(name="j", namespace="default", body={"status": {"jobStatus": "RUNNING"}},
                                  content_type="application/merge-patch+json", field_manager="kuberay")
    owners = _owners(status.to_dict())
    # The status write owns what it changed, defaults the server filled in included; never spec.
    assert ".status.jobStatus" in owners["kuberay"] and all(p.startswith(".status.") for p in owners["kuberay"])
    assert ".spec.entrypoint" in owners["other"]


def test_non_apply_writes_record_update_entries(kube_server: KubeApiServer, kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map("default", _cm({"a": "1"}), field_manager="creator")
    patched = core.patch_namespaced_config_map("cfg", "default", {"data": {"b": "2"}})
    entries = {e.manager: e for e in patched.metadata.managed_fields}
    assert entries["creator"].operation == "Update" and entries["creator"].fields_v1 == {"f:data": {"f:a": {}}}
    assert entries["OpenAPI-Generator"].fields_v1 == {"f:data": {"f:b": {}}}  # the User-Agent's first segment
