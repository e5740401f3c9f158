"""One reading of a ProvisioningRequest's state (autoscalers/provisioning_request.py), shared by `explain` and the
adjuster, in the order Kueue's admission check controller reads it (kueue@v0.19.2
pkg/controller/admissionchecks/provisioning/controller.go, `syncCheckStates`: Failed, CapacityRevoked,
BookingExpired, Provisioned, Accepted). Every set of True conditions is read; the adjuster's mapping follows."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from raybridge.adjuster.decision import consts
from raybridge.adjuster.decision.placeholders import FINISHED, PENDING, PROVIDED
from raybridge.adjuster.decision.scale_adjuster import read_request, request_state
from raybridge.autoscalers.provisioning_request import STATE_OF_CONDITION, read_provisioning_state
from raybridge.queues.decision.kueue_explain import check_states
from raybridge.kueue.workload import workload_view

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
TYPES = [kind for kind, _ in STATE_OF_CONDITION]


def request(true: tuple[str, ...], since: datetime = NOW, name: str = "rb-request-1") -> dict[str, Any]:
    conditions = [{"type": kind, "status": "True" if kind in true else "False", "reason": f"{kind}Reason", "message": kind.lower(),
                   "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ")} for kind in TYPES]  # fmt: skip
    return {"metadata": {"name": name, "namespace": "raybridge-system",
                         "labels": {consts.MANAGED_BY_LABEL: consts.MANAGED_BY_VALUE, consts.COMPONENT_LABEL: consts.REQUEST_COMPONENT,
                                    consts.GROUP_LABEL: "nvidia-abc", consts.GPUS_LABEL: "2"},
                         "annotations": {consts.PODS_ANNOTATION: '["team/a"]'}},
            "status": {"conditions": conditions}}  # fmt: skip


# (True conditions, the state): Kueue's order decides where several are True.
ROWS = [
    ((), "waiting"),
    (("Accepted",), "accepted"),
    (("Accepted", "Provisioned"), "provisioned"),
    (("Accepted", "Provisioned", "BookingExpired"), "booking-expired"),
    (("Accepted", "Provisioned", "CapacityRevoked"), "capacity-revoked"),
    (("BookingExpired", "CapacityRevoked"), "capacity-revoked"),
    (("Failed", "BookingExpired"), "failed"),
    (("Failed", "CapacityRevoked"), "failed"),
    (("Failed", "Provisioned"), "failed"),
]


@pytest.mark.parametrize("true, state", ROWS, ids=[", ".join(r[0]) or "none" for r in ROWS])
def test_the_first_true_condition_in_kueue_s_order_decides(true: tuple[str, ...], state: str) -> None:
    assert read_provisioning_state(request(true)).state == state


ALL_SETS = [combo for n in range(len(TYPES) + 1) for combo in itertools.combinations(TYPES, n)]


@pytest.mark.parametrize("true", ALL_SETS, ids=[", ".join(c) or "none" for c in ALL_SETS])
def test_explain_and_the_adjuster_read_every_set_of_conditions_alike(true: tuple[str, ...]) -> None:
    obj = request(true)
    explained = check_states(workload_view({"metadata": {"name": "wl"}, "status": {"admissionChecks": [
        {"name": "gpu-provisioning", "state": "Pending"}]}}), [{**obj, "metadata": {**obj["metadata"], "name": "wl-gpu-provisioning-1"}}])  # fmt: skip
    assert explained[0].provisioning_state == request_state(obj) == read_provisioning_state(obj).state


@pytest.mark.parametrize(
    "case, true, failed_for, kind",
    [
        ("waiting covers its pods", (), 0, PENDING),
        ("provisioned: the scale-up was asked for", ("Accepted", "Provisioned"), 0, PROVIDED),
        ("booking expired: its pods are planned again", ("Provisioned", "BookingExpired"), 0, FINISHED),
        ("revoked: its pods are planned again", ("Provisioned", "CapacityRevoked"), 0, FINISHED),
        ("failed, within the backoff: it still covers its pods", ("Failed",), 10, PENDING),
        ("failed, the backoff over: replaced", ("Failed",), 61, FINISHED),
        ("failed after its booking expired: failed first, as Kueue reads it", ("Failed", "BookingExpired"), 10, PENDING),
    ],
)
def test_the_adjuster_maps_each_state_to_what_it_does(case: str, true: tuple[str, ...], failed_for: int, kind: str) -> None:
    seen = read_request(request(true, since=NOW - timedelta(seconds=failed_for)), NOW, failed_backoff=60.0)
    assert seen is not None and seen.state == kind, case
