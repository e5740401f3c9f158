"""Authentication and RBAC in the test API server, through the official client.

Why: the least-privilege Roles that raybridge's submitter and the
node-scale-adjuster ship are tested against this server; it must refuse
what a real RBAC authorizer refuses, with the same 403 messages.
What this deliberately does not do: test those Roles themselves (their own
tests do) or authentication methods other than bearer tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import portforward

from kubesim.auth import attributes
from kubesim.server import KubeApiServer

RBAC = "rbac.authorization.k8s.io/v1"
SA_USER = "system:serviceaccount:team:runner"


@pytest.fixture
def team(kube_server: KubeApiServer) -> KubeApiServer:
    """Namespace `team` with ServiceAccount `runner` and a pod; namespace `other` with a pod."""
    for namespace in ("team", "other"):
        kube_server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube_server.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
                                   "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox:1"}]},
                                   "status": {"phase": "Running"}})
    kube_server.create_object({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "runner", "namespace": "team"}})
    return kube_server


def _as_runner(server: KubeApiServer) -> client.ApiClient:
    return server.api_client(server.service_account_token("team", "runner"))


def _role(server: KubeApiServer, name: str, rules: list[dict[str, Any]], namespace: str | None = "team") -> None:
    kind = "Role" if namespace else "ClusterRole"
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    server.create_object({"apiVersion": RBAC, "kind": kind, "metadata": meta, "rules": rules})
    binding = {"apiVersion": RBAC, "kind": f"{kind}Binding", "metadata": meta,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "team"}]}
    server.create_object(binding)


def _denied(call: Callable[[], Any]) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value.body
    body = json.loads(caught.value.body)
    assert body["reason"] == "Forbidden"
    return body["message"]


def test_token_request_mints_a_token_for_a_service_account(team: KubeApiServer) -> None:
    with team.api_client() as admin:
        answer = client.CoreV1Api(admin).create_namespaced_service_account_token(
            "runner", "team", {"spec": {"expirationSeconds": 1200}})
        assert answer.status.token and answer.status.expiration_timestamp
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(admin).create_namespaced_service_account_token("ghost", "team", {"spec": {}})
        assert caught.value.status == 404
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(admin).create_namespaced_service_account_token(
                "runner", "team", {"spec": {"expirationSeconds": 60}})
        assert caught.value.status == 422
    with team.api_client(answer.status.token) as api:
        assert client.ApisApi(api).get_api_versions().groups  # discovery for every authenticated user


def test_a_service_account_without_bindings_is_forbidden_with_the_real_message(team: KubeApiServer) -> None:
    with _as_runner(team) as api:
        core = client.CoreV1Api(api)
        assert _denied(lambda: core.list_namespaced_pod("team")) == (
            f'pods is forbidden: User "{SA_USER}" cannot list resource "pods" in API group "" in the namespace "team"')
        assert _denied(lambda: core.read_namespaced_pod("p", "team")) == (
            f'pods "p" is forbidden: User "{SA_USER}" cannot get resource "pods" in API group "" '
            'in the namespace "team"')
        assert _denied(lambda: core.list_node()) == (
            f'nodes is forbidden: User "{SA_USER}" cannot list resource "nodes" in API group "" at the cluster scope')
        assert _denied(lambda: client.CustomObjectsApi(api).list_namespaced_custom_object(
            "ray.io", "v1", "team", "rayjobs")) == (
            f'rayjobs.ray.io is forbidden: User "{SA_USER}" cannot list resource "rayjobs" in API group "ray.io" '
            'in the namespace "team"')


def test_a_role_grants_verbs_on_resources_and_subresources_in_its_namespace(team: KubeApiServer) -> None:
    _role(team, "reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                           {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}])
    team.set_pod_log("team", "p", "hello\n")
    with _as_runner(team) as api:
        core = client.CoreV1Api(api)
        assert [p.metadata.name for p in core.list_namespaced_pod("team").items] == ["p"]
        assert core.read_namespaced_pod_log("p", "team") == "hello\n"
        assert "cannot delete resource \"pods\"" in _denied(lambda: core.delete_namespaced_pod("p", "team"))
        assert "cannot patch resource \"pods/status\"" in _denied(
            lambda: core.patch_namespaced_pod_status("p", "team", {"status": {"phase": "Running"}}))
        assert 'in the namespace "other"' in _denied(lambda: core.list_namespaced_pod("other"))
        assert "cannot list resource \"pods\" in API group \"\" at the cluster scope" in _denied(
            lambda: core.list_pod_for_all_namespaces())


def test_cluster_roles_resource_names_and_wildcards(team: KubeApiServer) -> None:
    _role(team, "lease-holder", [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                  "resourceNames": ["mine"], "verbs": ["get", "update"]}])
    _role(team, "node-reader", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["*"]},
                                {"apiGroups": ["ray.io"], "resources": ["*/status"], "verbs": ["get"]}],
          namespace=None)
    team.create_object({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": "mine", "namespace": "team"}, "spec": {}})
    team.create_object({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": "theirs", "namespace": "team"}, "spec": {}})
    team.create_object({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j", "namespace": "team"},
                        "spec": {"entrypoint": "python x.py"}})
    with _as_runner(team) as api:
        leases = client.CoordinationV1Api(api)
        assert leases.read_namespaced_lease("mine", "team").metadata.name == "mine"
        assert 'leases.coordination.k8s.io "theirs" is forbidden' in _denied(
            lambda: leases.read_namespaced_lease("theirs", "team"))
        _denied(lambda: leases.list_namespaced_lease("team"))  # resourceNames never grant list
        assert client.CoreV1Api(api).list_node().items == []
        custom = client.CustomObjectsApi(api)
        assert custom.get_namespaced_custom_object_status("ray.io", "v1", "team", "rayjobs", "j")["metadata"]
        assert 'cannot get resource "rayjobs" in API group "ray.io"' in _denied(
            lambda: custom.get_namespaced_custom_object("ray.io", "v1", "team", "rayjobs", "j"))


def test_a_binding_to_a_missing_role_is_named_in_the_denial(team: KubeApiServer) -> None:
    team.create_object({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "b", "namespace": "team"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gone"},
                        "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "team"}]})
    with _as_runner(team) as api:
        message = _denied(lambda: client.CoreV1Api(api).list_namespaced_pod("team"))
    assert message.endswith(': RBAC: role.rbac.authorization.k8s.io "gone" not found')


def test_self_subject_access_review_answers_can_i(team: KubeApiServer) -> None:
    _role(team, "reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    with _as_runner(team) as api:
        reviews = client.AuthorizationV1Api(api)

        def can(verb: str, resource: str, namespace: str) -> bool:
            review = reviews.create_self_subject_access_review({"spec": {"resourceAttributes": {
                "verb": verb, "resource": resource, "namespace": namespace}}})
            return review.status.allowed

        assert can("list", "pods", "team") and not can("delete", "pods", "team") and not can("list", "pods", "other")


def test_tokens_stop_working_when_the_account_goes_and_unknown_tokens_are_401(team: KubeApiServer) -> None:
    token = team.service_account_token("team", "runner")
    team.delete_object("v1", "ServiceAccount", "runner", "team")
    for bad in (token, "not-a-token"):
        with team.api_client(bad) as api, pytest.raises(ApiException) as caught:
            client.CoreV1Api(api).list_namespaced_pod("team")
        assert caught.value.status == 401 and json.loads(caught.value.body)["reason"] == "Unauthorized"


def test_anonymous_requests_get_public_info_only(kube_server: KubeApiServer) -> None:
    configuration = client.Configuration()
    configuration.host = kube_server.url
    with client.ApiClient(configuration) as api:
        assert client.VersionApi(api).get_code().major
        assert _denied(lambda: client.ApisApi(api).get_api_versions()) == (
            'forbidden: User "system:anonymous" cannot get path "/apis/"')
        assert "system:anonymous" in _denied(lambda: client.CoreV1Api(api).list_namespaced_pod("default"))


def test_a_kubeconfig_with_a_service_account_token(team: KubeApiServer, tmp_path: Path) -> None:
    _role(team, "reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    path = team.write_kubeconfig(tmp_path / "config", namespace="team",
                                 token=team.service_account_token("team", "runner"))
    api = config.new_client_from_config(str(path))
    with api:
        assert [p.metadata.name for p in client.CoreV1Api(api).list_namespaced_pod("team").items] == ["p"]
        dynamic.DynamicClient(api)  # discovery works with only the default grants
        _denied(lambda: client.CoreV1Api(api).list_namespaced_pod("other"))



@pytest.mark.parametrize("verbs", [["create"], ["get"], ["get", "create"]], ids="+".join)
def test_a_websocket_port_forward_is_authorized_as_get_and_as_create(team: KubeApiServer, verbs: list[str]) -> None:
    """kube-apiserver derives `get` from the WebSocket GET; from 1.35 its handler checks `create` too
    (pkg/registry/core/pod/rest/subresources.go PortForwardREST.Connect): both are needed."""
    _role(team, "forwarder", [{"apiGroups": [""], "resources": ["pods/portforward"], "verbs": verbs}])
    team.set_port_forward_target(lambda namespace, pod, port: ("127.0.0.1", 9))
    with _as_runner(team) as api:
        core = client.CoreV1Api(api)
        if verbs == ["get", "create"]:
            portforward(core.connect_get_namespaced_pod_portforward, "p", "team", ports="8265").close()
            return
        with pytest.raises(ApiException) as caught:
            portforward(core.connect_get_namespaced_pod_portforward, "p", "team", ports="8265")
    missing = "get" if verbs == ["create"] else "create"
    assert "403" in str(caught.value.reason) or caught.value.status == 403
    answer = str(caught.value.body or caught.value.reason).replace('\\"', '"')  # the body, JSON-quoted in the reason
    assert f'cannot {missing} resource "pods/portforward"' in answer, answer


@pytest.mark.parametrize(("rule", "field", "detail"), [
    ({"apiGroups": [""], "resources": ["pods"], "verbs": []}, "rules[0].verbs", "verbs must contain at least one value"),
    ({"resources": ["pods"], "verbs": ["get"]}, "rules[0].apiGroups", "resource rules must supply at least one api group"),
    ({"apiGroups": [""], "verbs": ["get"]}, "rules[0].resources", "resource rules must supply at least one resource"),
], ids=["no verbs", "no apiGroups", "no resources"])
def test_a_role_rule_is_validated_as_the_real_server_does(kube_server: KubeApiServer, rule: dict[str, Any], field: str,
                                                          detail: str) -> None:
    """ValidatePolicyRule (pkg/apis/rbac/validation): 422, e.g. for a rule left without verbs."""
    role = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [rule]}
    with pytest.raises(ApiException) as caught:
        dynamic.DynamicClient(kube_server.api_client()).resources.get(api_version=RBAC, kind="ClusterRole").create(body=role)
    assert caught.value.status == 422
    assert f'ClusterRole.rbac.authorization.k8s.io "r" is invalid: {field}: Required value: {detail}' in json.loads(caught.value.body)["message"]

ATTRIBUTE_CASES = [
    # (method, path, query, verb, group, resource, subresource, namespace, name)
    ("GET", "/api/v1/namespaces/ns/pods", "", "list", "", "pods", "", "ns", ""),
    ("GET", "/api/v1/namespaces/ns/pods", "watch=true", "watch", "", "pods", "", "ns", ""),
    ("GET", "/api/v1/watch/namespaces/ns/pods/p", "", "watch", "", "pods", "", "ns", "p"),
    ("GET", "/api/v1/namespaces/ns/pods/p/log", "", "get", "", "pods", "log", "ns", "p"),
    ("GET", "/api/v1/namespaces/ns/pods/p/portforward", "", "get", "", "pods", "portforward", "ns", "p"),
    ("POST", "/api/v1/namespaces/ns/pods/p/portforward", "", "create", "", "pods", "portforward", "ns", "p"),
    ("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", "", "create", "", "serviceaccounts", "token", "ns",
     "sa"),
    ("PATCH", "/apis/ray.io/v1/namespaces/ns/rayjobs/j/status", "", "patch", "ray.io", "rayjobs", "status", "ns", "j"),
    ("DELETE", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", "", "deletecollection", "coordination.k8s.io",
     "leases", "", "ns", ""),
    ("PUT", "/api/v1/namespaces/ns/finalize", "", "update", "", "namespaces", "finalize", "ns", "ns"),
    ("GET", "/api/v1/nodes", "", "list", "", "nodes", "", "", ""),
]


@pytest.mark.parametrize(("method", "path", "query", "verb", "group", "resource", "sub", "namespace", "name"),
                         ATTRIBUTE_CASES, ids=[f"{c[0]} {c[1]}" for c in ATTRIBUTE_CASES])
def test_request_attributes(method: str, path: str, query: str, verb: str, group: str, resource: str, sub: str,
                            namespace: str, name: str) -> None:
    parsed = {k: [v] for k, v in (p.split("=") for p in query.split("&") if p)}
    attrs = attributes(method, path, parsed)
    assert (attrs.verb, attrs.api_group, attrs.resource, attrs.subresource, attrs.namespace, attrs.name) == (
        verb, group, resource, sub, namespace, name)
