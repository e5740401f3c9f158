"""Which nodes a pod may land on: Kubernetes' taint, nodeSelector and node-affinity rules on plain dicts.

The node-scale-adjuster has to know which nodes a pending pod could use (for
their GPU memory, vendor and GPU count) and which pods can share a node; the
sizing path asks whether a tainted node counts as capacity. Both ask here, so
each matching rule is written once, the way kube-scheduler applies it
(k8s.io/component-helpers/scheduling/corev1: ToleratesTaint,
nodeaffinity.NodeSelector).

Pure and forgiving: objects come from user files and API servers, so
`constraint_problem` says what is malformed instead of raising, and the
matchers treat a malformed rule as matching nothing. It knows nothing about
pod (anti-)affinity, topology spread or resources: those depend on other pods.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

#: Taint effects that keep a pod off a node (PreferNoSchedule only discourages).
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
#: The DefaultTolerationSeconds admission plugin adds these to every pod; they say nothing
#: about which node group a pod needs (no schedulable node carries those taints).
DEFAULT_NOT_READY_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
#: Taints a node is born with and loses once it is up, each removed by a controller of its own, that say nothing about
#: which pods belong there: the NotReady taint kube-apiserver's TaintNodesByCondition admission gives every new Node
#: (kubernetes plugin/pkg/admission/nodetaint/admission.go) until the node lifecycle controller sees it Ready
#: (pkg/controller/nodelifecycle, doNoScheduleTaintingPass); an external cloud provider's, until cloud-controller-manager
#: has initialized the node; Karpenter's, until the node has registered with it.
STARTUP_TAINT_KEYS = frozenset({"node.kubernetes.io/not-ready", "node.cloudprovider.kubernetes.io/uninitialized", "karpenter.sh/unregistered"})


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ToleratesTaint: effect (empty matches all), key (empty with Exists matches all), value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    key = toleration.get("key") or ""
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taints(taints: Sequence[Any], tolerations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The NoSchedule/NoExecute taints that no toleration tolerates."""
    return [
        t
        for t in taints
        if isinstance(t, dict) and t.get("effect") in BLOCKING_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)
    ]


def is_default_not_ready_toleration(toleration: Mapping[str, Any]) -> bool:
    return toleration.get("key") in DEFAULT_NOT_READY_TOLERATION_KEYS and toleration.get("effect") == "NoExecute"


def matches_node_selector(selector: Mapping[str, str], labels: Mapping[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _int(text: Any) -> Optional[int]:
    try:
        return int(str(text), 10)
    except ValueError:
        return None


def expression_matches(expr: Mapping[str, Any], value: Optional[str], present: bool) -> bool:
    """One node selector requirement on one label's value (`present`: the node has the label at all)."""
    operator = expr.get("operator")
    values = expr.get("values") or []
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        have, want = _int(value), _int(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, Any], node_name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    for expr in expressions:
        key = expr.get("key")
        if not expression_matches(expr, labels.get(key), key in labels):
            return False
    for expr in fields:
        if expr.get("key") != "metadata.name" or not expression_matches(expr, node_name, True):
            return False
    return True


def matches_required_affinity(terms: Sequence[Mapping[str, Any]], labels: Mapping[str, Any], node_name: str) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution: the terms are ORed, a term's expressions ANDed."""
    return any(_term_matches(term, labels, node_name) for term in terms)


def admits(
    selector: Mapping[str, str], terms: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]],
    labels: Mapping[str, Any], node_name: str, taints: Sequence[Any],
) -> bool:
    """Whether a node takes pods with this nodeSelector, required node affinity (none: any) and tolerations."""
    if not matches_node_selector(selector, labels):
        return False
    if terms and not matches_required_affinity(terms, labels, node_name):
        return False
    return not untolerated_taints(taints, tolerations)


def required_node_affinity_terms(spec: Mapping[str, Any]) -> Optional[list[dict[str, Any]]]:
    """The pod's required node-affinity terms, or None when it has none (malformed shapes: see constraint_problem)."""
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node_affinity, dict) else None
    if not isinstance(required, dict):
        return None
    terms = required.get("nodeSelectorTerms")
    return terms if isinstance(terms, list) else None


def _str_map_problem(value: Any, what: str) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return f"{what} is not a map of strings"
    return None


def _requirement_problem(expr: Any, what: str) -> Optional[str]:
    if not isinstance(expr, dict) or not isinstance(expr.get("key"), str):
        return f"{what} is not a requirement with a key"
    operator = expr.get("operator")
    if operator not in SELECTOR_OPERATORS:
        return f"{what} has operator {operator!r}, not one of {', '.join(SELECTOR_OPERATORS)}"
    values = expr.get("values")
    if values is not None and (not isinstance(values, list) or not all(isinstance(v, str) for v in values)):
        return f"{what} values are not a list of strings"
    return None


def constraint_problem(spec: Mapping[str, Any]) -> Optional[str]:
    """What is malformed in a pod spec's nodeSelector, tolerations or required node affinity, or None."""
    problem = _str_map_problem(spec.get("nodeSelector"), "spec.nodeSelector")
    if problem:
        return problem
    tolerations = spec.get("tolerations")
    if tolerations is not None:
        if not isinstance(tolerations, list):
            return "spec.tolerations is not a list"
        for i, tol in enumerate(tolerations):
            if not isinstance(tol, dict):
                return f"spec.tolerations[{i}] is not an object"
            for field in ("key", "operator", "value", "effect"):
                if tol.get(field) is not None and not isinstance(tol.get(field), str):
                    return f"spec.tolerations[{i}].{field} is not a string"
            if tol.get("operator") not in (None, "", "Equal", "Exists"):
                return f"spec.tolerations[{i}].operator {tol.get('operator')!r} is not Equal or Exists"
    affinity = spec.get("affinity")
    if affinity is None:
        return None
    if not isinstance(affinity, dict):
        return "spec.affinity is not an object"
    node_affinity = affinity.get("nodeAffinity")
    if node_affinity is None:
        return None
    if not isinstance(node_affinity, dict):
        return "spec.affinity.nodeAffinity is not an object"
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if not isinstance(required, dict) or not isinstance(required.get("nodeSelectorTerms"), list):
        return f"{where} has no list of nodeSelectorTerms"
    for i, term in enumerate(required["nodeSelectorTerms"]):
        if not isinstance(term, dict):
            return f"{where}.nodeSelectorTerms[{i}] is not an object"
        for part in ("matchExpressions", "matchFields"):
            exprs = term.get(part)
            if exprs is None:
                continue
            if not isinstance(exprs, list):
                return f"{where}.nodeSelectorTerms[{i}].{part} is not a list"
            for j, expr in enumerate(exprs):
                problem = _requirement_problem(expr, f"{where}.nodeSelectorTerms[{i}].{part}[{j}]")
                if problem:
                    return problem
    return None
