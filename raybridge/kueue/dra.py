"""Whether a cluster's Kueue counts a job's DRA devices against quota, and under which resource name.

Why it exists: a job whose GPUs are DRA devices (a ResourceClaimTemplate of a DeviceClass) is counted by
Kueue only where its release and Configuration say so; elsewhere Kueue either ignores the claims (the job
is admitted with its GPUs counted against no quota: a different job from the one the queue was set up for)
or holds the Workload Inadmissible for good. `submit` asks `dra_counting` before it creates anything and
refuses what would go uncounted or wait forever; `check` shows the verdict.

What each release does, read from its source:
- v0.13.10: no DRA in Kueue at all (no feature gate, no `deviceClassMappings`): claims are ignored.
- v0.14 to v0.17: the alpha gate `DynamicResourceAllocation`, off by default (kueue@v0.17.0
  pkg/features/kube_features.go), with `resources.deviceClassMappings` in the Configuration.
- v0.18 and later: `KueueDRAIntegration`, beta and on by default (kueue@v0.19.2 pkg/features/kube_features.go;
  v0.19 removed the alpha gate, CHANGELOG-0.19.md).
- With the integration on, the devices of each `resourceClaimTemplateName` claim are summed per DeviceClass and
  counted under the name the Configuration maps the class to (`resources.deviceClassMappings[].name`,
  kueue@v0.19.2 pkg/dra/claims.go, pkg/dra/mapper.go); a class no mapping names makes the Workload
  Inadmissible: `DeviceClass <class> is not mapped in DRA configuration for podset <name>` (claims.go).

What it deliberately does not do: read the cluster (`kube/kueue.py` hands in the release, the gates and the
Configuration), or check quota (`fit.py` does, under the mapped name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from raybridge.core.kubeobjects import as_dict

#: The releases where each gate decides (inclusive lower bounds), and its default there.
ALPHA_GATE = "DynamicResourceAllocation"
ALPHA_SINCE = (0, 14)
INTEGRATION_GATE = "KueueDRAIntegration"
INTEGRATION_SINCE = (0, 18)


def release_tuple(release: Optional[str]) -> Optional[tuple[int, int]]:
    """(major, minor) of "v0.19.2", None when it is no such text."""
    found = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", (release or "").strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


@dataclass(frozen=True)
class KueueDraSettings:
    """What decides DRA counting in a cluster's Kueue: its release, the feature gates its controller manager is
    started with (`--feature-gates`), and its Configuration's `deviceClassMappings` (DeviceClass -> resource name;
    None when the Configuration could not be read)."""

    release: Optional[str]
    gates: Mapping[str, bool] = field(default_factory=dict)
    mappings: Optional[Mapping[str, str]] = None
    #: Why the release or the Configuration is unknown, in words.
    unknown_because: str = ""


def device_class_mappings(configuration: Any) -> dict[str, str]:
    """DeviceClass name -> the resource Kueue counts it as, from a Configuration (`resources.deviceClassMappings`,
    kueue@v0.19.2 apis/config/v1beta2/configuration_types.go DeviceClassMapping)."""
    found: dict[str, str] = {}
    for mapping in as_dict(as_dict(configuration).get("resources")).get("deviceClassMappings") or []:
        entry = as_dict(mapping)
        name = entry.get("name")
        for device_class in entry.get("deviceClassNames") or []:
            if isinstance(name, str) and isinstance(device_class, str):
                found.setdefault(device_class, name)
    return found


def feature_gates(args: Any) -> dict[str, bool]:
    """The `--feature-gates=A=true,B=false` of a container's args (the last flag wins, as Go's flag package does)."""
    gates: dict[str, bool] = {}
    for arg in args if isinstance(args, list) else []:
        if isinstance(arg, str) and arg.startswith("--feature-gates="):
            for pair in arg.split("=", 1)[1].split(","):
                key, _, value = pair.partition("=")
                if key.strip() and value.strip().lower() in ("true", "false"):
                    gates[key.strip()] = value.strip().lower() == "true"
    return gates


@dataclass(frozen=True)
class DraCounting:
    """The verdict for one DeviceClass: counted under `resource`, or `problem` (why the job would go uncounted or
    wait forever), or neither when it cannot be told (`note` says why)."""

    resource: Optional[str] = None
    problem: Optional[str] = None
    note: Optional[str] = None


def dra_counting(settings: KueueDraSettings, device_class: str, gpus: int) -> DraCounting:
    """Whether this Kueue counts `gpus` devices of `device_class` against quota."""
    release = release_tuple(settings.release)
    if release is None:
        why = settings.unknown_because or "its release is unknown"
        return DraCounting(note=f"whether Kueue counts the job's DRA devices was not checked ({why})")
    shown = settings.release
    uncounted = f"its {gpus} GPUs (DRA devices of class {device_class}) would be admitted without being counted against any quota"
    if release < ALPHA_SINCE:
        return DraCounting(problem=f"this cluster's Kueue {shown} does not count DRA devices: {uncounted} (Kueue counts them from v0.18 on)")
    if release < INTEGRATION_SINCE and not settings.gates.get(ALPHA_GATE, False):
        return DraCounting(
            problem=f"this cluster's Kueue {shown} counts DRA devices only with its alpha feature gate {ALPHA_GATE}=true, which is off: "
            f"{uncounted}"
        )
    if release >= INTEGRATION_SINCE and not settings.gates.get(INTEGRATION_GATE, True):
        return DraCounting(problem=f"this cluster's Kueue {shown} runs with {INTEGRATION_GATE}=false: {uncounted}")
    if settings.mappings is None:
        why = settings.unknown_because or "its Configuration could not be read"
        return DraCounting(note=f"which resource Kueue counts DeviceClass {device_class} as was not checked ({why})")
    resource = settings.mappings.get(device_class)
    if resource is None:
        mapped = ", ".join(f"{c} -> {r}" for c, r in sorted(settings.mappings.items())) or "none"
        return DraCounting(
            problem=f"DeviceClass {device_class} is not in Kueue's deviceClassMappings (mapped: {mapped}): Kueue would hold the job "
            f"Inadmissible for good (\"DeviceClass {device_class} is not mapped in DRA configuration\")"
        )
    return DraCounting(resource=resource)
