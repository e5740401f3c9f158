"""Kueue's flavor assignment as kubesim computes it (kubesim/sim_kueue.py), rule by rule against Kueue's source.

Why this module exists: the test of the shipped queue configs (tests/unit/test_configs.py) judges them by
`assign_flavors`; each rule it follows is read from kueue@v0.17.0 pkg/scheduler/flavorassigner/flavorassigner.go and
pinned here. The real Kueue admits the end-to-end tests' jobs (testcluster/).

What it deliberately does not do: Kueue's controllers, webhooks or queues (not simulated any more).
"""

from __future__ import annotations

import copy

from kubesim.sim_kueue import assign_flavors


def test_one_flavor_per_resource_group_cpu_in_one_and_gpus_in_another_never_fit() -> None:
    """flavorassigner.go findFlavorForPodSetResource: every resource of the group in the same flavor."""

    def flavor(name: str, cpu: str, gpus: str) -> dict:
        return {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}

    cq = {"spec": {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [flavor("a", "64", "4"), flavor("b", "8", "16")]}]}}
    workers = {"name": "workers", "count": 2, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "16", "nvidia.com/gpu": "4"}}}]}}}
    fit = assign_flavors(cq, [workers], used={})
    assert not fit.fits
    assert fit.message == (
        "couldn't assign flavors to pod set workers: "
        "insufficient quota for nvidia.com/gpu in flavor a, previously considered podsets requests (0) + current podset request (8) > maximum capacity (4), "
        "insufficient quota for cpu in flavor b, previously considered podsets requests (0) + current podset request (32) > maximum capacity (8)"
    )
    split = copy.deepcopy(cq)
    split["spec"]["resourceGroups"] = [
        {"coveredResources": ["cpu"], "flavors": [{"name": "a", "resources": [{"name": "cpu", "nominalQuota": "64"}]}]},
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "b", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]},
    ]  # fmt: skip
    assert assign_flavors(split, [workers], used={}).pod_set_assignments[0]["flavors"] == {"cpu": "a", "nvidia.com/gpu": "b"}


def test_a_flavor_with_a_taint_the_pod_set_does_not_tolerate_is_skipped() -> None:
    """flavorassigner.go: FindMatchingUntoleratedTaint over the flavor's NoSchedule/NoExecute taints."""
    quota = [{"name": "cpu", "nominalQuota": "64"}]
    cq = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "tainted", "resources": quota}, {"name": "small", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}}  # fmt: skip
    specs = {"tainted": {"nodeTaints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}, "small": {}}
    pod = {"name": "workers", "count": 1, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "8"}}}]}}}
    fit = assign_flavors(cq, [pod], {}, None, None, specs)
    assert fit.message == (
        "couldn't assign flavors to pod set workers: untolerated taint dedicated=ml:NoSchedule in flavor tainted, "
        "insufficient quota for cpu in flavor small, previously considered podsets requests (0) + current podset request (8) > maximum capacity (1)"
    )
    tolerant = copy.deepcopy(pod)
    tolerant["template"]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    assert assign_flavors(cq, [tolerant], {}, None, None, specs).pod_set_assignments[0]["flavors"] == {"cpu": "tainted"}

