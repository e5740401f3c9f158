"""Which release of an operator runs in the cluster, read from its Deployment: the one home for that lookup.

A CRD says which fields the API server accepts, not what the operator does
with them, and Helm never upgrades CRDs: a v1.6 RayJob CRD beside a v1.5
operator is common. So the release that decides a behaviour (KubeRay's
`preRunningDeadlineSeconds`, from v1.6) is read from the operator's own
Deployment, as Helm labels it (`app.kubernetes.io/name: kuberay-operator`,
`app.kubernetes.io/version`; helm-chart/kuberay-operator/templates/_helpers.tpl
"kuberay-operator.labels") or, failing the label, from its image tag.

It lists Deployments cluster-wide by that label; a user who may not (the
submitter role is namespaced) gets an unknown release with the reason, never
an error: callers then assume the older behaviour and say so. It does not
look at pods, guess from behaviour, or read Kueue's release (raybridge needs
none of Kueue's by release).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

from raybridge.errors import RaybridgeError
from raybridge.kube.client import Kube, PermissionDenied, api_call, raw_get

KUBERAY_OPERATOR_SELECTOR = "app.kubernetes.io/name=kuberay-operator"
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


def kuberay_operator_release(kube: Kube) -> OperatorRelease:
    """The KubeRay operator's release, from its Deployment; unknown (with why) when it cannot be read or told."""
    path = f"/apis/apps/v1/deployments?labelSelector={quote(KUBERAY_OPERATOR_SELECTOR)}"
    try:
        answer = api_call("listing the KubeRay operator's Deployments", raw_get, kube, path, None, False, not_found_ok=True)
    except PermissionDenied:
        return OperatorRelease(None, unknown_because="this user may not list Deployments cluster-wide")
    except RaybridgeError as exc:  # a failing or odd answer: the release stays unknown, the submit goes on
        return OperatorRelease(None, unknown_because=f"its Deployment could not be read: {exc}")
    items = [d for d in (answer or {}).get("items") or [] if isinstance(d, dict)] if isinstance(answer, dict) else []
    if not items:
        return OperatorRelease(None, unknown_because=f"no Deployment labelled {KUBERAY_OPERATOR_SELECTOR}")
    releases = sorted({r for r in (release_of_deployment(d) for d in items) if r})
    where = ", ".join(f"Deployment {(d.get('metadata') or {}).get('namespace')}/{(d.get('metadata') or {}).get('name')}" for d in items)
    if len(releases) != 1:
        why = "its Deployment names no release" if not releases else f"several releases run: {', '.join(releases)}"
        return OperatorRelease(None, where, why)
    return OperatorRelease(releases[0], where)
