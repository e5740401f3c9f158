"""The CRD schemas of each supported release (testcluster/crd_schemas.py): the right files, the versions each serves,
the fields each has.

Why: raybridge must work on every release in the matrix, and the offline checks of its manifests and configs are only
as good as the files read for each release. What each release serves is written here as the upstream release notes
say it, not read back from the files, so that a wrong file choice fails here.
What this deliberately does not do: Kueue's conversion between v1beta1 and v1beta2 (the real Kueue's webhook does it
on the real stack; tests/unit/test_kueue_api_versions.py holds raybridge's side), or send anything to an API server.
"""

from __future__ import annotations

import pytest

from testcluster import crd_schemas as schemas

SERVED = {
    "kuberay-v1.3.2": ("ray.io", ["v1", "v1alpha1"]),
    "kuberay-v1.5.2": ("ray.io", ["v1", "v1alpha1"]),
    "kuberay-newest": ("ray.io", ["v1", "v1alpha1"]),
    "kueue-v0.13.10": ("kueue.x-k8s.io", ["v1beta1"]),
    "kueue-v0.15.8": ("kueue.x-k8s.io", ["v1beta2", "v1beta1"]),
    "kueue-newest": ("kueue.x-k8s.io", ["v1beta2", "v1beta1"]),
}
#: spec.preRunningDeadlineSeconds exists in the RayJob CRD from KubeRay v1.6.0 on.
HAS_PRE_RUNNING_DEADLINE = {"kuberay-v1.3.2": False, "kuberay-v1.5.2": False, "kuberay-newest": True}


def test_release_ids() -> None:
    assert schemas.RELEASES == (
        "kuberay-v1.3.2", "kuberay-v1.5.2", "kuberay-newest", "kueue-v0.13.10", "kueue-v0.15.8", "kueue-newest",
    )
    with pytest.raises(ValueError, match="unknown release"):
        schemas.release_files("kueue-v0.1.0")


@pytest.mark.parametrize("release", schemas.RELEASES)
def test_every_release_serves_exactly_its_versions(release: str) -> None:
    group, versions = SERVED[release]
    found = schemas.release_crds(release)
    assert found, release
    served = {version for (crd_group, _), crd in found.items() if crd_group == group for version in schemas.served_versions(crd)}
    assert served == set(versions), (release, sorted(served))


@pytest.mark.parametrize("release", schemas.KUBERAY_RELEASES)
def test_pre_running_deadline_exists_only_where_the_release_has_it(release: str) -> None:
    manifest = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
                "spec": {"entrypoint": "python x.py", "preRunningDeadlineSeconds": 60}}  # fmt: skip
    errors = schemas.release_schema_errors(manifest, release)
    if HAS_PRE_RUNNING_DEADLINE[release]:
        assert errors == [], errors
    else:
        assert any("preRunningDeadlineSeconds" in e for e in errors), errors
