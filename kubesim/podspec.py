"""Pod spec validation as kube-apiserver's Go code does it, for Pods and pod templates.

What a real server refuses in a pod spec it refuses in a Pod, a PodTemplate,
a Job's or a Deployment's template alike (ValidatePodSpec, reached through
ValidatePodTemplateSpec). These are the rules a raybridge manifest can break,
with the real field paths and messages (422 Invalid), each from
kubernetes@v1.33 pkg/apis/core/validation/validation.go unless noted:

* containers: at least one, names (DNS-1123 labels, unique across containers
  and init containers), an image (validateContainers, validateInitContainers,
  validateContainerCommon);
* resources (validateResourceRequirements, ValidateResourceQuantityValue,
  ValidateNonnegativeQuantity): no negative quantity; extended resources
  (a domain other than kubernetes.io, e.g. `nvidia.com/gpu`) and hugepages are
  integers, their request equals their limit, and a request without a limit
  is refused; for the rest a request may not exceed its limit. Quantities have
  been rounded up to milli units first (SetDefaults_ResourceList);
* restartPolicy (validateRestartPolicy), nodeSelector (ValidateLabels of
  apimachinery@v0.33.1 pkg/apis/meta/v1/validation), affinity
  (validateAffinity: node selector terms and requirements, weights, pod
  affinity terms' topologyKey and label selectors), tolerations
  (ValidateTolerations, validateTaintEffect).

Field errors print their values as Go does (field.Error.ErrorBody in
apimachinery@v0.33.1 pkg/util/validation/field/errors.go): strings quoted,
structs such as a Toleration or a Quantity passed by value as `%#v`.

What this does not do: volumes, probes, ports, env, security contexts,
DNS config, topology spread constraints, resource claims, pod-level
resources, resource names themselves and the update rules beyond what
kinds.py checks. Where Go iterates a map (resource lists, labels), the order
of several errors is Go's random map order; here it is the order written.
"""

from __future__ import annotations

from typing import Any

from .errors import FieldError, forbidden, go_quote, invalid_value, not_supported, required_value
from .quantity import Quantity, QuantityError, quantity_from_json
from .validation import label_value_problems, qualified_name_problems, validate_name

__all__ = ["label_name_errors", "labels_errors", "validate_pod_spec", "is_extended_resource"]

# kubernetes@v1.33 pkg/apis/core/validation/validation.go
_NEGATIVE = "must be greater than or equal to 0"
_NOT_INTEGER = "must be an integer"
_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_TOLERATION_OPERATORS = ["Equal", "Exists"]
_TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
_QOS_RESOURCES = ("cpu", "memory")


def label_name_errors(path: str, name: Any) -> list[FieldError]:
    """ValidateLabelName: one error per problem."""
    return [invalid_value(path, name, problem) for problem in qualified_name_problems(str(name))]


def labels_errors(path: str, labels: Any) -> list[FieldError]:
    """ValidateLabels (a nodeSelector, a selector's matchLabels)."""
    errors: list[FieldError] = []
    for key, value in (labels or {}).items():
        errors += label_name_errors(path, key)
        errors += [invalid_value(path, value, problem) for problem in label_value_problems(str(value))]
    return errors


# --- resources -------------------------------------------------------------------------


