"""`adjuster plan`, composed once: the objects it plans from (files or the cluster), the plan, and the manifests one
pass of `adjuster run` would create from them.

Why it exists: what a platform admin previews offline must be what runs in the cluster. The CLI (`adjuster plan`)
and the Python API (`raybridge.adjuster_plan`, `raybridge.adjuster_manifests`) both call here; the decision is the
controller's own (`decision/plan.py` `plan_placeholders`, `decision/scale_adjuster.py` `decide`, `decide_requests`,
`placeholder_manifest`), so the preview and a controller pass cannot drift apart. Files and the cluster give the
planner the same objects: pods, nodes, KAI PodGroups, and the DRA objects (ResourceSlices, DeviceClasses,
ResourceClaims).

What it deliberately does not do: print or parse flags (`cli/adjuster.py`), create anything, or read
ProvisioningRequests (offline, the requests are those a first pass creates for the whole demand).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional, Sequence

from raybridge.adjuster.decision.plan import AdjusterPlan, plan_placeholders
from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings

#: With manifests, the pods left out that are named one by one (the rest are counted by reason).
LEFT_OUT_NAMED = 20


@dataclass(frozen=True)
class PlanInputs:
    """What the planner reads: the pods, the nodes (None: not given), KAI's PodGroups and the DRA objects."""

    pods: Sequence[Any]
    nodes: Optional[Sequence[Any]] = None
    pod_groups: Sequence[Any] = ()
    slices: Sequence[Any] = ()
    classes: Sequence[Any] = ()
    claims: Sequence[Any] = ()
    #: What reading them noticed (a DRA API the cluster does not serve, ...), said by the caller.
    notes: tuple[str, ...] = field(default_factory=tuple)

    def dra(self) -> dict[str, Sequence[Any]]:
        return {"slices": self.slices, "classes": self.classes, "claims": self.claims}


@dataclass(frozen=True)
class ManifestPreview:
    """The objects one pass of `adjuster run` would create now, and the plan behind them."""

    objects: tuple[dict[str, Any], ...]
    plan: AdjusterPlan

    def left_out(self) -> list[str]:
        """Why pods get no placeholder, one line each for the first LEFT_OUT_NAMED, the others counted by reason, and
        what the cap cut (the plan's table and JSON list every one)."""
        plan = self.plan
        said = [f"pod {item.pod} gets no placeholder ({item.code}): {item.reason}" for item in plan.ignored[:LEFT_OUT_NAMED]]
        more: dict[str, int] = {}
        for item in plan.ignored[LEFT_OUT_NAMED:]:
            more[item.code] = more.get(item.code, 0) + 1
        said += [f"{count} more pod{'s' if count != 1 else ''} get no placeholder ({code}); `adjuster plan -o json` (without "
                 "--manifests) gives each one's reason" for code, count in sorted(more.items())]
        cap = plan.cap
        if cap is not None and cap.cut_pods:
            shown = ", ".join(cap.cut_pods[:5]) + (f" and {len(cap.cut_pods) - 5} more" if len(cap.cut_pods) > 5 else "")
            said.append(f"--max-gpus {cap.limit}: {cap.cut_gpus} of the {cap.requested} GPUs asked for are cut, so {len(cap.cut_pods)} "
                        f"pod{'s' if len(cap.cut_pods) != 1 else ''} wait without a placeholder ({shown})")
        return said


