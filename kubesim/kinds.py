"""Per-kind registry behaviour of the built-in kinds, and of custom resources.

Each `Strategy` does what the matching strategy in k8s.io/kubernetes/pkg/registry
does for a kind: defaulting (the handful of defaults client code commonly reads
back: pod restartPolicy/dnsPolicy/schedulerName, service clusterIP and port
defaults, job selector and labels, deployment strategy, ...), resetting status
on create, admission that needs other objects (pod priority, service account
name), kind-specific validation and immutability, what a /status write may
change, and when `metadata.generation` moves.

Every built-in kind is also checked against Kubernetes' OpenAPI schema
(validation.py); custom resources against their CRD's schema. Pod specs, in
Pods and in the templates of PodTemplates, Jobs and Deployments, get the Go
validation written in podspec.py; Pods the Priority admission plugin
(`admit_priority`).

What this does not do: it is not a full port of the Go validation; only the
rules written in each strategy exist. No controllers run (no Deployment
rollout, no Job pods, no endpoints), apart from the namespace and
garbage-collection behaviour in the store.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from fractions import Fraction
from typing import Any, Protocol

from . import cel
from .errors import (
    ApiError,
    FieldError,
    bad_request,
    forbidden,
    forbidden_error,
    invalid_value,
    not_supported,
    required_value,
)
from .podspec import validate_pod_spec
from .resources import ResourceType
from .selectors import from_label_selector_object
from .validation import (
    apply_schema_defaults,
    builtin_field_errors,
    decode_builtin,
    drop_nulls,
    handle_unknown_fields,
    list_type_errors,
    schema_field_errors,
    served_schema,
    validate_labels,
)


class StoreView(Protocol):
    """What a strategy may ask of the store (called with the store lock held)."""

    def find(self, group: str, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None: ...

    def find_all(self, group: str, kind: str) -> list[dict[str, Any]]: ...

    def allocate_cluster_ip(self) -> str: ...

    def allocate_node_port(self) -> int: ...


class Strategy:
    """Defaults for kinds without special behaviour."""

    def __init__(self, resource: ResourceType) -> None:
        self.resource = resource

    def decode(self, obj: dict[str, Any], field_validation: str) -> list[str]:
        """Turn a request body into an object in place (400 for what cannot be decoded); returns warnings."""
        cleaned = drop_nulls(obj)
        obj.clear()
        obj.update(cleaned)
        return decode_builtin(obj, field_validation)

    def default(self, obj: dict[str, Any]) -> None:
        """Defaulting, applied to every write."""

    def prepare_create(self, obj: dict[str, Any], view: StoreView) -> None:
        """Create-only preparation (status reset, allocation, admission)."""
        if self.resource.has_status and self.resource.kind != "Node":
            obj.pop("status", None)

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any], view: StoreView) -> None:
        """Update-only preparation (keep allocated values)."""

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        return []

    def schema_errors(self, obj: dict[str, Any]) -> list[FieldError]:
        """Violations of the kind's OpenAPI schema (required fields, enums, ...)."""
        return builtin_field_errors(obj)

    def rule_errors(
        self, obj: dict[str, Any], old: dict[str, Any] | None, prior: list[FieldError]
    ) -> tuple[list[FieldError], list[str]]:
        """CEL rule (`x-kubernetes-validations`) errors and ratcheting warnings; none for built-in kinds."""
        return [], []

    def after_hooks(self, obj: dict[str, Any]) -> None:
        """Re-normalise what mutating hooks returned (unknown fields a webhook adds are dropped)."""
        cleaned = drop_nulls(obj)
        obj.clear()
        obj.update(cleaned)
        decode_builtin(obj, "Ignore")
        self.default(obj)

    def status_update(self, body: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        """The object a /status write stores: built-ins keep spec (and ownerReferences) from `old`."""
        new = copy.deepcopy(body)
        if "spec" in old:
            new["spec"] = copy.deepcopy(old["spec"])
        else:
            new.pop("spec", None)
        meta = new.setdefault("metadata", {})
        for key in ("ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old["metadata"]:
                meta[key] = copy.deepcopy(old["metadata"][key])
            else:
                meta.pop(key, None)
        return new

    def generation_changed(self, new: dict[str, Any], old: dict[str, Any]) -> bool:
        return new.get("spec") != old.get("spec")


# --- quantities and pods -------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1, "k": 10**3,
            "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


def parse_quantity(text: Any) -> Fraction | None:
    match = _QUANTITY.match(str(text).strip())
    if not match:
        return None
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or [] if isinstance(c, dict)]


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for container in _containers(spec):
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = str(container.get("image", ""))
        tag = image.rsplit("/", 1)[-1]
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        resources = container.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")


def qos_class(spec: dict[str, Any]) -> str:
    containers = _containers(spec)
    any_set = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or parse_quantity(requests.get(name, limits[name])) != parse_quantity(limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def admit_priority(pod: dict[str, Any], view: StoreView) -> None:
    """The Priority admission plugin on a pod's CREATE (a mutating plugin: it runs before validation).

    kubernetes@v1.33 plugin/pkg/admission/priority/admission.go (admitPod,
    getDefaultPriorityClass): the class named, else the lowest-valued
    globalDefault class, else priority 0 and PreemptLowerPriority; a class that
    does not exist, or a `priority` or `preemptionPolicy` in the pod that
    differs from what the class gives, is 403 Forbidden.
    """
    spec, name = pod["spec"], pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
    class_name = spec.get("priorityClassName")
    if class_name:
        priority_class = view.find("scheduling.k8s.io", "PriorityClass", class_name, None)
        if priority_class is None:
            raise forbidden_error("", "pods", name, f"no PriorityClass with name {class_name} was found")
    else:
        defaults = [p for p in view.find_all("scheduling.k8s.io", "PriorityClass") if p.get("globalDefault")]
        priority_class = min(defaults, key=lambda p: p.get("value", 0)) if defaults else None
        if priority_class is not None:
            spec["priorityClassName"] = priority_class["metadata"]["name"]
    priority = priority_class.get("value", 0) if priority_class is not None else 0
    policy = (priority_class or {}).get("preemptionPolicy", "PreemptLowerPriority")
    if "priority" in spec and spec["priority"] != priority:
        raise forbidden_error("", "pods", name, f"the integer value of priority ({spec['priority']}) must not be "
                                                f"provided in pod spec; priority admission controller computed "
                                                f"{priority} from the given PriorityClass name")
    spec["priority"] = priority
    if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
        raise forbidden_error("", "pods", name, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) "
                                                f"must not be provided in pod spec; priority admission controller "
                                                f"computed {policy} from the given PriorityClass name")
    spec["preemptionPolicy"] = policy


_POD_MUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


class PodStrategy(Strategy):
    def default(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        default_pod_spec(spec)
        spec.setdefault("enableServiceLinks", True)

    def prepare_create(self, obj: dict[str, Any], view: StoreView) -> None:
        spec = obj["spec"]
        # ServiceAccount admission.
        account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = spec["serviceAccount"] = account
        admit_priority(obj, view)
        # DefaultTolerationSeconds admission.
        tolerations = spec.setdefault("tolerations", [])
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(t.get("key") == key for t in tolerations):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any], view: StoreView) -> None:
        # The Priority plugin on UPDATE: what it set on create is kept when the update leaves it out.
        spec, previous = new.setdefault("spec", {}), old.get("spec") or {}
        for key in ("priority", "preemptionPolicy"):
            if key not in spec and key in previous:
                spec[key] = previous[key]

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = validate_pod_spec(obj.get("spec"), "spec")
        if old is not None and not errors:
            errors += self._immutable(obj["spec"], old.get("spec") or {})
        return errors

    @staticmethod
    def _immutable(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        def neutral(spec: dict[str, Any]) -> dict[str, Any]:
            spec = copy.deepcopy(spec)
            for key in ("containers", "initContainers"):
                for container in spec.get(key) or []:
                    container.pop("image", None)
            for key in ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "tolerations",
                        "schedulingGates", "ephemeralContainers"):
                spec.pop(key, None)
            return spec

        errors: list[FieldError] = []
        old_tolerations = old.get("tolerations") or []
        if neutral(new) != neutral(old) or any(t not in (new.get("tolerations") or []) for t in old_tolerations):
            errors.append(forbidden("spec", _POD_MUTABLE_MESSAGE))
        old_gates = old.get("schedulingGates") or []
        if any(g not in old_gates for g in new.get("schedulingGates") or []):
            errors.append(forbidden("spec.schedulingGates", "only deletion is allowed, but found new scheduling gate"))
        return errors

