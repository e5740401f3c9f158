"""kueue.cluster_queue: a ClusterQueue's or Cohort's quota read once; what a malformed one reads as, one row per case."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from raybridge.kueue.cluster_queue import ResourceQuota, read_quota_holder

GPU = "nvidia.com/gpu"
H100 = {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 8, "borrowingLimit": "4", "lendingLimit": 2}]}


def queue(groups: Any, **spec: Any) -> dict[str, Any]:
    return {"kind": "ClusterQueue", "metadata": {"name": "team-a"}, "spec": {"resourceGroups": groups, **spec}}


# (case, object, groups as (covered, flavors), quotas as (flavor, resource) -> (nominal, borrowing, lending), cohort)
ROWS = [
    ("a well-formed queue", queue([{"coveredResources": [GPU], "flavors": [H100]}], cohortName="gpu"),
     [((GPU,), ("h100",))], {("h100", GPU): (8, 4, 2)}, "gpu"),
    ("v1beta1's cohort", queue([], cohort="old"), [], {}, "old"),
    ("covered resources read from the flavors when not said", queue([{"flavors": [H100]}]), [((GPU,), ("h100",))],
     {("h100", GPU): (8, 4, 2)}, None),
    ("a group that is text", queue(["gpu", {"flavors": [H100]}]), [((GPU,), ("h100",))], {("h100", GPU): (8, 4, 2)}, None),
    ("a flavor that is text, or has no name", queue([{"flavors": ["h100", {"resources": H100["resources"]}, H100]}]),
     [((GPU,), ("h100",))], {("h100", GPU): (8, 4, 2)}, None),
    ("resources that are text", queue([{"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": "gpu"}]}]),
     [((GPU,), ("h100",))], {}, None),
    ("a quota that is not a quantity", queue([{"flavors": [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": "lots"}]}]}]),
     [((GPU,), ("h100",))], {("h100", GPU): (0, None, None)}, None),
    ("resourceGroups an object", queue({"flavors": [H100]}), [], {}, None),
    ("spec a list", {"metadata": {"name": "team-a"}, "spec": ["x"]}, [], {}, None),
    ("not an object", "team-a", [], {}, None),
    ("a cohort name that is not text", queue([], cohortName=["gpu"]), [], {}, None),
]  # fmt: skip


@pytest.mark.parametrize("case,obj,groups,quotas,cohort", ROWS, ids=[r[0] for r in ROWS])
def test_a_cluster_queue_s_quota_is_read_once(case, obj, groups, quotas, cohort):
    view = read_quota_holder(obj)
    assert [(g.covered, g.flavors) for g in view.groups] == groups
    expected = {key: ResourceQuota(Decimal(n), None if b is None else Decimal(b), None if l is None else Decimal(l))
                for key, (n, b, l) in quotas.items()}  # fmt: skip
    assert dict(view.quotas) == expected
    assert view.cohort == cohort


def test_a_cohort_names_its_parent() -> None:
    assert read_quota_holder({"kind": "Cohort", "metadata": {"name": "child"}, "spec": {"parentName": "root"}}).parent == "root"
    assert read_quota_holder({"kind": "Cohort", "metadata": {"name": "root"}, "spec": {}}).parent is None
