"""KAI-Scheduler's node-scale-adjuster rule, one pass, quirks included: the baseline we compare with.

`kai_pass` reproduces what one `ScaleAdjuster.Adjust()` call of KAI's
node-scale-adjuster decides (github.com/NVIDIA/KAI-Scheduler, read at commit
72de64fc8eca10fa8cca26a20156178f3edbe092) for given pods, scaling pods and
cooldown state: which scaling pods it deletes, and which it creates. Users can
see what KAI would do on their cluster and compare; the benchmark runs it
round after round. It is written from reading KAI's code and tests, not
translated from it. The quirks, each where it is implemented below:

1. Any Unschedulable reason counts, quota or fair-share blocking included; no
   grace period (scale_adjuster.go: getUnschedulablePods, isPodUnschedulable).
2. A gpu-memory pod is `--gpu-memory-to-fraction-ratio` (0.1) of a GPU
   whatever its size; the memory only has to parse as an int64
   (calculator.go: getGPUFraction).
3. need = ceil(Σ round_half_away(fraction·100) · devices / 100), the sum in
   float64 in list order (calculator.go: calculateNumNeededDevices), so
   0.33 + 0.56 + 0.11 is 1.0000000000000002 and needs 2; no bin packing.
4. Values are not validated: Go's strconv.ParseFloat syntax (hex floats,
   '_' between digits, Inf, NaN; read by core/go_number.py, the one reader
   the planner and the fair-share view use too), negative, zero and >1 fractions, and
   num-devices 0 or negative all pass (pkg/common/resources/gpu_sharing.go).
   float64 -> int64 of NaN, ±Inf or out-of-range values follows amd64
   (CVTTSD2SI gives math.MinInt64); int64 products wrap.
5. At most one scaling pod per pending pod, named "<namespace>-<name>";
   created while need > Σ devices of the scaling pods or the pod needs more
   devices than the largest scaling pod; each new one joins the set at once
   (scale_adjuster.go: createNewScalingPods). Names collide ("c-a"/"b" and
   "c"/"a-b"): the second pod gets none.
6. A scaling pod asks for `devices` whole nvidia.com/gpu, whatever the
   vendor, and copies affinity, tolerations and nodeSelector
   (scaler/scaling_pod.go). The API server refuses it when devices < 0, the
   name is longer than 253 characters or the pod's name (a label value) longer
   than 63; KAI logs that and goes on (scale_adjuster.go: "failed to create").
7. Deletion first: a scaling pod that Succeeded, whose pod is gone, or whose
   pod's first PodScheduled is no longer False/Unschedulable is deleted; one
   whose pod has no PodScheduled condition is kept (scaler/scaler.go:
   IsScalingPodStillNeeded). Any deletion starts a 60 s cooldown in which
   nothing is created; creating starts none (scale_adjuster.go: Adjust,
   consts.DefaultCoolDownSeconds).
8. Candidates are taken in (namespace, name) order, the API server's list
   order. KAI's manager client reads an informer cache whose List order is a
   map's, so on a real cluster the order (and with mixed device counts, the
   count) can differ from pass to pass.

Pure: pods and scaling pods in, a `KaiPass` out; the caller keeps the cooldown clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Iterable, Mapping, Optional, Sequence

from raybridge.kai.names import KAI_GPU_DEVICES_ANNOTATION, KAI_GPU_FRACTION_ANNOTATION, KAI_COOLDOWN_SECONDS, KAI_GPU_MEMORY_ANNOTATION, KAI_SCALING_POD_NAME_LABEL, KAI_SCALING_POD_NAMESPACE_LABEL
from raybridge.core.consts import GPU_RESOURCE_KEYS
from raybridge.core.kubeobjects import as_dict, as_list
from raybridge.core.go_number import INT64_MAX, INT64_MIN, go_parse_float, go_parse_int  # noqa: F401 - KAI's parsers
from raybridge.core.quantity import parse_quantity

KAI_RESOURCE_KEY = GPU_RESOURCE_KEYS["nvidia"]
#: calculator.go: gpuFractionDecimalRoundingFactor
ROUNDING_FACTOR = 100


def go_round(x: float) -> float:
    """math.Round: half away from zero (Python's round() is half to even)."""
    if math.isnan(x) or math.isinf(x):
        return x
    return float(Decimal(x).to_integral_value(rounding=ROUND_HALF_UP))


def go_int64(x: float) -> int:
    """int64(x) on amd64: NaN, ±Inf and out-of-range values become math.MinInt64."""
    if math.isnan(x) or math.isinf(x) or not (-(2.0**63) <= x < 2.0**63):
        return INT64_MIN
    return int(x)


def wrap_int64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= (1 << 63) else value


def _annotation(pod: Mapping[str, Any], key: str) -> Optional[str]:
    value = as_dict(as_dict(pod.get("metadata")).get("annotations")).get(key)
    return value if isinstance(value, str) else None


def _has_annotation(pod: Mapping[str, Any], key: str) -> bool:
    return key in as_dict(as_dict(pod.get("metadata")).get("annotations"))


def _first_pod_scheduled(pod: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    for cond in as_list(as_dict(pod.get("status")).get("conditions")):
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
            return cond
    return None


def _key(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = as_dict(pod.get("metadata"))
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def is_candidate(pod: Mapping[str, Any], scheduler_name: str) -> bool:
    """getUnschedulablePods: unbound, this scheduler, a non-empty sharing annotation, alive, Unschedulable."""
    spec = as_dict(pod.get("spec"))
    if spec.get("nodeName"):
        return False
    if (spec.get("schedulerName") or "") != scheduler_name:
        return False
    if not (_annotation(pod, KAI_GPU_FRACTION_ANNOTATION) or _annotation(pod, KAI_GPU_MEMORY_ANNOTATION)):
        return False
    if as_dict(pod.get("status")).get("phase") in ("Succeeded", "Failed"):
        return False
    cond = _first_pod_scheduled(pod)  # quirk 1: any Unschedulable reason, no grace period
    return cond is not None and cond.get("status") == "False" and cond.get("reason") == "Unschedulable"


def gpu_fraction(pod: Mapping[str, Any], memory_ratio: float) -> Optional[float]:
    """getGPUFraction: the parsed gpu-fraction, else the fixed ratio for any parsable gpu-memory (quirk 2)."""
    fraction = _annotation(pod, KAI_GPU_FRACTION_ANNOTATION)
    if fraction:
        return go_parse_float(fraction)
    memory = _annotation(pod, KAI_GPU_MEMORY_ANNOTATION)
    if memory:
        return memory_ratio if go_parse_int(memory) is not None else None
    return None


def num_devices(pod: Mapping[str, Any]) -> Optional[int]:
    """GetNumGPUFractionDevices: the annotation as int64, 1 when absent and a sharing annotation exists."""
    if not _has_annotation(pod, KAI_GPU_DEVICES_ANNOTATION):
        if _has_annotation(pod, KAI_GPU_FRACTION_ANNOTATION) or _has_annotation(pod, KAI_GPU_MEMORY_ANNOTATION):
            return 1
        return None
    return go_parse_int(_annotation(pod, KAI_GPU_DEVICES_ANNOTATION))


def needed_devices(pods: Sequence[Mapping[str, Any]], memory_ratio: float) -> tuple[int, list[Mapping[str, Any]], list[tuple[Mapping[str, Any], str]]]:
    """calculateNumNeededDevices (quirks 3 and 4): need, the pods that counted, and those skipped with why."""
    total = 0.0
    counted: list[Mapping[str, Any]] = []
    skipped: list[tuple[Mapping[str, Any], str]] = []
    for pod in pods:
        fraction = gpu_fraction(pod, memory_ratio)
        if fraction is None:
            skipped.append((pod, "KAI cannot parse its gpu-fraction or gpu-memory annotation"))
            continue
        devices = num_devices(pod)
        if devices is None:
            skipped.append((pod, "KAI cannot parse its gpu-fraction-num-devices annotation"))
            continue
        as_decimal = go_int64(go_round(fraction * ROUNDING_FACTOR))
        total += float(wrap_int64(as_decimal * devices)) / ROUNDING_FACTOR
        counted.append(pod)
    return go_int64(float(math.ceil(total)) if math.isfinite(total) else total), counted, skipped


@dataclass(frozen=True)
class ScalingPod:
    """A KAI scaling pod: its name, whole GPUs, the pod it stands for and the constraints it copied."""

    name: str
    devices: int
    target: str
    node_selector: Mapping[str, Any] = field(default_factory=dict)
    affinity: Optional[Mapping[str, Any]] = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    existing: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gpus": self.devices,
            "resourceKey": KAI_RESOURCE_KEY,
            "nodeSelector": dict(self.node_selector),
            "affinity": dict(self.affinity) if self.affinity else None,
            "tolerations": [dict(t) for t in self.tolerations],
            "pods": [self.target],
            "existing": self.existing,
        }


@dataclass(frozen=True)
class KaiPass:
    need: int
    created: tuple[ScalingPod, ...]
    kept: tuple[ScalingPod, ...]
    #: (scaling pod name, why it is deleted)
    deleted: tuple[tuple[str, str], ...]
    #: True when this pass created nothing because of the cooldown (quirk 7).
    in_cooldown: bool
    #: (pod "ns/name", why KAI does not count it or gave it no scaling pod)
    skipped: tuple[tuple[str, str], ...]
    #: Where KAI itself would fail (a scaling pod without containers makes it panic).
    warnings: tuple[str, ...] = ()


def scaling_pod_name(namespace: str, name: str) -> str:
    return f"{namespace}-{name}"


def _devices_of_scaling_pod(pod: Mapping[str, Any], warnings: list[str]) -> int:
    """calculateNumScalingDevices reads containers[0] requests nvidia.com/gpu; Quantity.Value() rounds up."""
    containers = as_list(as_dict(pod.get("spec")).get("containers"))
    if not containers:
        warnings.append(f"scaling pod {_key(pod)[1]} has no containers: KAI would panic on it (counted as 0 GPUs)")
        return 0
    raw = as_dict(as_dict(as_dict(containers[0]).get("resources")).get("requests")).get(KAI_RESOURCE_KEY)
    if raw is None:
        return 0
    try:
        return int(parse_quantity(raw).to_integral_value(rounding="ROUND_CEILING"))
    except (ValueError, TypeError, ArithmeticError):
        return 0


def still_needed(scaling_pod: Mapping[str, Any], pods_by_key: Mapping[tuple[str, str], Mapping[str, Any]]) -> tuple[bool, str]:
    """IsScalingPodStillNeeded (quirk 7)."""
    if as_dict(scaling_pod.get("status")).get("phase") == "Succeeded":
        return False, "it Succeeded (its node came up)"
    labels = as_dict(as_dict(scaling_pod.get("metadata")).get("labels"))
    target = (str(labels.get(KAI_SCALING_POD_NAMESPACE_LABEL) or ""), str(labels.get(KAI_SCALING_POD_NAME_LABEL) or ""))
    pod = pods_by_key.get(target)
    if pod is None:
        return False, f"its pod {target[0]}/{target[1]} is gone"
    cond = _first_pod_scheduled(pod)
    if cond is None:
        return True, ""
    if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
        return True, ""
    return False, f"its pod {target[0]}/{target[1]} is no longer Unschedulable"


def _creation_refused(pod: Mapping[str, Any], name: str, devices: int) -> Optional[str]:
    """What the API server would refuse in the scaling pod KAI builds (quirk 6)."""
    if devices < 0:
        return f"the scaling pod would ask for {devices} {KAI_RESOURCE_KEY}: the API server refuses negative quantities"
    if len(name) > 253:
        return f"the scaling pod name {name[:40]}... is longer than 253 characters"
    if len(_key(pod)[1]) > 63:
        return "the pod's name is longer than 63 characters, too long for the scaling pod's label value"
    return None


def kai_pass(
    pods: Iterable[Any],
    scheduler_name: str,
    memory_ratio: float,
    scaling_namespace: str,
    in_cooldown: bool = False,
    cooldown_seconds: float = KAI_COOLDOWN_SECONDS,
) -> KaiPass:
    """One Adjust(): delete unneeded scaling pods, then (outside the cooldown) create new ones.

    `in_cooldown`: a deletion less than `cooldown_seconds` ago (the caller's clock). A deletion in
    this pass starts the cooldown unless `cooldown_seconds` is 0.
    """
    all_pods = [p for p in pods if isinstance(p, dict)]
    warnings: list[str] = []
    kept, deleted = _kept_or_deleted(all_pods, scaling_namespace, warnings)
    cooling = in_cooldown or (bool(deleted) and cooldown_seconds > 0)
    candidates = sorted((p for p in all_pods if is_candidate(p, scheduler_name)), key=_key)  # quirk 8
    need, counted, not_counted = needed_devices(candidates, memory_ratio)
    skipped = [(f"{_key(p)[0]}/{_key(p)[1]}", why) for p, why in not_counted]
    if cooling or need == 0:
        return KaiPass(need, (), tuple(kept), tuple(deleted), cooling, tuple(skipped), tuple(warnings))
    existing_names = {s.name for s in kept} | {_key(p)[1] for p in all_pods if _key(p)[0] == scaling_namespace}
    created = _created_scaling_pods(counted, kept, existing_names, need, skipped)
    return KaiPass(need, tuple(created), tuple(kept), tuple(deleted), False, tuple(skipped), tuple(warnings))


def _kept_or_deleted(
    all_pods: list[dict[str, Any]], scaling_namespace: str, warnings: list[str]
) -> tuple[list[ScalingPod], list[tuple[str, str]]]:
    """The deletion step (quirk 7): the scaling pods still needed, and the names of the others with why."""
    pods_by_key = {_key(p): p for p in all_pods}
    kept: list[ScalingPod] = []
    deleted: list[tuple[str, str]] = []
    for pod in sorted((p for p in all_pods if _key(p)[0] == scaling_namespace), key=_key):
        needed, why = still_needed(pod, pods_by_key)
        if not needed:
            deleted.append((_key(pod)[1], why))
            continue
        labels = as_dict(as_dict(pod.get("metadata")).get("labels"))
        kept.append(
            _scaling_pod(
                name=_key(pod)[1],
                devices=_devices_of_scaling_pod(pod, warnings),
                target=f"{labels.get(KAI_SCALING_POD_NAMESPACE_LABEL, '')}/{labels.get(KAI_SCALING_POD_NAME_LABEL, '')}",
                spec=as_dict(pod.get("spec")),
                existing=True,
            )
        )
    return kept, deleted


def _scaling_pod(name: str, devices: int, target: str, spec: Mapping[str, Any], existing: bool = False) -> ScalingPod:
    """A scaling pod with the nodeSelector, affinity and tolerations of `spec` (quirk 6)."""
    return ScalingPod(
        name=name,
        devices=devices,
        target=target,
        node_selector=as_dict(spec.get("nodeSelector")),
        affinity=spec.get("affinity") if isinstance(spec.get("affinity"), dict) else None,
        tolerations=tuple(t for t in as_list(spec.get("tolerations")) if isinstance(t, dict)),
        existing=existing,
    )


def _created_scaling_pods(
    counted: Sequence[Mapping[str, Any]], kept: list[ScalingPod], existing_names: set[str], need: int,
    skipped: list[tuple[str, str]],
) -> list[ScalingPod]:
    """The creation step (quirks 5, 6): a scaling pod per counted pod while the rule asks for one.

    Appends to `skipped` why a counted pod gets none, and to `existing_names` each name it takes.
    """
    # The scaling pods so far (kept, then each created one), summed up as they come: the largest
    # and the total are running values and the targets a set, so a pass is linear in the pods.
    targets = {(s.name, s.target) for s in kept}
    provisioned = sum(s.devices for s in kept)
    largest: Optional[int] = max((s.devices for s in kept), default=None)  # None: no scaling pod yet (counts as 0)
    created: list[ScalingPod] = []
    for pod in counted:
        namespace, name = _key(pod)
        scaling_name = scaling_pod_name(namespace, name)
        if scaling_name in existing_names:
            if (scaling_name, f"{namespace}/{name}") not in targets:
                skipped.append((f"{namespace}/{name}", f"the scaling pod name {scaling_name} is taken by another pod's"))
            continue
        devices = num_devices(pod)
        if devices is None:  # cannot happen after needed_devices, as in KAI
            continue
        if not (need > provisioned or devices > (0 if largest is None else largest)):
            skipped.append((f"{namespace}/{name}", f"already scaling up ({provisioned} GPUs in scaling pods for a need of {need})"))
            continue
        refused = _creation_refused(pod, scaling_name, devices)
        if refused:
            skipped.append((f"{namespace}/{name}", f"creating its scaling pod fails: {refused}"))
            continue
        scaling = _scaling_pod(scaling_name, devices, f"{namespace}/{name}", as_dict(pod.get("spec")))
        created.append(scaling)
        targets.add((scaling_name, scaling.target))
        provisioned += devices
        largest = devices if largest is None else max(largest, devices)
        existing_names.add(scaling_name)
    return created
