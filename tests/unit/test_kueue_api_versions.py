"""Which kueue.x-k8s.io version raybridge speaks on each Kueue release, from that release's CRDs.

Why this module exists: the served releases (v0.13.10, v0.17.0, v0.19.2) run for real in test_release_matrix.py;
v0.15.8 (the first minor with v1beta2) is read from its sources only. The CRDs (the Go module cache for the releases
the test cluster builds, ../shared/crds for v0.15.8: testcluster/crd_schemas.py) say which versions the API server serves;
raybridge's rule (raybridge/kueue/api.py VERSIONS, kube/kueue.py served_versions) must pick v1beta2 wherever it is
served and v1beta1 where it is alone, and name the cohort with the field that version's ClusterQueue schema has.

What it deliberately does not do: run Kueue (the served releases run for real), or check other fields
(test_configs.py holds the shipped Kueue configs to each release's schemas).
"""

from __future__ import annotations

from typing import Any

import pytest

from raybridge.kube import kueue as kube_kueue
from raybridge.kueue.api import GROUP, VERSION_NOTES, cohort_field
from testcluster.crd_schemas import KUEUE_RELEASES, CrdsAbsent, release_files
from testcluster.sources import yaml_documents

# (release id, read from its sources only (1) or run for real here (0), the version raybridge must speak)
ROWS = [("kueue-v0.13.10", 0, "v1beta1"), ("kueue-v0.15.8", 1, "v1beta2"), ("kueue-newest", 0, "v1beta2")]


def _crds(release: str) -> dict[str, dict[str, Any]]:
    """The release's Kueue CRDs by kind."""
    found = {}
    try:
        paths = release_files(release)
    except CrdsAbsent as absent:
        pytest.skip(str(absent))
    for path in paths:
        for crd in yaml_documents(path):  # the C loader, through the test cluster's JSON copies
            if isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition" and crd["spec"]["group"] == GROUP:
                found[crd["spec"]["names"]["kind"]] = crd
    return found


def test_every_kueue_release_of_the_crd_folder_has_a_row() -> None:
    assert [row[0] for row in ROWS] == list(KUEUE_RELEASES)


@pytest.mark.parametrize("release, read_only, speaks", ROWS, ids=[r[0] for r in ROWS])
def test_raybridge_speaks_the_newest_version_the_release_serves(monkeypatch: pytest.MonkeyPatch, release: str, read_only: int, speaks: str) -> None:
    crds = _crds(release)
    served = {kind: [v["name"] for v in crd["spec"]["versions"] if v.get("served")] for kind, crd in crds.items()}
    # every kind raybridge reads is served in the version it speaks
    for kind in ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload", "WorkloadPriorityClass"):
        assert speaks in served[kind], (kind, served[kind])
    storage = next(v["name"] for v in crds["ClusterQueue"]["spec"]["versions"] if v.get("storage"))
    group = {"kind": "APIGroup", "name": GROUP, "versions": [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in served["ClusterQueue"]],
             "preferredVersion": {"groupVersion": f"{GROUP}/{storage}", "version": storage}}  # fmt: skip
    monkeypatch.setattr(kube_kueue, "raw_get", lambda kube, path, **kwargs: group if path == f"/apis/{GROUP}" else None)
    assert kube_kueue.served_versions(object())[0] == speaks  # type: ignore[arg-type]
    [schema] = [v["schema"]["openAPIV3Schema"] for v in crds["ClusterQueue"]["spec"]["versions"] if v["name"] == speaks]
    assert cohort_field(speaks) in schema["properties"]["spec"]["properties"]
    assert speaks in VERSION_NOTES
