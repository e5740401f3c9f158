"""What kubesim's simulations share: the time as conditions carry it, Kubernetes quantities, a pod's requests.

Why this module exists: the simulated KAI and cluster-autoscaler (sim_gpu.py, sim_autoscaler.py, through
sim_nodes.py) and Kueue's pure flavor assignment (sim_kueue.py) need the same small rules of Kubernetes: quantities
as apimachinery parses them (apimachinery pkg/api/resource/quantity.go ParseQuantity) and a pod's requests as the
scheduler sums them (component-helpers resource/helpers.go PodRequests, which kube-scheduler's noderesources/fit.go
calls: containers and sidecars summed, other init containers as a maximum).

What it deliberately does not do: run a controller, or talk to an API server.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping


Obj = dict[str, Any]


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
