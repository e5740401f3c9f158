"""CRD CEL rules in the test API server: compiled for every release, evaluated as kube-apiserver does.

Why: Kueue's and KubeRay's CRDs carry `x-kubernetes-validations` rules that a
real API server enforces; objects that break them must be refused here as there.
What this deliberately does not do: test cel-python itself, or rules of CRDs
the project does not use.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubesim import schemas
from kubesim import cel
from kubesim.server import KubeApiServer

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _rules(schema: Any) -> list[str]:
    found: list[str] = []
    if isinstance(schema, dict):
        found += [r["rule"] for r in schema.get("x-kubernetes-validations") or []]
        for value in schema.values():
            found += _rules(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _rules(value)
    return found


@pytest.mark.parametrize("release", schemas.RELEASES)
def test_every_rule_of_every_release_compiles(release: str) -> None:
    crds = schemas.crds(*schemas.release_pair(release)).values()
    count = 0
    for crd in crds:
        trees = cel.compile_crd(crd)
        assert set(trees) == set(schemas.served_versions(crd))
        count += len(_rules(crd["spec"]["versions"]))
    assert count > 20  # the Kueue and KubeRay CRDs do carry rules


def test_a_rule_the_server_cannot_evaluate_stops_it_from_starting() -> None:
    crd = copy.deepcopy(schemas.crds()[("ray.io", "RayJob")])
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    version["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = [
        {"rule": "self.entrypoint.frobnicate()", "message": "x"}]
    with pytest.raises(cel.UnsupportedRule, match="frobnicate"):
        KubeApiServer(crds=[crd])


def _cluster_queue(**spec: Any) -> dict[str, Any]:
    base = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {**base, **spec}}


def _workload(**pod_set: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "wl"},
            "spec": {"queueName": "lq", "podSets": [{"name": "head", "count": 1, **pod_set, "template": {
                "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}]}}


def _rayjob(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
            "spec": {"entrypoint": "python x.py", **spec}}


CREATE_CASES = [
    pytest.param(
        _cluster_queue(resourceGroups=[{"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]),
        'ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec.resourceGroups[0]: Invalid value: "object": '
        "flavors must have the same number of resources as the coveredResources", id="covered resources"),
    pytest.param(
        _cluster_queue(resourceGroups=[{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": "8", "borrowingLimit": "2"}]}]}]),
        'ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec: Invalid value: "object": '
        "borrowingLimit must be nil when cohort is empty", id="borrowing without cohort"),
    pytest.param(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"},
         "spec": {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "x", "effect": "NoSchedule",
                                   "tolerationSeconds": 5}]}},
        'ResourceFlavor.kueue.x-k8s.io "rf" is invalid: spec.tolerations: Invalid value: "array": '
        "effect must be 'NoExecute' when 'tolerationSeconds' is set", id="toleration seconds"),
    pytest.param(
        _workload(minCount=2),
        'Workload.kueue.x-k8s.io "wl" is invalid: spec.podSets[0]: Invalid value: "object": '
        "minCount should be positive and less or equal to count", id="workload minCount"),
    pytest.param(
        _rayjob(deletionStrategy={"onSuccess": {"policy": "DeleteCluster"}}),
        'RayJob.ray.io "j" is invalid: spec.deletionStrategy: Invalid value: "object": deletionStrategy requires '
        "either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)", id="rayjob deletion"),
    pytest.param(
        _rayjob(managedBy="someone/else"),
        'RayJob.ray.io "j" is invalid: spec.managedBy: Invalid value: "string": the managedBy field value must be '
        "either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'", id="rayjob managedBy"),
]


@pytest.mark.parametrize(("manifest", "message"), CREATE_CASES)
def test_objects_breaking_a_rule_are_422_with_the_real_message(
    kube_api: client.ApiClient, manifest: dict[str, Any], message: str
) -> None:
    group, version = manifest["apiVersion"].split("/")
    plural = {"ClusterQueue": "clusterqueues", "ResourceFlavor": "resourceflavors", "Workload": "workloads",
              "RayJob": "rayjobs"}[manifest["kind"]]
    custom = client.CustomObjectsApi(kube_api)
    assert schemas.schema_errors(manifest) == []  # only the rule is broken
    with pytest.raises(ApiException) as caught:
        if manifest["kind"] in ("Workload", "RayJob"):
            custom.create_namespaced_custom_object(group, version, "default", plural, manifest)
        else:
            custom.create_cluster_custom_object(group, version, plural, manifest)
    body = json.loads(caught.value.body)
    assert caught.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"] == message
    assert body["details"]["causes"][0]["reason"] == "FieldValueInvalid"


def test_a_transition_rule_keeps_a_field_immutable(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(*KUEUE, "default", "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"},
        "spec": {"clusterQueue": "cq"}})
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(*KUEUE, "default", "localqueues", "lq", {"spec": {"clusterQueue": "x"}})
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'LocalQueue.kueue.x-k8s.io "lq" is invalid: spec.clusterQueue: Invalid value: "string": field is immutable')


def test_root_rules_run_on_status_writes_and_name_the_root_nil(kube_server: KubeApiServer) -> None:
    created = kube_server.create_object(_workload())
    status = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "R", "message": "m",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}],
              "admission": {"clusterQueue": "cq", "podSetAssignments": []}}
    with kube_server.api_client() as api, pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            *KUEUE, "default", "workloads", "wl", {"status": status})
    assert json.loads(caught.value.body)["message"] == (
        'Workload.kueue.x-k8s.io "wl" is invalid: <nil>: Invalid value: "object": '
        "podSetAssignments must have the same number of podSets as the spec")
    assert kube_server.get_object(*["kueue.x-k8s.io/v1beta2", "Workload"], "wl", "default")["metadata"][
        "resourceVersion"] == created["metadata"]["resourceVersion"]


@pytest.mark.parametrize("release", ["kueue-v0.13.10", "kueue-v0.15.8"])
def test_older_kueue_rules_apply_to_their_own_versions(release: str) -> None:
    manifest = _cluster_queue(resourceGroups=[{"coveredResources": ["cpu", "memory"], "flavors": [
        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}])
    manifest["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    with KubeApiServer(release=release) as server, server.api_client() as api, pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(api).create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues",
                                                                  manifest)
    assert caught.value.status == 422
    assert "flavors must have the same number of resources as the coveredResources" in caught.value.body


# --- the evaluator on small schemas -------------------------------------------------


def _tree(schema: dict[str, Any]) -> cel.SchemaNode:
    crd = {"spec": {"group": "example.com", "names": {"kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "schema": {"openAPIV3Schema": schema}}]}}
    return cel.compile_crd(crd)["v1"]


def _object_schema(rules: list[dict[str, Any]], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": rules,
                                                       "properties": properties}}}


EVALUATOR_CASES = [
    # (label, rule, spec, old spec or None, errors, warnings)
    ("quantity compare", "quantity(self.limit).isGreaterThan(quantity(self.request))",
     {"limit": "1Gi", "request": "1500Mi"}, None, ["spec: Invalid value: \"object\": failed rule: "
                                                  "quantity(self.limit).isGreaterThan(quantity(self.request))"], []),
    ("quantity ok", "quantity(self.limit).compareTo(quantity('1000m')) == 0", {"limit": "1"}, None, [], []),
    ("lists library", "self.items.isSorted() && self.items.sum() == 6 && self.items.max() == 3",
     {"items": [1, 2, 3]}, None, [], []),
    ("strings", "self.limit.lowerAscii().split('g').join('-') == '1-i'", {"limit": "1Gi"}, None, [], []),
    ("missing field is an evaluation error", "self.request == 'x'", {"limit": "1"}, None,
     ["spec: Invalid value: \"object\": no such key: request evaluating rule: self.request == 'x'"], []),
    ("transition rule skipped on create", "self.limit == oldSelf.limit", {"limit": "1"}, None, [], []),
    ("transition rule on update", "self.limit == oldSelf.limit", {"limit": "2"}, {"limit": "1"},
     ["spec: Invalid value: \"object\": failed rule: self.limit == oldSelf.limit"], []),
    ("ratcheting: unchanged invalid value warns", "self.limit == 'ok'", {"limit": "bad"}, {"limit": "bad"},
     [], ["spec: Invalid value: \"object\": failed rule: self.limit == 'ok'"]),
    ("ratcheting: a changed value fails", "self.limit == 'ok'", {"limit": "bad"}, {"limit": "worse"},
     ["spec: Invalid value: \"object\": failed rule: self.limit == 'ok'"], []),
]


@pytest.mark.parametrize(("rule", "spec", "old_spec", "errors", "warnings"), [c[1:] for c in EVALUATOR_CASES],
                         ids=[c[0] for c in EVALUATOR_CASES])
def test_evaluator(rule: str, spec: dict[str, Any], old_spec: dict[str, Any] | None, errors: list[str],
                   warnings: list[str]) -> None:
    tree = _tree(_object_schema([{"rule": rule}], limit={"type": "string"}, request={"type": "string"},
                                items={"type": "array", "items": {"type": "integer"}}))
    old = {"metadata": {"name": "t"}, "spec": old_spec} if old_spec is not None else None
    results = cel.validate(tree, {"metadata": {"name": "t"}, "spec": spec}, old)
    assert [str(e) for e in results.errors] == errors
    assert results.warnings == warnings


def test_list_map_items_correlate_by_key_for_transition_rules() -> None:
    item = {"type": "object", "x-kubernetes-validations": [{"rule": "self.size == oldSelf.size",
                                                              "message": "size is immutable"}],
            "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"disks": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": item}}}}}
    tree = _tree(schema)
    old = {"metadata": {}, "spec": {"disks": [{"name": "a", "size": 1}, {"name": "b", "size": 2}]}}
    reordered = {"metadata": {}, "spec": {"disks": [{"name": "b", "size": 2}, {"name": "a", "size": 1},
                                                    {"name": "c", "size": 9}]}}
    assert cel.validate(tree, reordered, old).errors == []
    changed = {"metadata": {}, "spec": {"disks": [{"name": "b", "size": 3}]}}
    assert [str(e) for e in cel.validate(tree, changed, old).errors] == [
        'spec.disks[0]: Invalid value: "object": size is immutable']


def test_duplicate_keys_of_a_list_map_are_422_as_the_crd_validator_words_them(kube_api: client.ApiClient) -> None:
    flavor = {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}
    manifest = _cluster_queue(resourceGroups=[{"coveredResources": ["cpu"], "flavors": [flavor, flavor]}])
    with pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(kube_api).create_cluster_custom_object(*KUEUE, "clusterqueues", manifest)
    body = json.loads(caught.value.body)
    assert caught.value.status == 422
    assert {"reason": "FieldValueDuplicate", "field": "spec.resourceGroups[0].flavors[1]",
            "message": 'Duplicate value: map[string]interface {}{"name":"default"}'} in body["details"]["causes"]