def inputs_from_files(pods: str, nodes: Optional[str] = None, podgroups: Optional[str] = None) -> PlanInputs:
    """The objects of `kubectl get -o json|yaml` files (`-` for standard input): pods (and ResourceClaims) from `pods`,
    nodes (and ResourceSlices, DeviceClasses) from `nodes`, KAI PodGroups from `podgroups`."""
    from raybridge.core.dra import CLAIM_KIND, DEVICE_CLASS_KIND, SLICE_KIND
    from raybridge.files import NODE_FILE_KINDS, POD_FILE_KINDS, load_objects, load_objects_of_kinds

    pod_file = load_objects_of_kinds(pods, "Pod", POD_FILE_KINDS)
    node_file = load_objects_of_kinds(nodes, "Node", NODE_FILE_KINDS) if nodes else None
    return PlanInputs(
        pods=pod_file["Pod"],
        nodes=node_file["Node"] if node_file is not None else None,
        pod_groups=load_objects(podgroups, "PodGroup") if podgroups else (),
        slices=node_file[SLICE_KIND] if node_file else (),
        classes=node_file[DEVICE_CLASS_KIND] if node_file else (),
        claims=pod_file[CLAIM_KIND],
    )


def inputs_from_cluster(kube: Any) -> PlanInputs:
    """The pods, nodes, PodGroups and DRA objects of a cluster, read as `adjuster run` reads them (every namespace)."""
    from raybridge.errors import InfraError
    from raybridge.kube.dra import list_dra_objects
    from raybridge.kube.kai import list_pod_groups
    from raybridge.kube.objects import list_nodes, list_pods_all_namespaces

    pods = list_pods_all_namespaces(kube)
    if pods is None:
        raise InfraError("listing pods in every namespace: permission denied; the adjuster's plan needs every pending pod (or give --pods FILE)")
    found = list_dra_objects(kube)
    return PlanInputs(pods=pods, nodes=list_nodes(kube), pod_groups=list_pod_groups(kube), slices=found.slices,
                      classes=found.classes, claims=found.claims or [], notes=tuple(found.notes))  # fmt: skip


def plan(inputs: PlanInputs, settings: AdjusterSettings, now: datetime) -> AdjusterPlan:
    """What the node-scale-adjuster would ask for: the controller's own planner on these objects."""
    return plan_placeholders(inputs.pods, inputs.nodes, settings, now, inputs.pod_groups, **inputs.dra())


def manifests(inputs: PlanInputs, run: RunSettings, now: datetime) -> ManifestPreview:
    """What one pass of `adjuster run` would create now: the same decision (`decide`, `decide_requests`), the same
    manifests. Placeholders of the adjuster's in the pods (by label and namespace) count as existing, as in the
    cluster."""
    from raybridge.adjuster.decision.demand import ClusterSnapshot
    from raybridge.adjuster.decision.scale_adjuster import decide, decide_requests, placeholder_manifest

    snapshot = ClusterSnapshot.read(inputs.pods, inputs.nodes, now, inputs.pod_groups, **inputs.dra())
    objects: list[dict[str, Any]] = []
    if run.mode == "placeholder":
        decision = decide(snapshot, run).decision
        objects = [placeholder_manifest(planned, run) for planned in decision.create]
    else:
        # No ProvisioningRequests are read offline: the requests for the whole demand, as a first pass creates them.
        found = decide_requests(snapshot, [], [], run)
        decision = found.decision
        for planned in found.create:
            objects += [*planned.templates, planned.request]
    return ManifestPreview(tuple(objects), decision.plan)


def adjuster_plan(pods: str, nodes: Optional[str] = None, podgroups: Optional[str] = None,
                  settings: Optional[AdjusterSettings] = None, now: Optional[datetime] = None) -> AdjusterPlan:
    """`adjuster plan` from Python: the plan for the objects of these files (`settings`: the planner's, default
    AdjusterSettings(); `now`: the pods' clock, default now)."""
    return plan(inputs_from_files(pods, nodes, podgroups), settings or AdjusterSettings(), now or _now())


def adjuster_manifests(pods: str, nodes: Optional[str] = None, podgroups: Optional[str] = None,
                       run: Optional[RunSettings] = None, now: Optional[datetime] = None) -> ManifestPreview:
    """`adjuster plan --manifests` from Python: what one pass of `adjuster run` with `run` would create now."""
    return manifests(inputs_from_files(pods, nodes, podgroups), run or RunSettings(), now or _now())


def _now() -> datetime:
    from datetime import timezone

    return datetime.now(timezone.utc)