class ServiceStrategy(Strategy):
    def default(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        if spec["type"] != "ExternalName":
            spec.setdefault("sessionAffinity", "None")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")

    def prepare_create(self, obj: dict[str, Any], view: StoreView) -> None:
        spec = obj["spec"]
        if spec["type"] != "ExternalName":
            if not spec.get("clusterIP"):
                spec["clusterIP"] = view.allocate_cluster_ip()
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            for port in spec.get("ports") or []:
                port.setdefault("nodePort", view.allocate_node_port())
        obj["status"] = {"loadBalancer": {}}

    def prepare_update(self, new: dict[str, Any], old: dict[str, Any], view: StoreView) -> None:
        spec, previous = new["spec"], old.get("spec") or {}
        if spec.get("type") == previous.get("type"):
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if key not in spec and key in previous:
                    spec[key] = copy.deepcopy(previous[key])
            old_ports = {(p.get("port"), p.get("protocol")): p for p in previous.get("ports") or []}
            for port in spec.get("ports") or []:
                before = old_ports.get((port.get("port"), port.get("protocol")))
                if before and "nodePort" in before:
                    port.setdefault("nodePort", before["nodePort"])

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errors: list[FieldError] = []
        kinds = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
        if spec.get("type") not in kinds:
            errors.append(not_supported("spec.type", spec.get("type"), kinds))
        ports = spec.get("ports") or []
        if not ports and spec.get("clusterIP") != "None" and spec.get("type") != "ExternalName":
            errors.append(required_value("spec.ports"))
        for index, port in enumerate(ports):
            if len(ports) > 1 and not port.get("name"):
                errors.append(required_value(f"spec.ports[{index}].name"))
            number = port.get("port")
            if not isinstance(number, int) or not 0 < number < 65536:
                errors.append(invalid_value(f"spec.ports[{index}].port", number, "must be between 1 and 65535, inclusive"))
        if old is not None:
            previous = old.get("spec") or {}
            if previous.get("type") == spec.get("type") and previous.get("clusterIP") and spec.get("clusterIP") != previous.get("clusterIP"):
                errors.append(invalid_value("spec.clusterIPs[0]", spec.get("clusterIP", ""), "may not change once set"))
        return errors


class NamespaceStrategy(Strategy):
    def default(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"].get("name")
        if name:
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name

    def prepare_create(self, obj: dict[str, Any], view: StoreView) -> None:
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        obj["status"] = {"phase": "Active"}


class SecretStrategy(Strategy):
    def decode(self, obj: dict[str, Any], field_validation: str) -> list[str]:
        warnings = super().decode(obj, field_validation)
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                raise bad_request(
                    f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0 (key {key})'
                ) from None
        string_data = obj.pop("stringData", None) or {}
        if string_data:
            data = obj.setdefault("data", {})
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        return warnings

    def default(self, obj: dict[str, Any]) -> None:
        obj.setdefault("type", "Opaque")

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = _config_keys(obj.get("data"), "data")
        if old is not None:
            if obj.get("type") != old.get("type"):
                errors.append(invalid_value("type", obj.get("type"), "field is immutable"))
            errors += _immutable_data(obj, old, ("data",))
        return errors


class ConfigMapStrategy(Strategy):
    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = _config_keys(obj.get("data"), "data") + _config_keys(obj.get("binaryData"), "binaryData")
        if old is not None:
            errors += _immutable_data(obj, old, ("data", "binaryData"))
        return errors


_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _config_keys(data: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in data or {}:
        if not _CONFIG_KEY.match(key) or len(key) > 253:
            errors.append(
                invalid_value(
                    path,
                    key,
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                    "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                )
            )
    return errors


def _immutable_data(obj: dict[str, Any], old: dict[str, Any], fields: tuple[str, ...]) -> list[FieldError]:
    if not old.get("immutable"):
        return []
    errors: list[FieldError] = []
    if not obj.get("immutable"):
        errors.append(forbidden("immutable", "field is immutable when `immutable` is set"))
    for field in fields:
        if obj.get(field) != old.get(field):
            errors.append(forbidden(field, "field is immutable when `immutable` is set"))
    return errors


def _selector_errors(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors: list[FieldError] = []
    selector = spec.get("selector")
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    errors += validate_labels("spec.template.metadata.labels", template_labels)
    if not selector:
        errors.append(required_value("spec.selector"))
    elif not from_label_selector_object(selector).matches(template_labels):
        errors.append(
            invalid_value("spec.template.metadata.labels", str(template_labels), "`selector` does not match template `labels`")
        )
    if old is not None and selector != (old.get("spec") or {}).get("selector"):
        errors.append(invalid_value("spec.selector", str(selector), "field is immutable"))
    return errors


class DeploymentStrategy(Strategy):
    def default(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            strategy.setdefault("type", "RollingUpdate")
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))

    def prepare_create(self, obj: dict[str, Any], view: StoreView) -> None:
        obj["status"] = {}

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        return _selector_errors(obj, old) + validate_pod_spec((spec.get("template") or {}).get("spec"), "spec.template.spec")

    def status_update(self, body: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        new = super().status_update(body, old)
        if "labels" in old["metadata"]:
            new["metadata"]["labels"] = copy.deepcopy(old["metadata"]["labels"])
        else:
            new["metadata"].pop("labels", None)
        return new

    def generation_changed(self, new: dict[str, Any], old: dict[str, Any]) -> bool:
        return new.get("spec") != old.get("spec") or new["metadata"].get("annotations") != old["metadata"].get("annotations")


class JobStrategy(Strategy):
    def default(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        if "completions" not in spec and "parallelism" not in spec:
            spec["completions"] = 1
            spec["parallelism"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        # The PodSpec defaults apply to the template too, restartPolicy "Always"
        # included, which Job validation then rejects, as on a real server.
        default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))

    def prepare_create(self, obj: dict[str, Any], view: StoreView) -> None:
        spec, meta = obj["spec"], obj["metadata"]
        if not spec.get("manualSelector"):
            uid, name = meta["uid"], meta.get("name", "")
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
            labels.update({
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
                "controller-uid": uid,
                "job-name": name,
            })
        obj["status"] = {}

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        template_spec = (spec.get("template") or {}).get("spec") or {}
        errors = _selector_errors(obj, old) + validate_pod_spec(template_spec, "spec.template.spec")
        policy = template_spec.get("restartPolicy")
        if policy not in ("OnFailure", "Never"):
            errors.append(not_supported("spec.template.spec.restartPolicy", policy, ["OnFailure", "Never"]))
        if old is not None:
            previous = old.get("spec") or {}
            if spec.get("completions") != previous.get("completions"):
                errors.append(invalid_value("spec.completions", spec.get("completions"), "field is immutable"))
            if self._template_change_forbidden(spec, previous, old):
                errors.append(invalid_value("spec.template", "core.PodTemplateSpec{...}", "field is immutable"))
        return errors

    @staticmethod
    def _template_change_forbidden(spec: dict[str, Any], previous: dict[str, Any], old: dict[str, Any]) -> bool:
        new_template, old_template = spec.get("template") or {}, previous.get("template") or {}
        if new_template == old_template:
            return False
        # A suspended Job that never started may change scheduling directives (what Kueue relies on).
        if previous.get("suspend") and not (old.get("status") or {}).get("startTime"):
            def neutral(template: dict[str, Any]) -> dict[str, Any]:
                template = copy.deepcopy(template)
                meta = template.setdefault("metadata", {})
                meta.pop("labels", None)
                meta.pop("annotations", None)
                for key in ("nodeSelector", "tolerations", "affinity", "schedulingGates"):
                    template.setdefault("spec", {}).pop(key, None)
                return template

            return neutral(new_template) != neutral(old_template)
        return True


class PodTemplateStrategy(Strategy):
    """PodTemplates: the pod spec defaults and ValidatePodTemplate (kubernetes@v1.33
    pkg/apis/core/validation/validation.go: ValidatePodTemplate -> ValidatePodTemplateSpec)."""

    def default(self, obj: dict[str, Any]) -> None:
        default_pod_spec(obj.setdefault("template", {}).setdefault("spec", {}))

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        template = obj.get("template") or {}
        errors = validate_labels("template.metadata.labels", (template.get("metadata") or {}).get("labels"))
        return errors + validate_pod_spec(template.get("spec"), "template.spec")


class PriorityClassStrategy(Strategy):
    def default(self, obj: dict[str, Any]) -> None:
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors: list[FieldError] = []
        if not isinstance(obj.get("value"), int):
            errors.append(required_value("value"))
        if old is not None and obj.get("value") != old.get("value"):
            errors.append(forbidden("value", "may not be changed in an update."))
        return errors

    def generation_changed(self, new: dict[str, Any], old: dict[str, Any]) -> bool:
        return False


# Schema errors that stop CEL rules from running (hasBlockingErr in the customresource strategy).
_BLOCKING = frozenset({"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
                       "FieldValueTypeInvalid"})
_NOT_CHECKED = FieldError(
    cel.ROOT, "FieldValueInvalid",
    'Invalid value: "null": some validation rules were not checked because the object was invalid; '
    "correct the existing errors to complete validation",
)


class RoleStrategy(Strategy):
    """Roles and ClusterRoles: each rule as ValidatePolicyRule (pkg/apis/rbac/validation) checks it."""

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        namespaced = self.resource.kind == "Role"
        return [error for i, rule in enumerate(obj.get("rules") or []) for error in _policy_rule_errors(rule, namespaced, f"rules[{i}]")]


def _policy_rule_errors(rule: dict[str, Any], namespaced: bool, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if not rule.get("verbs"):
        errors.append(required_value(f"{path}.verbs", "verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs") or []
    if urls:
        if namespaced:
            errors.append(invalid_value(f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs"))
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            errors.append(invalid_value(f"{path}.nonResourceURLs", urls, "rules cannot apply to both regular resources and non-resource URLs"))
        return errors
    if not rule.get("apiGroups"):
        errors.append(required_value(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not rule.get("resources"):
        errors.append(required_value(f"{path}.resources", "resource rules must supply at least one resource"))
    return errors


class RoleBindingStrategy(Strategy):
    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        if old is not None and obj.get("roleRef") != old.get("roleRef"):
            return [invalid_value("roleRef", "rbac.RoleRef{...}", "cannot change roleRef")]
        return []


class CustomResourceStrategy(Strategy):
    """Custom resources: schema pruning, defaulting, validation (CEL rules included); status and generation from the CRD."""

    def __init__(self, resource: ResourceType) -> None:
        super().__init__(resource)
        assert resource.crd is not None
        self.rules = cel.compile_crd(resource.crd)  # UnsupportedRule: the server does not start

    def rule_errors(
        self, obj: dict[str, Any], old: dict[str, Any] | None, prior: list[FieldError]
    ) -> tuple[list[FieldError], list[str]]:
        version = str(obj.get("apiVersion", "")).rpartition("/")[2]
        assert self.resource.crd is not None
        schema = served_schema(self.resource.crd, version)
        duplicates = list_type_errors(obj, schema)
        if old is not None and list_type_errors(old, schema):
            duplicates = []  # ratcheted: an object that already broke the rule may keep doing so
        prior = prior + duplicates
        tree = self.rules.get(version)
        if tree is None or not tree.has_rules_below:
            return duplicates, []
        if any(e.reason in _BLOCKING for e in prior):
            return duplicates + [_NOT_CHECKED], []
        results = cel.validate(tree, obj, old)
        return duplicates + results.errors, results.warnings

    def decode(self, obj: dict[str, Any], field_validation: str) -> list[str]:
        assert self.resource.crd is not None
        return handle_unknown_fields(obj, field_validation, self.resource.crd)

    def default(self, obj: dict[str, Any]) -> None:
        version = str(obj.get("apiVersion", "")).rpartition("/")[2]
        assert self.resource.crd is not None
        apply_schema_defaults(obj, served_schema(self.resource.crd, version))

    def after_hooks(self, obj: dict[str, Any]) -> None:
        assert self.resource.crd is not None
        handle_unknown_fields(obj, "Ignore", self.resource.crd)
        self.default(obj)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        return []

    def schema_errors(self, obj: dict[str, Any]) -> list[FieldError]:
        assert self.resource.crd is not None
        return schema_field_errors(obj, self.resource.crd)

    def status_update(self, body: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        new = copy.deepcopy(old)
        if "status" in body:
            new["status"] = copy.deepcopy(body["status"])
        else:
            new.pop("status", None)
        new["metadata"]["resourceVersion"] = (body.get("metadata") or {}).get("resourceVersion")
        return new

    def generation_changed(self, new: dict[str, Any], old: dict[str, Any]) -> bool:
        ignored = {"metadata", "apiVersion", "kind"} | ({"status"} if self.resource.has_status else set())

        def content(obj: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in obj.items() if k not in ignored}

        return content(new) != content(old)


_STRATEGIES: dict[tuple[str, str], type[Strategy]] = {
    ("", "Pod"): PodStrategy,
    ("", "Service"): ServiceStrategy,
    ("", "Namespace"): NamespaceStrategy,
    ("", "Secret"): SecretStrategy,
    ("", "ConfigMap"): ConfigMapStrategy,
    ("", "PodTemplate"): PodTemplateStrategy,
    ("apps", "Deployment"): DeploymentStrategy,
    ("batch", "Job"): JobStrategy,
    ("scheduling.k8s.io", "PriorityClass"): PriorityClassStrategy,
    ("rbac.authorization.k8s.io", "Role"): RoleStrategy,
    ("rbac.authorization.k8s.io", "ClusterRole"): RoleStrategy,
    ("rbac.authorization.k8s.io", "RoleBinding"): RoleBindingStrategy,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): RoleBindingStrategy,
}


def strategy_for(resource: ResourceType) -> Strategy:
    if resource.is_custom:
        return CustomResourceStrategy(resource)
    return _STRATEGIES.get((resource.group, resource.kind), Strategy)(resource)


__all__ = ["ApiError", "Strategy", "StoreView", "strategy_for", "parse_quantity", "qos_class"]
