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
behaviour and say so. For `check` it also says when no replica of the
Deployment is available, and what keeps its pods from running. It does not
guess a release from behaviour, and a Deployment that asks for no replica is
not judged (an operator may run outside the cluster, recorded there).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    #: Why no replica of its Deployment serves ("" when one does, or when nothing can be told: a Deployment asking
    #: for no replica may stand for an operator run elsewhere).
    not_running: str = ""

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


def kuberay_operator_release(kube: Kube, running: bool = False) -> OperatorRelease:
    """The KubeRay operator's release, from its Deployment; unknown (with why) when it cannot be read or told.
    With `running`, also whether a replica of it is available (`with_availability`)."""
    for selector in (KUBERAY_OPERATOR_SELECTOR, KUBERAY_KUSTOMIZE_SELECTOR):
        found = operator_release(kube, "the KubeRay operator", selector, KUBERAY_NAMESPACES, running)
        if found.version is not None or found.where or not found.unknown_because.startswith("no Deployment labelled"):
            return found  # found, or unreadable (not allowed, failing): the other label would only be unreadable too
    return OperatorRelease(None, unknown_because=f"no Deployment labelled {KUBERAY_OPERATOR_SELECTOR} (Helm) or {KUBERAY_KUSTOMIZE_SELECTOR} (kustomize)")


def kueue_release(kube: Kube, running: bool = False) -> OperatorRelease:
    """Kueue's controller manager's release, from its Deployment; unknown (with why) when it cannot be read or told.
    With `running`, also whether a replica of it is available (`with_availability`)."""
    return operator_release(kube, "Kueue's controller manager", KUEUE_CONTROLLER_SELECTOR, KUEUE_NAMESPACES, running)


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


def operator_release(kube: Kube, what: str, selector: str, namespaces: tuple[str, ...], running: bool = False) -> OperatorRelease:
    """The release of the operator whose Deployments `selector` finds (`operator_deployments`); with `running`, also
    whether one serves (`with_availability`)."""
    items, unknown_because = operator_deployments(kube, what, selector, namespaces)
    if not items:
        return OperatorRelease(None, unknown_because=unknown_because)
    release = release_of(items, selector)
    return with_availability(kube, release, items) if running else release


def with_availability(kube: Kube, release: OperatorRelease, items: list[dict[str, Any]]) -> OperatorRelease:
    """`release` with `not_running` said where every one of its Deployments asks for replicas and none is available,
    with what keeps their pods from running where this user may list them (an image not pulled, a crash loop, no node)."""
    if not items or not all(not_available(d) for d in items):
        return release
    words = []
    for deployment in items:
        meta = deployment.get("metadata") or {}
        words.append(f"Deployment {meta.get('namespace')}/{meta.get('name')}: {not_available(deployment)}{_pods_trouble(kube, deployment)}")
    return replace(release, not_running="; ".join(words))


def not_available(deployment: dict[str, Any]) -> str:
    """"0 of N replicas available" where a Deployment asks for N >= 1 replicas and none is available, else ""."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted = spec.get("replicas", 1) if isinstance(spec, dict) else 1
    available = status.get("availableReplicas") if isinstance(status, dict) else None
    if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 1:
        return ""
    if isinstance(available, int) and not isinstance(available, bool) and available > 0:
        return ""
    return f"0 of {wanted} replica{'s' if wanted != 1 else ''} available"


def _pods_trouble(kube: Kube, deployment: dict[str, Any]) -> str:
    """" (pod x: ImagePullBackOff ...)" for the Deployment's pods, "" where none is troubled or they cannot be read."""
    from raybridge.core.pod_trouble import pods_trouble, trouble_words
    from raybridge.core.views import read_pod
    from raybridge.kube.objects import list_namespaced_pods

    meta = deployment.get("metadata") or {}
    labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not labels or not isinstance(labels, dict):
        return ""
    try:
        pods = list_namespaced_pods(kube, str(meta.get("namespace")), ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    except RaybridgeError:
        return ""
    troubles = trouble_words(pods_trouble(read_pod(p) for p in pods))
    return f" ({troubles})" if troubles else ("" if pods else " (no pod)")


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
