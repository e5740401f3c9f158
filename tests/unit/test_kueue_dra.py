"""Whether a cluster's Kueue counts a job's DRA devices (kueue/dra.py), release by release, one row per case."""

from __future__ import annotations

from typing import Optional

import pytest

from raybridge.kueue.dra import KueueDraSettings, device_class_mappings, dra_counting, feature_gates

MAPPED = {"gpu.nvidia.com": "nvidia.com/gpu"}

# (case, settings, counted as, words of the problem, words of the note)
ROWS: list[tuple[str, KueueDraSettings, Optional[str], Optional[str], Optional[str]]] = [
    ("v0.19.2 with the class mapped", KueueDraSettings("v0.19.2", {}, MAPPED), "nvidia.com/gpu", None, None),
    ("v0.18 counts by default", KueueDraSettings("v0.18.0", {}, MAPPED), "nvidia.com/gpu", None, None),
    ("v0.19.2 with the class not mapped: Inadmissible for good", KueueDraSettings("v0.19.2", {}, {"x": "y"}), None,
     "is not in Kueue's deviceClassMappings (mapped: x -> y)", None),
    ("v0.19.2 with its integration turned off", KueueDraSettings("v0.19.2", {"KueueDRAIntegration": False}, MAPPED), None,
     "runs with KueueDRAIntegration=false", None),
    ("v0.17.0, alpha gate off by default", KueueDraSettings("v0.17.0", {}, MAPPED), None, "alpha feature gate DynamicResourceAllocation=true", None),
    ("v0.17.0 with the alpha gate on", KueueDraSettings("v0.17.0", {"DynamicResourceAllocation": True}, MAPPED), "nvidia.com/gpu", None, None),
    ("v0.13.10 has no DRA", KueueDraSettings("v0.13.10", {}, None), None, "does not count DRA devices", None),
    ("release unknown: not checked", KueueDraSettings(None, unknown_because="no Deployment labelled x"), None, None, "no Deployment labelled x"),
    ("Configuration unreadable: not checked", KueueDraSettings("v0.19.2", {}, None, "this user may not read ConfigMap kueue-system/c"), None,
     None, "may not read ConfigMap"),
]


@pytest.mark.parametrize("case, settings, resource, problem, note", ROWS, ids=[r[0] for r in ROWS])
def test_each_release_counts_dra_devices_as_its_source_says(
    case: str, settings: KueueDraSettings, resource: Optional[str], problem: Optional[str], note: Optional[str]
) -> None:
    verdict = dra_counting(settings, "gpu.nvidia.com", 16)
    assert verdict.resource == resource, case
    assert (problem is None) == (verdict.problem is None) and (problem is None or problem in (verdict.problem or "")), (case, verdict)
    assert (note is None) == (verdict.note is None) and (note is None or note in (verdict.note or "")), (case, verdict)


def test_the_configuration_s_mappings_and_the_gates_are_read_as_kueue_reads_them() -> None:
    configuration = {"resources": {"deviceClassMappings": [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com", "h100"]},
        {"name": "amd.com/gpu", "deviceClassNames": ["gpu.amd.com"]},
        {"name": 7, "deviceClassNames": ["bad"]},
    ]}}  # fmt: skip
    assert device_class_mappings(configuration) == {"gpu.nvidia.com": "nvidia.com/gpu", "h100": "nvidia.com/gpu", "gpu.amd.com": "amd.com/gpu"}
    assert device_class_mappings({"resources": None}) == {}
    args = ["--config=/c.yaml", "--feature-gates=KueueDRAIntegration=false,TopologyAwareScheduling=true", "--feature-gates=KueueDRAIntegration=true"]
    assert feature_gates(args) == {"KueueDRAIntegration": True, "TopologyAwareScheduling": True}
    assert feature_gates("not a list") == {}
