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


def k8s_schema_errors(obj: dict[str, Any], version: str) -> list[str]:
    """The first schema violation of a core object against one Kubernetes version (empty when valid)."""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.absolute_path) or "<root>"
        return [f"{path}: {exc.message}"]
    return []
