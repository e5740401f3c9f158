"""What kubesim's simulations share: conditions, quantities and pod requests, owner references, merge patches.

Why this module exists: the simulated world of the node-scale-adjuster (sim_gpu.py, sim_autoscaler.py), the
in-process API server's store and Kueue's pure flavor assignment (sim_kueue.py) need the same small rules of
Kubernetes: conditions as meta.SetStatusCondition sets them, Kubernetes quantities and a pod's requests as the
scheduler sums them, owner references, JSON merge patches. Neither KubeRay nor Kueue is simulated: the real
operators run on the real test cluster (testcluster/).

What it deliberately does not do: run a controller, or decide anything Kueue or KubeRay decides.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping, Optional


Obj = dict[str, Any]

RAY_GROUP = "ray.io"
RAY_VERSION = "v1"
RAY_API = f"{RAY_GROUP}/{RAY_VERSION}"

REQUEST_TIMEOUT = 5.0


# --------------------------------------------------------------------------
# Small helpers: time, conditions, quantities, owner references, merge patches
# --------------------------------------------------------------------------


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(obj: Mapping[str, Any], cond_type: str) -> Optional[Obj]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def condition_is_true(obj: Mapping[str, Any], cond_type: str) -> bool:
    cond = find_condition(obj, cond_type)
    return bool(cond and cond.get("status") == "True")


_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("500m", "4Gi", "1e3", 2) as an exact Decimal."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY_SUFFIXES:
        return number * (1024 ** _BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return number.scaleb(_DECIMAL_SUFFIXES[suffix])
    return number.scaleb(int(suffix[1:]))


def format_quantity(amount: Decimal) -> str:
    """Quantity text: "4", "500m", "4Gi", "512M" (the shortest of the binary and decimal spellings)."""
    if amount == amount.to_integral_value():
        whole = int(amount)
        candidates = [str(whole)]
        if whole:
            for suffixes, base in ((_BINARY_SUFFIXES, 1024), (_DECIMAL_SUFFIXES, 1000)):
                for suffix, power in sorted(suffixes.items(), key=lambda kv: -kv[1]):
                    step = base ** (power if base == 1024 else power // 3) if power > 0 else 0
                    if step and whole % step == 0:
                        candidates.append(f"{whole // step}{suffix}")
                        break
        return min(candidates, key=len)
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(amount.normalize(), "f")


def container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """Requests of one container; a resource with only a limit requests its limit (API defaulting)."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of a pod: containers and sidecars summed, other init containers as a max."""
    total: dict[str, Decimal] = {}
    init_max: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or []:
        for name, amount in container_requests(container).items():
            if container.get("restartPolicy") == "Always":
                total[name] = total.get(name, Decimal(0)) + amount
            else:
                init_max[name] = max(init_max.get(name, Decimal(0)), amount)
    for container in pod_spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for name, amount in init_max.items():
        total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def owner_reference(obj: Mapping[str, Any]) -> Obj:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def merge_patch_for(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: Obj = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch_for(old[key], value)
    return patch


# --------------------------------------------------------------------------
# Talking to the server through the official client
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# The polling loop shared by both controllers
# --------------------------------------------------------------------------


#: How long a simulated operator goes without a pass while nothing in the store changes. What
#: the real operators do on a timer rather than on an informer event (KubeRay requeues a RayJob
#: every RayJobDefaultRequeueDuration, 3 s at kuberay@v1.3.2 and @v1.5.2 rayjob_controller.go,
#: to poll the Ray job and check deadlines) is seen within this, sooner than upstream.
IDLE_PASS_SECONDS = 0.25


