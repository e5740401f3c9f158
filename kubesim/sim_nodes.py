"""The node filters the simulated KAI scheduler (sim_gpu.py) and cluster-autoscaler (sim_autoscaler.py) share.

Both decide "can this pod go on this node" with the same three checks as
kube-scheduler (cluster-autoscaler runs kube-scheduler's framework in its own
snapshot), so they are written once, here, from kube-scheduler's plugins:

* NodeResourcesFit (kubernetes@v1.33.0 pkg/scheduler/framework/plugins/noderesources/fit.go,
  fitsRequest): every resource the pod requests, `pods` (one) included, is
  at most the node's allocatable less what the pods bound there request; a
  resource the pod does not request is not checked.
* NodeAffinity (plugins/nodeaffinity/node_affinity.go, Filter, with
  component-helpers@v0.33 scheduling/corev1/nodeaffinity): the nodeSelector's
  labels all match, and one of the requiredDuringScheduling terms matches
  (its expressions ANDed; In, NotIn, Exists, DoesNotExist, Gt, Lt).
* TaintToleration (plugins/tainttoleration/taint_toleration.go, Filter, with
  component-helpers scheduling/corev1 FindMatchingUntoleratedTaint): every
  NoSchedule and NoExecute taint is tolerated (key or empty-key Exists,
  Equal value, empty effect matches all).

Left out: matchFields terms, inter-pod affinity and topology spread (the
adjuster's placeholders carry neither; the workload pods' own are the
scheduler's business and are not what the adjuster decides on), volume and
port filters, and preferred terms (scores, not filters).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterable, Mapping, Optional

from kubesim.sim_common import parse_quantity, pod_requests

GPU_KEY = "nvidia.com/gpu"


def is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) and not (node.get("spec") or {}).get("unschedulable")


def requests_of(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the pod asks of a node: its effective requests and one `pods` slot (noderesources/fit.go computePodResourceRequest)."""
    found = {name: amount for name, amount in pod_requests(pod_spec).items() if amount}
    found["pods"] = Decimal(1)
    return found


def allocatable_of(node: Mapping[str, Any]) -> dict[str, Decimal]:
    return {name: parse_quantity(value) for name, value in ((node.get("status") or {}).get("allocatable") or {}).items()}


def fits_resources(wanted: Mapping[str, Decimal], allocatable: Mapping[str, Decimal], requested: Mapping[str, Decimal]) -> bool:
    """NodeResourcesFit: each requested resource within allocatable less requested (a missing resource is 0)."""
    return all(amount <= allocatable.get(name, Decimal(0)) - requested.get(name, Decimal(0)) for name, amount in wanted.items() if amount)


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression.get("key"), expression.get("operator"), list(expression.get("values") or [])
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def matches_node(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """NodeAffinity's Filter: the nodeSelector and the required node affinity."""
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    return any(term.get("matchExpressions") and all(_expression_matches(e, labels) for e in term["matchExpressions"]) for term in terms)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return bool(toleration.get("key")) and (toleration.get("value") or "") == (taint.get("value") or "")


def tolerates_taints(pod_spec: Mapping[str, Any], taints: Iterable[Mapping[str, Any]]) -> bool:
    """TaintToleration's Filter: every NoSchedule / NoExecute taint tolerated (PreferNoSchedule only scores)."""
    tolerations = pod_spec.get("tolerations") or []
    return all(any(_tolerates(t, taint) for t in tolerations) for taint in taints if taint.get("effect") in ("NoSchedule", "NoExecute"))


def pod_fits_node(pod_spec: Mapping[str, Any], labels: Mapping[str, str], taints: Iterable[Mapping[str, Any]],
                  allocatable: Mapping[str, Decimal], requested: Mapping[str, Decimal], wanted: Optional[Mapping[str, Decimal]] = None) -> bool:
    """All three filters; `wanted` defaults to the pod's own requests."""
    return (matches_node(pod_spec, labels) and tolerates_taints(pod_spec, taints)
            and fits_resources(requests_of(pod_spec) if wanted is None else wanted, allocatable, requested))
