"""Reading an operator's release from its Deployment, as Helm and kustomize write it (kube/operators.py)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.kube.operators import OperatorRelease, release_of_deployment


def deployment(labels: Optional[dict[str, str]] = None, image: Optional[str] = None) -> dict[str, Any]:
    containers = [{"name": "manager", "image": image}] if image is not None else []
    return {"metadata": {"labels": labels or {}}, "spec": {"template": {"spec": {"containers": containers}}}}


# (case, Deployment, release read)
ROWS = [
    ("Helm's version label", deployment({"app.kubernetes.io/version": "v1.6.1"}, "quay.io/kuberay/operator:v1.5.0"), "v1.6.1"),
    ("a label without the v", deployment({"app.kubernetes.io/version": "1.5.2"}), "v1.5.2"),
    ("no label: the image tag", deployment(image="quay.io/kuberay/operator:v1.3.2"), "v1.3.2"),
    ("a registry with a port", deployment(image="registry.local:5000/kuberay/operator:v1.6.0"), "v1.6.0"),
    ("an image by digest tells nothing", deployment(image="quay.io/kuberay/operator@sha256:abc"), None),
    ("a tag and a digest: the digest runs", deployment(image="quay.io/kuberay/operator:v1.6.1@sha256:abc"), None),
    ("no tag", deployment(image="quay.io/kuberay/operator"), None),
    ("no containers", deployment(), None),
    ("a container that is not a mapping", {"spec": {"template": {"spec": {"containers": ["x"]}}}}, None),
]


@pytest.mark.parametrize("case,obj,expected", ROWS, ids=[r[0] for r in ROWS])
def test_release_of_deployment(case, obj, expected):
    assert release_of_deployment(obj) == expected


def test_describe_says_the_release_and_where_or_why_not():
    assert OperatorRelease("v1.6.1", "Deployment a/b").describe() == "v1.6.1 (Deployment a/b)"
    assert OperatorRelease(None, unknown_because="no Deployment labelled x").describe() == "unknown (no Deployment labelled x)"