def is_native_resource(name: str) -> bool:
    """IsNativeResource (pkg/apis/core/helper/helpers.go): no domain, or a kubernetes.io one."""
    return "/" not in name or "kubernetes.io/" in name


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_extended_resource(name: str) -> bool:
    """IsExtendedResourceName: outside kubernetes.io, not `requests.*`, a qualified name once prefixed."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not qualified_name_problems(f"requests.{name}")


def _overcommit_allowed(name: str) -> bool:
    """IsOvercommitAllowed: native resources other than hugepages."""
    return is_native_resource(name) and not is_hugepages(name)


def _resource_quantities(values: Any) -> dict[str, Quantity]:
    """A resource list as the validation sees it: parsed (decoding already refused what does not parse), milli-rounded."""
    out: dict[str, Quantity] = {}
    for name, raw in (values or {}).items():
        try:
            out[str(name)] = quantity_from_json(raw).milli_rounded()
        except QuantityError:
            continue  # refused with 400 when the body was decoded
    return out


def _quantity_value_errors(name: str, quantity: Quantity, path: str) -> list[FieldError]:
    """ValidateResourceQuantityValue: not negative; integer resources whole."""
    errors: list[FieldError] = []
    if quantity.value < 0:
        errors.append(invalid_value(path, quantity.canonical(), _NEGATIVE))
    if is_extended_resource(name) and quantity.milli_value() % 1000 != 0:
        errors.append(FieldError(path, "FieldValueInvalid", f"Invalid value: {quantity.go_repr()}: {_NOT_INTEGER}"))
    return errors


def resource_requirements_errors(resources: Any, path: str) -> list[FieldError]:
    """validateResourceRequirements of one container."""
    if not isinstance(resources, dict):
        return []
    limits, requests = _resource_quantities(resources.get("limits")), _resource_quantities(resources.get("requests"))
    limits_path, requests_path = f"{path}.limits", f"{path}.requests"
    errors: list[FieldError] = []
    cpu_or_memory = hugepages = False
    for name, quantity in limits.items():
        errors += _quantity_value_errors(name, quantity, f"{limits_path}[{name}]")
        hugepages = hugepages or is_hugepages(name)
        cpu_or_memory = cpu_or_memory or name in _QOS_RESOURCES
    for name, quantity in requests.items():
        errors += _quantity_value_errors(name, quantity, f"{requests_path}[{name}]")
        limit = limits.get(name)
        if limit is not None:
            if quantity.value != limit.value and not _overcommit_allowed(name):
                errors.append(invalid_value(requests_path, quantity.canonical(),
                                            f"must be equal to {name} limit of {limit.canonical()}"))
            elif quantity.value > limit.value:
                errors.append(invalid_value(requests_path, quantity.canonical(),
                                            f"must be less than or equal to {name} limit of {limit.canonical()}"))
        elif not _overcommit_allowed(name):
            errors.append(required_value(limits_path, "Limit must be set for non overcommitable resources"))
        hugepages = hugepages or is_hugepages(name)
        cpu_or_memory = cpu_or_memory or name in _QOS_RESOURCES
    if hugepages and not cpu_or_memory:
        errors.append(forbidden(path, "HugePages require cpu or memory"))
    return errors


# --- tolerations, node selectors, affinity ------------------------------------------------------


def _go_toleration(toleration: dict[str, Any]) -> str:
    """`%#v` of a core.Toleration (the pointer TolerationSeconds prints as an address in Go)."""
    seconds = "(*int64)(nil)" if toleration.get("tolerationSeconds") is None else "(*int64)(0xc000000000)"
    fields = ", ".join(f'{key.capitalize()}:{go_quote(str(toleration.get(key) or ""))}'
                       for key in ("key", "operator", "value", "effect"))
    return f"core.Toleration{{{fields}, TolerationSeconds:{seconds}}}"


def tolerations_errors(tolerations: Any, path: str) -> list[FieldError]:
    """ValidateTolerations."""
    errors: list[FieldError] = []
    for index, toleration in enumerate(tolerations or []):
        if not isinstance(toleration, dict):
            continue
        base = f"{path}[{index}]"
        key, operator = str(toleration.get("key") or ""), str(toleration.get("operator") or "")
        value, effect = str(toleration.get("value") or ""), str(toleration.get("effect") or "")
        if key:
            errors += label_name_errors(f"{base}.key", key)
        if not key and operator != "Exists":
            errors.append(invalid_value(f"{base}.operator", operator,
                                        'operator must be Exists when `key` is empty, which means "match all values '
                                        'and all keys"'))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(invalid_value(f"{base}.effect", effect,
                                        "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            problems = label_value_problems(value)
            if problems:
                errors.append(invalid_value(f"{base}.operator", value, ";".join(problems)))
        elif operator == "Exists":
            if value:
                errors.append(FieldError(f"{base}.operator", "FieldValueInvalid",
                                         f"Invalid value: {_go_toleration(toleration)}: value must be empty when "
                                         "`operator` is 'Exists'"))
        else:
            errors.append(not_supported(f"{base}.operator", operator, _TOLERATION_OPERATORS))
        if effect and effect not in _TAINT_EFFECTS:
            errors.append(not_supported(f"{base}.effect", effect, _TAINT_EFFECTS))
    return errors


def _node_selector_requirement_errors(requirement: Any, path: str, check_values: bool) -> list[FieldError]:
    """ValidateNodeSelectorRequirement."""
    if not isinstance(requirement, dict):
        return []
    errors: list[FieldError] = []
    operator, values = requirement.get("operator"), requirement.get("values") or []
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(required_value(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(forbidden(f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(required_value(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        errors.append(invalid_value(f"{path}.operator", operator or "", "not a valid selector operator"))
    errors += label_name_errors(f"{path}.key", requirement.get("key") or "")
    if check_values:
        for index, value in enumerate(values):
            errors += [invalid_value(f"{path}.values[{index}]", value, problem)
                       for problem in label_value_problems(str(value))]
    return errors


def _node_selector_term_errors(term: Any, path: str, check_values: bool) -> list[FieldError]:
    """ValidateNodeSelectorTerm (matchExpressions; matchFields only for their operator)."""
    errors: list[FieldError] = []
    term = term if isinstance(term, dict) else {}
    for index, requirement in enumerate(term.get("matchExpressions") or []):
        errors += _node_selector_requirement_errors(requirement, f"{path}.matchExpressions[{index}]", check_values)
    for index, requirement in enumerate(term.get("matchFields") or []):
        field_path = f"{path}.matchFields[{index}]"
        if requirement.get("operator") not in ("In", "NotIn"):
            errors.append(invalid_value(f"{field_path}.operator", requirement.get("operator") or "",
                                        "not a valid selector operator"))
        elif len(requirement.get("values") or []) != 1:
            errors.append(required_value(f"{field_path}.values", "must be only one value when `operator` is 'In' or "
                                                                 "'NotIn' for node field selector"))
        if requirement.get("key") != "metadata.name":
            errors.append(invalid_value(f"{field_path}.key", requirement.get("key") or "",
                                        "not a valid field selector key"))
    return errors


def _label_selector_errors(selector: Any, path: str) -> list[FieldError]:
    """ValidateLabelSelector (apimachinery@v0.33.1 pkg/apis/meta/v1/validation)."""
    if not isinstance(selector, dict):
        return []
    errors = labels_errors(f"{path}.matchLabels", selector.get("matchLabels"))
    for index, requirement in enumerate(selector.get("matchExpressions") or []):
        base = f"{path}.matchExpressions[{index}]"
        operator, values = requirement.get("operator"), requirement.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(required_value(f"{base}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(forbidden(f"{base}.values",
                                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errors.append(invalid_value(f"{base}.operator", operator or "", "not a valid selector operator"))
        errors += label_name_errors(f"{base}.key", requirement.get("key") or "")
        for value_index, value in enumerate(values):
            errors += [invalid_value(f"{base}.values[{value_index}]", value, problem)
                       for problem in label_value_problems(str(value))]
    return errors


def _pod_affinity_term_errors(term: Any, path: str) -> list[FieldError]:
    """validatePodAffinityTerm: selectors, and a topologyKey that is a label name."""
    term = term if isinstance(term, dict) else {}
    errors = _label_selector_errors(term.get("labelSelector"), f"{path}.labelSelector")
    errors += _label_selector_errors(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    topology_key = term.get("topologyKey") or ""
    if not topology_key:
        errors.append(required_value(f"{path}.topologyKey", "can not be empty"))
    return errors + label_name_errors(f"{path}.topologyKey", topology_key)


def _weight_errors(weight: Any, path: str) -> list[FieldError]:
    if isinstance(weight, int) and 0 < weight <= 100:
        return []
    return [invalid_value(path, weight if weight is not None else 0, "must be in the range 1-100")]


def affinity_errors(affinity: Any, path: str) -> list[FieldError]:
    """validateAffinity: node affinity, pod affinity and anti-affinity."""
    if not isinstance(affinity, dict):
        return []
    errors: list[FieldError] = []
    node = affinity.get("nodeAffinity")
    if isinstance(node, dict):
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(required, dict):
            terms_path = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            terms = required.get("nodeSelectorTerms") or []
            if not terms:
                errors.append(required_value(terms_path, "must have at least one node selector term"))
            for index, term in enumerate(terms):
                errors += _node_selector_term_errors(term, f"{terms_path}[{index}]", True)
        preferred_path = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for index, term in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            errors += _weight_errors(term.get("weight"), f"{preferred_path}[{index}].weight")
            errors += _node_selector_term_errors(term.get("preference"), f"{preferred_path}[{index}].preference", False)
    for kind in ("podAffinity", "podAntiAffinity"):
        block = affinity.get(kind)
        if not isinstance(block, dict):
            continue
        required_path = f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
        for index, term in enumerate(block.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            errors += _pod_affinity_term_errors(term, f"{required_path}[{index}]")
        preferred_path = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        for index, term in enumerate(block.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            errors += _weight_errors(term.get("weight"), f"{preferred_path}[{index}].weight")
            errors += _pod_affinity_term_errors(term.get("podAffinityTerm"), f"{preferred_path}[{index}].podAffinityTerm")
    return errors


# --- the pod spec ---------------------------------------------------------------------------


def _container_errors(containers: list[Any], path: str, seen: set[str]) -> list[FieldError]:
    """validateContainers / validateInitContainers, the parts above: name, image, resources."""
    errors: list[FieldError] = []
    for index, container in enumerate(containers):
        base = f"{path}[{index}]"
        if not isinstance(container, dict):
            continue
        name = container.get("name")
        if not name:
            errors.append(required_value(f"{base}.name"))
        else:
            errors += validate_name(f"{base}.name", name, "label")
            if name in seen:
                errors.append(FieldError(f"{base}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            seen.add(name)
        if not container.get("image"):
            errors.append(required_value(f"{base}.image"))
        errors += resource_requirements_errors(container.get("resources"), f"{base}.resources")
    return errors


def validate_pod_spec(spec: Any, path: str) -> list[FieldError]:
    """ValidatePodSpec, in its order, for the rules this module covers."""
    if not isinstance(spec, dict):
        return [required_value(path)]
    errors: list[FieldError] = []
    seen: set[str] = set()
    containers = [c for c in spec.get("containers") or []]
    if not containers:
        errors.append(required_value(f"{path}.containers"))
    errors += _container_errors(containers, f"{path}.containers", seen)
    errors += _container_errors(list(spec.get("initContainers") or []), f"{path}.initContainers", seen)
    policy = spec.get("restartPolicy")
    if policy not in _RESTART_POLICIES:
        errors.append(not_supported(f"{path}.restartPolicy", policy, _RESTART_POLICIES))
    errors += labels_errors(f"{path}.nodeSelector", spec.get("nodeSelector"))
    errors += affinity_errors(spec.get("affinity"), f"{path}.affinity")
    if spec.get("tolerations"):
        errors += tolerations_errors(spec["tolerations"], f"{path}.tolerations")
    return errors
