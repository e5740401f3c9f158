"""What `adjuster run` checks once before it acts: will the autoscaler see its placeholders, and is it alone?

Two things no reconcile can repair, read from the cluster at start:

* The placeholders' priority against the cluster autoscaler's
  `--expendable-pods-priority-cutoff` (default -10): a pod whose
  `spec.priority` is below it is expendable, "don't cause scale up"
  (cluster-autoscaler@1.33.6 config/flags/flags.go; core/utils/expendable.go
  IsExpendablePod: `priority < cutoff`; filtered by the second pod list
  processor, core/podlistprocessor/pod_list_processor.go). A PriorityClass
  below the cutoff would make every placeholder invisible to it: that is
  refused (exit 2). The cutoff assumed is said once. ProvisioningRequests are
  built from their PodTemplate without resolving `priorityClassName`
  (provisioningrequest/pods/pods.go), so the check is for `--mode placeholder`.
* KAI's own node-scale-adjuster (chart value `global.clusterAutoscaling`; the
  operator's Deployment `node-scale-adjuster`, pods labelled
  `app=node-scale-adjuster`, kai-scheduler@v0.13.0
  pkg/operator/operands/node_scale_adjuster/resources.go and
  operands/common/common.go DeploymentForKAIConfig; its scaling pods carry the
  labels `shared-gpu-pod-name`/`shared-gpu-pod-namespace`,
  pkg/nodescaleadjuster/scaler/scaling_pod.go): with both running, both ask
  for nodes for the same pods. Found at start, that is refused (exit 2); found
  later, the controller stops creating (`kai_adjuster_pods` each pass).

How placeholders ask for GPUs that differ in memory, and for GPUs that pods claim as DRA devices, is said once
too (`device_choices`), from the settings alone.

The verdicts are pure functions of what was read; `check` does the reading,
through `kube/`'s calls (`kube/scheduling.py`, `kube/provisioning.py`,
`kube/pods.py`) with the `Kube` that `adjuster run` connected. It neither
creates nor changes anything, and maps no error: a failure other than the
403s and 404s it can do without reaches its caller as the client raised it
(`cli/adjuster.py` maps it through `kube.calls`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from raybridge.kai.names import KAI_SCALING_POD_NAME_LABEL, KAI_SCALING_POD_NAMESPACE_LABEL
from raybridge.kube.calls import PermissionDenied
from raybridge.kube.client import Kube
from raybridge.kube.pods import list_pods_by_label
from raybridge.kube.provisioning import provisioning_requests_served
from raybridge.kube.scheduling import read_priority_class_value

#: The label KAI's operator puts on the node-scale-adjuster's pods, and its value.
KAI_ADJUSTER_APP_LABEL = "app"
KAI_ADJUSTER_APP = "node-scale-adjuster"
#: The cluster autoscaler's --expendable-pods-priority-cutoff default (config/flags/flags.go).
AUTOSCALER_DEFAULT_CUTOFF = -10


@dataclass(frozen=True)
class Findings:
    """What to say once at start (`notes`), what to warn of, and what refuses the start (exit 2)."""

    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def priority_verdict(class_name: str, value: Optional[int], cutoff: int, *, readable: bool = True) -> Findings:
    """The placeholders' PriorityClass (`value` None: it does not exist) against the autoscaler's cutoff."""
    if not readable:
        return Findings(warnings=(
            f"cannot read PriorityClass {class_name} (forbidden): assuming its value is at least the cluster autoscaler's "
            f"--expendable-pods-priority-cutoff ({cutoff}), else the autoscaler ignores the placeholders",
        ))
    if value is None:
        return Findings(problems=(
            f"PriorityClass {class_name} does not exist: create it (configs/adjuster/10-priorityclass.yaml, value -1) "
            f"or pass --priority-class",
        ))
    if value < cutoff:
        return Findings(problems=(
            f"PriorityClass {class_name} has value {value}, below the cluster autoscaler's --expendable-pods-priority-cutoff "
            f"({cutoff}): pods below it are expendable and never cause a scale-up, so no placeholder would add a node. "
            f"Give it a value from {cutoff} to -1 (its default is -1), or pass --expendable-pods-priority-cutoff "
            f"as your autoscaler runs it",
        ))
    return Findings(notes=(
        f"placeholders run at priority {value} (PriorityClass {class_name}); assuming the cluster autoscaler's "
        f"--expendable-pods-priority-cutoff is {cutoff}, so it scales up for them",
    ))


def kai_adjuster_pods(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """KAI's own node-scale-adjuster at work: its controller's pods and its scaling pods, as namespace/name."""
    found = []
    for pod in pods:
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
        if meta.get("deletionTimestamp"):
            continue
        if labels.get(KAI_ADJUSTER_APP_LABEL) == KAI_ADJUSTER_APP or (
            KAI_SCALING_POD_NAME_LABEL in labels and KAI_SCALING_POD_NAMESPACE_LABEL in labels
        ):
            found.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return sorted(found)


def kai_adjuster_verdict(found: list[str]) -> Findings:
    if not found:
        return Findings()
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return Findings(problems=(
        f"KAI's own node-scale-adjuster is running ({shown}): both would ask for nodes for the same pods. Turn it off "
        f"(KAI chart value global.clusterAutoscaling=false, or the Config's spec.nodeScaleAdjuster.service.enabled=false) "
        f"before starting this one",
    ))


def provisioning_verdict(served: Optional[bool]) -> Findings:
    """`--mode provisioning-request`: whether the cluster serves `autoscaling.x-k8s.io/v1` ProvisioningRequests
    (None: not allowed to look). v1 ships with cluster-autoscaler 1.31 (1.30 has v1beta1 only:
    cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io at cluster-autoscaler-1.30.7 and -1.31.0), and
    the autoscaler handles them only with --enable-provisioning-requests (default false, config/flags/flags.go),
    which no API shows: said once."""
    flag_note = ("ProvisioningRequests are acted on only by a cluster autoscaler run with --enable-provisioning-requests "
                 "(off by default); a request it never accepts stays without an Accepted condition")
    if served is False:
        return Findings(problems=(
            "--mode provisioning-request: the cluster serves no autoscaling.x-k8s.io/v1 ProvisioningRequest API. Install "
            "the CRD of cluster-autoscaler 1.31 or newer (1.30 serves only v1beta1) and run the autoscaler with "
            "--enable-provisioning-requests, or use --mode placeholder",
        ))
    if served is None:
        return Findings(notes=(flag_note,), warnings=(
            "cannot list ProvisioningRequests (forbidden): whether the cluster serves autoscaling.x-k8s.io/v1 is unknown",
        ))
    return Findings(notes=(flag_note,))


def device_choices(gpu_memory_label: str, autoscaler_reads_dra: bool) -> tuple[str, ...]:
    """How placeholders ask for GPUs the autoscaler must tell apart, said once at start: by their memory (which label),
    and for pods whose GPUs come through ResourceClaims (the device plugin's resource, or not at all)."""
    if gpu_memory_label:
        memory = (f"placeholders for gpu-memory pods on a pool whose GPUs differ in memory (or whose nodes are not known yet) "
                  f"require the node label {gpu_memory_label} above the MiB their pods need, so the autoscaler brings a node type "
                  "whose GPUs hold them: it must know that label of each node type (Karpenter: an instance type's or a NodePool's "
                  "requirement; cluster-autoscaler: the node group's template), else such a placeholder gets no node "
                  "(--gpu-memory-label names another label, '' none)")
    else:
        memory = ("placeholders require no GPU memory (--gpu-memory-label ''): on a pool whose GPUs differ in memory the autoscaler "
                  "may bring GPUs too small for gpu-memory pods; those are asked for again once such a node is there")
    if autoscaler_reads_dra:
        claims = ("pods whose GPUs come through ResourceClaims are left to the autoscaler, which reads them itself "
                  "(--autoscaler-reads-dra true)")
    else:
        claims = ("pods whose GPUs come through ResourceClaims are asked for as the device plugin's resource (nvidia.com/gpu), "
                  "on nodes that have both: the autoscaler reads no DRA (Karpenter's --ignore-dra-requests defaults to true; "
                  "cluster-autoscaler before 1.35 runs without --enable-dynamic-resource-allocation); where it does, pass "
                  "--autoscaler-reads-dra true")
    return memory, claims


def check(kube: Kube, *, mode: str, priority_class: str, cutoff: int, request_timeout: float,
          namespace: str = "default") -> Findings:
    """Read what the verdicts need. API errors other than 403/404 propagate (the caller maps them to exit 3)."""
    notes: list[str] = []
    warnings: list[str] = []
    problems: list[str] = []
    if mode == "placeholder":
        value: Optional[int] = None
        readable = True
        try:
            value = read_priority_class_value(kube, priority_class, request_timeout)
        except PermissionDenied:  # 403
            readable = False
        verdict = priority_verdict(priority_class, value, cutoff, readable=readable)
        notes += verdict.notes
        warnings += verdict.warnings
        problems += verdict.problems
    if mode == "provisioning-request":
        verdict = provisioning_verdict(provisioning_requests_served(kube, namespace, request_timeout))
        notes += verdict.notes
        warnings += verdict.warnings
        problems += verdict.problems
    seen: list[str] = []
    for selector in (f"{KAI_ADJUSTER_APP_LABEL}={KAI_ADJUSTER_APP}", f"{KAI_SCALING_POD_NAME_LABEL},{KAI_SCALING_POD_NAMESPACE_LABEL}"):
        seen += kai_adjuster_pods(list_pods_by_label(kube, selector, request_timeout))
    problems += kai_adjuster_verdict(sorted(set(seen))).problems
    return Findings(tuple(notes), tuple(warnings), tuple(problems))
