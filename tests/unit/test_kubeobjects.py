"""The one reader of pods' requests, timestamps and ClusterQueue usage, and the domains that use it."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from raybridge.kueue.workload import quota, read_workload
from raybridge.core.inventory import pod_resource_requests
from raybridge.core.kubeobjects import cluster_queue_usage, parse_rfc3339, pod_requests
from raybridge.kueue.fit import pod_requests as kueue_pod_requests


def container(requests=None, limits=None, **extra):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


D = Decimal


@pytest.mark.parametrize(
    "spec,expected",
    [
        ({"containers": [container({"cpu": "1"}), container({"cpu": "500m"})]}, {"cpu": D("1.5")}),
        ({"containers": [container(limits={"nvidia.com/gpu": 2})]}, {"nvidia.com/gpu": D(2)}),  # limit, no request
        ({"containers": [container({"cpu": "1"}, {"cpu": "4"})]}, {"cpu": D(1)}),  # the request wins
        ({"containers": [container({"cpu": "1"})], "initContainers": [container({"cpu": "3"})]}, {"cpu": D(3)}),
        # a sidecar runs beside the containers and adds to them, and to every init container started after it
        ({"containers": [container({"cpu": "1"})],
          "initContainers": [container({"cpu": "1"}, restartPolicy="Always"), container({"cpu": "2"})]}, {"cpu": D(3)}),
        ({"containers": [container({"cpu": "1", "memory": "1Gi"})], "resources": {"requests": {"cpu": "2"}}},
         {"cpu": D(2), "memory": D(2**30)}),  # pod-level cpu replaces the containers'
        ({"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m"}}, {"cpu": D("1.25")}),
        ({"containers": [container({"cpu": "lots", "memory": "1e99999999"})]}, {}),  # malformed: none
        ({"containers": "not a list", "initContainers": [None, 3]}, {}),
        ("not a spec", {}),
    ],
)
def test_pod_requests(spec, expected):
    assert pod_requests(spec) == expected


def test_every_domain_reads_a_pod_the_same_way():
    spec = {"containers": [container(limits={"cpu": "2", "nvidia.com/gpu": "1"})],
            "initContainers": [container({"cpu": "4"})]}
    assert kueue_pod_requests({"spec": spec}) == {"cpu": D(4), "nvidia.com/gpu": D(1)}
    assert dict(pod_resource_requests(spec))["cpu"] == 4000
    workload = {"spec": {"podSets": [{"name": "workers", "count": 3, "template": {"spec": spec}}]}}
    # Kueue counts the init container (4 CPUs, not the containers' 2) for each of the 3 pods
    assert read_workload(workload).requests()["cpu"] == D(12)


def test_a_cluster_queue_counts_the_quota_its_workloads_reserved_not_only_what_is_admitted():
    cq = {
        "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                     "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]},
        "status": {"flavorsReservation": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "6"}]}],
                   "flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}]},
    }
    assert cluster_queue_usage(cq) == {("h100", "nvidia.com/gpu"): D(6)}
    assert quota(cq)["nvidia.com/gpu"] == (D(8), D(6))
    only_usage = {"status": {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}]}}
    assert cluster_queue_usage(only_usage) == {("h100", "nvidia.com/gpu"): D(2)}


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("2026-11-25T10:00:00Z", datetime(2026, 11, 25, 10, tzinfo=timezone.utc)),
        ("2026-11-25T10:00:00.123456+00:00", datetime(2026, 11, 25, 10, 0, 0, 123456, tzinfo=timezone.utc)),
        (datetime(2026, 11, 25, 10), datetime(2026, 11, 25, 10, tzinfo=timezone.utc)),  # YAML's unquoted time
        ("2026-11-25T10:00:00Z\n", None), ("２０２６-11-25T10:00:00Z", None), ("yesterday", None), (None, None), ("9" * 100, None),
    ],
)
def test_parse_rfc3339(raw, expected):
    assert parse_rfc3339(raw) == expected
