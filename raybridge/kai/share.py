"""The one reader of a pod's KAI GPU-sharing annotations: what share of a GPU it asks for, on how many GPUs.

Why it exists: the node-scale-adjuster reads the same three annotations (`gpu-fraction`,
`gpu-memory`, `gpu-fraction-num-devices`) for pods that wait (demand.py: how much to ask for)
and for pods that landed (reconcile.py: how much room they leave on their node); a pod must count
as one size waiting and landed, so both read it here (never with Python's int(), which takes
"1_024" and other scripts' digits that KAI refuses). The texts are read as KAI reads them, Go's strconv.ParseFloat and ParseInt (core/go_number.py);
the ranges are those KAI's binder admits (kai-scheduler@v0.13.0 pkg/binder/admission
gpu_request_validator.go: 0 < gpu-fraction < 1; pkg/common/resources/gpu_sharing.go: an empty
gpu-fraction counts as absent, gpu-memory then decides).

How KAI's scheduler counts the same annotations for the pods that exist (queues' requests and
allocations in the fair share) is `scheduler_request`, read as pod_info.go reads them.

It deliberately does not convert gpu-memory to a fraction (that needs the GPU's memory, a fact of
the node the pod lands on, each caller's business) nor decide what a malformed request means: a
waiting pod with one is not demand, a landed one holds whole GPUs. Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping, Optional

from raybridge.kai.names import KAI_GPU_DEVICES_ANNOTATION, KAI_GPU_FRACTION_ANNOTATION, KAI_GPU_MEMORY_ANNOTATION
from raybridge.core.go_number import go_float_exact, go_float_kind, go_parse_float, go_parse_int

#: Annotation values longer than this are refused before any parsing.
MAX_VALUE_LENGTH = 64
#: Smaller gpu-fraction values are refused (a pod asking for less is a typo, not a demand).
SMALLEST_FRACTION = Fraction(1, 10**30)
#: How each whole-number annotation is named in the reasons given for refusing it.
MEMORY_WHAT = "gpu-memory (MiB)"
DEVICES_WHAT = KAI_GPU_DEVICES_ANNOTATION
#: Bound on a cache handed to `read_kai_share` (pods repeat a few texts; a hostile list could repeat none).
MAX_CACHED = 10_000


@dataclass(frozen=True)
class KaiShare:
    """What a pod's KAI annotations ask for. Exactly one of `fraction` and `memory_mib` is set when
    `problem` is None; a field that could not be read is None and `problem` says why (the first problem)."""

    fraction: Optional[Fraction]
    memory_mib: Optional[int]
    #: GPUs the share is taken on (1 when the annotation is absent; None when it is malformed).
    devices: Optional[int]
    problem: Optional[str] = None


def parse_fraction(raw: Any) -> tuple[Optional[Fraction], Optional[str]]:
    """A gpu-fraction annotation as an exact Fraction in (0, 1), or the reason it is not one.

    The text is read as KAI reads it, Go's strconv.ParseFloat (core/go_number.py: hex floats and '_'
    between digits included; a trailing newline, spaces or other scripts' digits not), and the value
    kept exact (0.33 is 33/100). KAI's binder admits 0 < f < 1 (gpu_request_validator.go).
    """
    if not isinstance(raw, str):
        return None, f"gpu-fraction {raw!r} is not a string"
    if len(raw) > MAX_VALUE_LENGTH:
        return None, f"gpu-fraction is {len(raw)} characters long, not a number"
    kind = go_float_kind(raw)
    if kind in ("nan", "inf") or raw.lstrip("+-").lower() == "nan":  # Go takes no sign on NaN: a syntax error
        return None, f"gpu-fraction {raw!r} is NaN or infinite"
    if kind is None:
        return None, f"gpu-fraction {raw!r} is not a number (Go's strconv.ParseFloat syntax, as KAI reads it)"
    value = go_float_exact(raw)
    if value is None:
        return None, f"gpu-fraction {raw!r} is out of range (0 < f < 1)"  # beyond float64: Go's range error
    if not SMALLEST_FRACTION <= value < 1:
        return None, f"gpu-fraction {raw!r} is out of range (0 < f < 1)"
    return value, None


def parse_whole(raw: Any, what: str, minimum: int) -> tuple[Optional[int], Optional[str]]:
    """A whole-number annotation as KAI reads it (Go's strconv.ParseInt base 10: ASCII digits, no '_'),
    at least `minimum` and at most 18 digits."""
    if not isinstance(raw, str):
        return None, f"{what} {raw!r} is not a string"
    value = go_parse_int(raw) if len(raw) <= MAX_VALUE_LENGTH else None
    if value is None or len(raw.lstrip("+-")) > 18:
        if go_float_kind(raw[:MAX_VALUE_LENGTH]) in ("nan", "inf"):
            return None, f"{what} {raw[:MAX_VALUE_LENGTH]!r} is NaN or infinite"
        return None, f"{what} {raw[:MAX_VALUE_LENGTH]!r} is not a whole number"
    if value < minimum:
        return None, f"{what} {raw!r} is out of range (at least {minimum})"
    return value, None


def asks_for_share(annotations: Mapping[str, Any]) -> bool:
    """The pod carries either sharing annotation (empty or not): KAI's GPU sharing applies to it."""
    return KAI_GPU_FRACTION_ANNOTATION in annotations or KAI_GPU_MEMORY_ANNOTATION in annotations


def _cached(cache: Optional[dict[Any, Any]], key: tuple[str, Any], parse: Any) -> Any:
    """`parse()`, remembered in `cache` under `key` when the text is a string."""
    if cache is None or not isinstance(key[1], str):
        return parse()
    found = cache.get(key)
    if found is None:
        found = parse()
        if len(cache) < MAX_CACHED:
            cache[key] = found
    return found


def read_kai_share(annotations: Mapping[str, Any], cache: Optional[dict[Any, Any]] = None) -> KaiShare:
    """What `annotations` ask for. `cache` (any dict the caller keeps) remembers parsed texts across pods."""
    raw_fraction = annotations.get(KAI_GPU_FRACTION_ANNOTATION, "")
    raw_memory = annotations.get(KAI_GPU_MEMORY_ANNOTATION, "")
    fraction: Optional[Fraction] = None
    memory_mib: Optional[int] = None
    if raw_fraction != "":
        fraction, problem = _cached(cache, ("fraction", raw_fraction), lambda: parse_fraction(raw_fraction))
    elif raw_memory != "":
        memory_mib, problem = _cached(cache, (MEMORY_WHAT, raw_memory), lambda: parse_whole(raw_memory, MEMORY_WHAT, 1))
    else:
        problem = "gpu-fraction and gpu-memory are both empty or absent"
    devices: Optional[int] = 1
    if KAI_GPU_DEVICES_ANNOTATION in annotations:
        raw_devices = annotations[KAI_GPU_DEVICES_ANNOTATION]
        devices, devices_problem = _cached(cache, (DEVICES_WHAT, raw_devices), lambda: parse_whole(raw_devices, DEVICES_WHAT, 1))
        problem = problem or devices_problem
    return KaiShare(fraction, memory_mib, devices, problem)


#: KAI's reading of a GPU's memory (kai-scheduler@v0.12.0 pkg/scheduler/api/node_info/node_info.go getNodeGpuMemory):
#: the node label in MiB, a value of a tebibyte in MiB or more taken as bytes (GPU feature discovery's bug), floored
#: to a multiple of 100 MiB "so there will not be 2 jobs that get same bytes".
_TIB_IN_MIB = 1024 * 1024
_KAI_MEMORY_STEP_MIB = 100


def kai_gpu_memory_mib(label_mib: Optional[int], vendor: str) -> Optional[int]:
    """A GPU's memory as KAI fits `gpu-memory` pods into it (their MiB summed, at most this), from the node's label in
    MiB; None when unknown or below KAI's 100 MiB step. A100-80GB's 81920 is 81900: two pods of 40960 MiB do not
    share one GPU (gpu_sharing_node_info.go enoughResourcesOnGpu). KAI reads NVIDIA's label alone; another vendor's
    memory is taken as its label says."""
    if not label_mib or label_mib <= 0:
        return None
    if vendor != "nvidia":
        return label_mib
    mib = label_mib // _TIB_IN_MIB if label_mib >= _TIB_IN_MIB else label_mib
    floored = mib - mib % _KAI_MEMORY_STEP_MIB
    return floored or None


def landed_share(annotations: Mapping[str, Any], gpu_memory_mib: Optional[int]) -> Optional[tuple[Fraction, int]]:
    """(fraction of each GPU, GPUs) a pod that landed holds, or None when it shares no GPU (`gpu_memory_mib`: the
    node's GPU memory as KAI reads it, `kai_gpu_memory_mib`).

    It landed, so KAI placed it: what cannot be read as a share (a malformed fraction or memory, a
    gpu-memory pod on a node whose GPU memory is unknown) holds whole GPUs, the most it can hold; a
    malformed device count counts as one device.
    """
    if not annotations.get(KAI_GPU_FRACTION_ANNOTATION) and not annotations.get(KAI_GPU_MEMORY_ANNOTATION):
        return None
    share = read_kai_share(annotations)
    devices = share.devices or 1
    if share.fraction is not None:
        return share.fraction, devices
    if share.memory_mib is None or not gpu_memory_mib:
        return Fraction(1), devices
    return min(Fraction(1), Fraction(share.memory_mib, gpu_memory_mib)), devices


@dataclass(frozen=True)
class SchedulerRequest:
    """A pod's GPU-sharing request as KAI's scheduler counts it (queues' requests and allocations)."""

    #: Set for a gpu-fraction pod (0 < f <= 1).
    fraction: Optional[float]
    #: Set for a gpu-memory pod (MiB > 0) whose gpu-fraction does not count.
    memory_mib: Optional[int]
    devices: int


def scheduler_request(annotations: Mapping[str, Any]) -> Optional[SchedulerRequest]:
    """How KAI's scheduler reads the sharing annotations, or None when it sees no sharing request.

    kai-scheduler@v0.12.0 pkg/scheduler/api/pod_info/pod_info.go, updatePodAdditionalFields:
    gpu-memory by strconv.ParseInt, counted when > 0; gpu-fraction by strconv.ParseFloat, counted
    (and then winning over gpu-memory) when 0 < f <= 1; gpu-fraction-num-devices by ParseInt
    when present and non-empty, else one device. Unlike the binder's admission (`read_kai_share`)
    nothing else is refused: this is what the scheduler counts for pods that exist. A device count
    below one counts as none (the binder admits no such pod).
    """
    memory = go_parse_int(annotations.get(KAI_GPU_MEMORY_ANNOTATION))
    fraction = go_parse_float(annotations.get(KAI_GPU_FRACTION_ANNOTATION))
    use_fraction = fraction is not None and 0 < fraction <= 1
    use_memory = not use_fraction and memory is not None and memory > 0
    if not use_fraction and not use_memory:
        return None
    devices = 1
    raw_devices = annotations.get(KAI_GPU_DEVICES_ANNOTATION)
    if raw_devices:
        parsed = go_parse_int(raw_devices)
        devices = max(0, parsed) if parsed is not None else 1
    return SchedulerRequest(fraction if use_fraction else None, memory if use_memory else None, devices)
