"""cluster-autoscaler's ProvisioningRequest API (autoscaling.x-k8s.io/v1), and the one reading of a request's state.

Why it exists: two parts of raybridge read a ProvisioningRequest. `explain` reads the requests Kueue's
ProvisioningRequest admission check creates for a Workload, and the adjuster (`--mode provisioning-request`)
reads its own. Both must agree on what state a request is in when several of its conditions are True (a
request that failed after its booking expired, a revoked one that was provisioned): one reader,
`read_provisioning_state`, decides, the way Kueue's admission check controller does
(kueue@v0.19.2 pkg/controller/admissionchecks/provisioning/controller.go, `syncCheckStates`: a `switch` on
isFailed, isCapacityRevoked, isBookingExpired, isProvisioned, isAccepted, in that order; the same in v0.13.10
and v0.17.0). Kueue is the other reader of the same objects on the clusters raybridge runs on, so its order
is the one a user sees in the Workload's admission check too.

The names of the API (group, version, plural, condition types, the provisioning classes) are written here
once; `kube/provisioning.py` lists and writes the objects, `kueue/workload.py` and the adjuster's decision
read them through this module.

What it deliberately does not do: decide what a state means for a caller (the adjuster maps a failed request
to a backoff, an expired one to its pods planned again; `explain` words it), read the cluster, or simulate
the autoscaler.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from raybridge.core.kubeobjects import as_dict
from raybridge.core.views import Condition, conditions_of, find_condition

#: cluster-autoscaler apis/provisioningrequest/autoscaling.x-k8s.io/v1.
GROUP = "autoscaling.x-k8s.io"
VERSION = "v1"
PLURAL = "provisioningrequests"
KIND = "ProvisioningRequest"

#: The class that provisions all of a request or nothing (Kueue's ProvisioningRequestConfig in the generated
#: configs and the adjuster's requests both use it).
BEST_EFFORT_ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: The class that only books capacity that already exists and never adds a node
#: (provisioningrequest/checkcapacity/provisioningclass.go): requests of it cannot bring the pods' nodes.
CHECK_CAPACITY_CLASS = "check-capacity.autoscaling.x-k8s.io"

#: The condition types (apis/provisioningrequest/autoscaling.x-k8s.io/v1 types.go), each with the state word
#: raybridge prints and reports, in the order that decides when several are True (Kueue's, see above).
FAILED = "failed"
CAPACITY_REVOKED = "capacity-revoked"
BOOKING_EXPIRED = "booking-expired"
PROVISIONED = "provisioned"
ACCEPTED = "accepted"
WAITING = "waiting"
STATE_OF_CONDITION = (
    ("Failed", FAILED),
    ("CapacityRevoked", CAPACITY_REVOKED),
    ("BookingExpired", BOOKING_EXPIRED),
    ("Provisioned", PROVISIONED),
    ("Accepted", ACCEPTED),
)


@dataclass(frozen=True)
class ProvisioningState:
    """Where a request stands: the state word, and the True condition that decided it (None while waiting)."""

    state: str
    condition: Optional[Condition] = None

    @property
    def since(self) -> Optional[datetime]:
        """When the deciding condition became True (None while waiting, or where the time is not written)."""
        return self.condition.transitioned_at if self.condition is not None else None

    def words(self) -> str:
        """The deciding condition's "reason: message", or what a waiting request is waiting for."""
        if self.condition is None:
            return "the autoscaler has not accepted it yet"
        return self.condition.words()


def read_provisioning_state(request: Any) -> ProvisioningState:
    """The state of a ProvisioningRequest from its conditions (never raises; anything else reads as waiting)."""
    conditions = conditions_of(as_dict(request).get("status"))
    for kind, state in STATE_OF_CONDITION:
        condition = find_condition(conditions, kind)
        if condition is not None and condition.true:
            return ProvisioningState(state, condition)
    return ProvisioningState(WAITING)
