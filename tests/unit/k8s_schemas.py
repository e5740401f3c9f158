"""Kubernetes' own OpenAPI schemas for core objects (batch/v1 Job, apps/v1 Deployment).

The schemas come from the `kubernetes-validate` package, which bundles the
JSON Schemas generated from each Kubernetes release's OpenAPI document. The
strict variants reject unknown fields, as `kubectl apply --validate=strict`
does.

What this does not check: the API server's own validation beyond the schema
(name formats, immutable fields, label syntax); those are asserted in the
tests directly or left to the e2e suite.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate

#: The oldest Kubernetes release raybridge targets, and the newest the package knows.
K8S_VERSIONS: tuple[str, ...] = ("1.29", kubernetes_validate.latest_version())
#: Kinds shipped for newer clusters only, with the first release that serves them (their files say so).
FIRST_SERVED = {("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): "1.30",
                ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): "1.30"}


def versions_for(obj: dict[str, Any]) -> tuple[str, ...]:
    """The releases of K8S_VERSIONS that serve `obj`'s kind."""
    first = FIRST_SERVED.get((obj.get("apiVersion"), obj.get("kind")))
    if first is None:
        return K8S_VERSIONS
    return tuple(v for v in K8S_VERSIONS if tuple(map(int, v.split("."))) >= tuple(map(int, first.split("."))))


def k8s_schema_errors(obj: dict[str, Any], version: str) -> list[str]:
    """The first schema violation of a core object against one Kubernetes version (empty when valid)."""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.absolute_path) or "<root>"
        return [f"{path}: {exc.message}"]
    return []
