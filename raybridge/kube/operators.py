"""Which release of an operator runs in the cluster, read from its Deployment: the one home for that lookup.

A CRD says which fields the API server accepts, not what the operator does
with them, and Helm never upgrades CRDs: a v1.6 RayJob CRD beside a v1.5
operator is common. So the release that decides a behaviour (KubeRay's
`preRunningDeadlineSeconds`, from v1.6) is read from the operator's own
Deployment, as Helm labels it (`app.kubernetes.io/name: kuberay-operator`,
`app.kubernetes.io/version`; helm-chart/kuberay-operator/templates/_helpers.tpl
"kuberay-operator.labels") or as KubeRay's kustomize manifests do
(`app.kubernetes.io/name: kuberay`), or, failing the version label, from its image tag. Kueue's
controller manager is found the same way, for `check` to show.

It lists Deployments cluster-wide by that label, else in the namespaces the
operators are usually installed in (the submitter role is namespaced; an
opt-in Role grants that one read); a user who may do neither gets an unknown
release with the reason, never an error: callers then assume the older
behaviour and say so. It does not
look at pods or guess from behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

from raybridge.errors import RaybridgeError
from raybridge.kube.calls import PermissionDenied, api_call
from raybridge.kube.client import Kube
from raybridge.kube.objects import raw_get

KUBERAY_OPERATOR_SELECTOR = "app.kubernetes.io/name=kuberay-operator"
#: The operator as KubeRay's own kustomize manifests label it (kuberay@v1.6.1 ray-operator/config/manager/manager.yaml:
#: `app.kubernetes.io/name: kuberay`, `app.kubernetes.io/component: kuberay-operator`; no version label, the image's tag
#: says the release). Asked after Helm's, which most clusters use.
KUBERAY_KUSTOMIZE_SELECTOR = "app.kubernetes.io/name=kuberay,app.kubernetes.io/component=kuberay-operator"
#: Kueue's controller manager, as its Helm chart and its kustomize manifests both label it
#: (charts/kueue/templates/_helpers.tpl "kueue.selectorLabels"; config/default).
KUEUE_CONTROLLER_SELECTOR = "app.kubernetes.io/name=kueue,control-plane=controller-manager"
VERSION_LABEL = "app.kubernetes.io/version"


@dataclass(frozen=True)
class OperatorRelease:
    """An operator's release as found (`version`, e.g. "v1.6.1"), where, or why it is unknown."""

    version: Optional[str]
    where: str = ""
    unknown_because: str = ""

    def describe(self) -> str:
        if self.version:
            return f"{self.version} ({self.where})"
        return f"unknown ({self.unknown_because})"


def release_of_deployment(deployment: dict[str, Any]) -> Optional[str]:
    """The release a Deployment runs: its version label, else its first container's image tag (not a digest)."""
    labels = (deployment.get("metadata") or {}).get("labels") or {}
    label = str(labels.get(VERSION_LABEL) or "").strip()
    if label:
        return label if label.startswith("v") else f"v{label}"
    containers = ((((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")) or []
    image = str((containers[0] or {}).get("image") or "") if containers and isinstance(containers[0], dict) else ""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name and "@" not in image else None


#: Where the operators are installed when not cluster-wide visible: their Helm charts' documented namespaces and
#: the default one (KubeRay's quick start installs into `default`).
KUBERAY_NAMESPACES = ("kuberay-system", "ray-system", "kuberay-operator", "default")
KUEUE_NAMESPACES = ("kueue-system",)


def kuberay_operator_release(kube: Kube) -> OperatorRelease:
    """The KubeRay operator's release, from its Deployment; unknown (with why) when it cannot be read or told."""
    helm = operator_release(kube, "the KubeRay operator", KUBERAY_OPERATOR_SELECTOR, KUBERAY_NAMESPACES)
    if helm.version is not None or helm.where:
        return helm
    kustomize = operator_release(kube, "the KubeRay operator", KUBERAY_KUSTOMIZE_SELECTOR, KUBERAY_NAMESPACES)
    if kustomize.version is not None or kustomize.where:
        return kustomize
    not_found = f"no Deployment labelled {KUBERAY_OPERATOR_SELECTOR}"
    if not helm.unknown_because.startswith(not_found):  # refused or unreadable: that, not "none found", is why
        return helm
    return OperatorRelease(None, unknown_because=f"{not_found} (Helm) or {KUBERAY_KUSTOMIZE_SELECTOR} (kustomize)")


def kueue_release(kube: Kube) -> OperatorRelease:
    """Kueue's controller manager's release, from its Deployment; unknown (with why) when it cannot be read or told."""
    return operator_release(kube, "Kueue's controller manager", KUEUE_CONTROLLER_SELECTOR, KUEUE_NAMESPACES)


def operator_deployments(kube: Kube, what: str, selector: str, namespaces: tuple[str, ...]) -> tuple[list[dict[str, Any]], str]:
    """The Deployments `selector` finds: cluster-wide, or, where this user may not list Deployments cluster-wide, in
    each of `namespaces` (a Role there may allow it: configs/rbac/submitter-kuberay-release.yaml); with why none was
    found when none was."""
    query = f"deployments?labelSelector={quote(selector)}"
    items: list[dict[str, Any]] = []
    try:
        items = _deployments(kube, what, f"/apis/apps/v1/{query}")
    except PermissionDenied:
        refused = []
        for namespace in namespaces:
            try:
                items = _deployments(kube, what, f"/apis/apps/v1/namespaces/{namespace}/{query}")
            except PermissionDenied:
                refused.append(namespace)
                continue
            except RaybridgeError as exc:
                return [], f"its Deployment could not be read: {exc}"
            if items:
                break
        if not items and refused:
            return [], f"this user may not list Deployments cluster-wide or in {', '.join(refused)}"
    except RaybridgeError as exc:  # a failing or odd answer: the release stays unknown, the caller goes on
        return [], f"its Deployment could not be read: {exc}"
    if not items:
        return [], f"no Deployment labelled {selector}"
    return items, ""


def operator_release(kube: Kube, what: str, selector: str, namespaces: tuple[str, ...]) -> OperatorRelease:
    """The release of the operator whose Deployments `selector` finds (`operator_deployments`)."""
    items, unknown_because = operator_deployments(kube, what, selector, namespaces)
    return release_of(items, selector) if items else OperatorRelease(None, unknown_because=unknown_because)


def release_of(items: list[dict[str, Any]], selector: str) -> OperatorRelease:
    """The one release the Deployments run, where, or why it cannot be told."""
    releases = sorted({r for r in (release_of_deployment(d) for d in items) if r})
    where = ", ".join(f"Deployment {(d.get('metadata') or {}).get('namespace')}/{(d.get('metadata') or {}).get('name')}" for d in items)
    if len(releases) != 1:
        why = "its Deployment names no release" if not releases else f"several releases run: {', '.join(releases)}"
        return OperatorRelease(None, where, why)
    return OperatorRelease(releases[0], where)


def _deployments(kube: Kube, what: str, path: str) -> list[dict[str, Any]]:
    """The Deployments a list answers ([] when the API does not serve them); PermissionDenied and errors raise."""
    answer = api_call(f"listing {what}'s Deployments", raw_get, kube, path, None, False, not_found_ok=True)
    items = answer.get("items") if isinstance(answer, dict) else None
    return [d for d in items if isinstance(d, dict)] if isinstance(items, list) else []
