"""Which KubeRay release runs, from its Deployment as Helm or KubeRay's own kustomize manifests label it
(kube/operators.py); the list calls answered by a stand-in keyed by label selector."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pytest

from raybridge.kube import operators

HELM = {"metadata": {"name": "kuberay-operator", "namespace": "kuberay-system",
                     "labels": {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/version": "1.5.0"}}}  # fmt: skip
# kuberay@v1.6.1 ray-operator/config/manager/manager.yaml, with the image kustomize sets (config/default: images)
KUSTOMIZE = {"metadata": {"name": "kuberay-operator", "namespace": "ray-system",
                          "labels": {"app.kubernetes.io/name": "kuberay", "app.kubernetes.io/component": "kuberay-operator"}},
             "spec": {"template": {"spec": {"containers": [{"name": "kuberay-operator", "image": "quay.io/kuberay/operator:v1.6.1"}]}}}}  # fmt: skip


@pytest.mark.parametrize(
    "case, installed, version, where",
    [
        ("Helm's labels", [HELM], "v1.5.0", "Deployment kuberay-system/kuberay-operator"),
        ("kustomize's labels: the release from the image tag", [KUSTOMIZE], "v1.6.1", "Deployment ray-system/kuberay-operator"),
        ("neither", [], None, ""),
    ],
)
def test_the_operator_is_found_however_it_was_installed(monkeypatch: pytest.MonkeyPatch, case: str, installed: list[dict[str, Any]],
                                                         version: Any, where: str) -> None:  # fmt: skip
    def deployments(kube: Any, what: str, path: str) -> list[dict[str, Any]]:
        wanted = dict(pair.split("=") for pair in unquote(path.split("labelSelector=", 1)[1]).split(","))
        return [d for d in installed if wanted.items() <= d["metadata"]["labels"].items()]

    monkeypatch.setattr(operators, "_deployments", deployments)
    found = operators.kuberay_operator_release(object())  # type: ignore[arg-type]
    assert (found.version, found.where) == (version, where), case
    if version is None:
        assert "(Helm)" in found.unknown_because and "(kustomize)" in found.unknown_because


def test_a_user_who_may_not_list_deployments_is_told_that_not_that_none_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default submitter RBAC may not read Deployments: the reason is the refusal, not "no Deployment labelled"."""

    def refused(kube: Any, what: str, path: str) -> list[dict[str, Any]]:
        raise operators.PermissionDenied(f"listing {path}: forbidden")

    monkeypatch.setattr(operators, "_deployments", refused)
    found = operators.kuberay_operator_release(object())  # type: ignore[arg-type]
    assert found.version is None
    assert found.unknown_because.startswith("this user may not list Deployments cluster-wide or in kuberay-system"), found.unknown_because
