"""Object validation the API server does itself: names, ObjectMeta, CRD schemas.

Names follow apimachinery's rules (DNS-1123 subdomain by default, DNS-1123
label for namespaces, DNS-1035 label for services) with the same messages.
ObjectMeta checks cover labels, annotations, finalizers and ownerReferences.
Custom resources are checked against their CRD's structural schema (through
`kubesim.schemas.validator`, the same validator `schema_errors` uses), defaulted
from the schema's `default:` values, and have `null` dropped from
non-nullable fields, the way kube-apiserver treats them. Unknown fields follow
the request's `fieldValidation` (Strict: 400 "strict decoding error"; Warn:
dropped with a warning; Ignore: dropped).

Built-in kinds are checked against Kubernetes' own OpenAPI schemas (the
strict JSON Schemas bundled by the `kubernetes-validate` package, latest
release it knows): unknown fields as above, a value of the wrong JSON type is
a 400 decoding error (as decoding into the Go struct fails on a real server),
and missing required fields are 422.

CEL rules (`x-kubernetes-validations`) are evaluated by cel.py, after these
checks, as the custom resource strategy does.

Duplicate items of `x-kubernetes-list-type: set` lists and duplicate keys of
`map` lists are 422 `Duplicate value: ...` (`list_type_errors`).

What this does not do: formats are not checked; of the Go validation of
built-in kinds only the parts in kinds.py exist.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import re
from typing import Any, Iterable

import jsonschema
import kubernetes_validate
from referencing import Registry, Resource

from kubesim import schemas

from .errors import FieldError, bad_request, forbidden, go_quote, invalid_value, not_supported, required_value
from .quantity import QuantityError, quantity_from_json

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

NAME_RULES: dict[str, tuple[re.Pattern[str], int, str]] = {
    "subdomain": (DNS1123_SUBDOMAIN, 253, _SUBDOMAIN_MESSAGE),
    "label": (DNS1123_LABEL, 63, _LABEL_MESSAGE),
    "dns1035": (DNS1035_LABEL, 63, _DNS1035_MESSAGE),
}

OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


# apimachinery@v0.33.1 pkg/util/validation/validation.go (IsQualifiedName, IsValidLabelValue, RegexError)
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_QUALIFIED_NAME_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    f"character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{_QUALIFIED_NAME_FMT}')"
)
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    f"and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    f"validation is '{_LABEL_VALUE_FMT}')"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    f"and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN_FMT}')"
)


def qualified_name_problems(value: str) -> list[str]:
    """IsQualifiedName: one message per problem."""
    parts = value.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        return [f"a qualified name {_QUALIFIED_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.match(prefix):
                problems.append(f"prefix part {_DNS1123_SUBDOMAIN_MESSAGE}")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):
        problems.append(f"name part {_QUALIFIED_NAME_MESSAGE}")
    return problems


def label_value_problems(value: str) -> list[str]:
    """IsValidLabelValue."""
    problems = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _LABEL_VALUE.match(value):
        problems.append(_LABEL_VALUE_MESSAGE)
    return problems


def name_problems(name: str, rule: str, *, prefix: bool = False) -> list[str]:
    """Why `name` breaks `rule` ("subdomain", "label", "dns1035", "path"); `prefix` checks a generateName."""
    if rule == "path":  # path.IsValidPathSegmentName (RBAC objects)
        if name in (".", "..") and not prefix:
            return [f"may not be '{name}'"]
        return [f"may not contain '{c}'" for c in ("/", "%") if c in name]
    pattern, limit, message = NAME_RULES[rule]
    problems: list[str] = []
    if len(name) > limit:
        problems.append(f"must be no more than {limit} characters")
    candidate = name[:-1] + "a" if prefix and name.endswith("-") else name
    if not pattern.match(candidate):
        problems.append(message)
    return problems


def validate_name(path: str, name: str, rule: str, *, prefix: bool = False) -> list[FieldError]:
    problems = name_problems(name, rule, prefix=prefix)
    return [invalid_value(path, name, "; ".join(problems))] if problems else []


def validate_labels(path: str, labels: Any) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [invalid_value(path, json.dumps(labels), "must be a map of strings")]
    errors: list[FieldError] = []
    for key, value in labels.items():  # ValidateLabels: one error per problem
        errors += [invalid_value(path, key, problem) for problem in qualified_name_problems(key)]
        if not isinstance(value, str):
            errors.append(invalid_value(f"{path}[{key}]", value, "must be a string"))
            continue
        errors += [invalid_value(path, value, problem) for problem in label_value_problems(value)]
    return errors


def validate_object_meta(meta: dict[str, Any], *, name_rule: str, namespaced: bool) -> list[FieldError]:
    """ValidateObjectMeta: name/generateName, labels, annotations, finalizers, ownerReferences."""
    errors: list[FieldError] = []
    name = meta.get("name")
    generate_name = meta.get("generateName")
    if not name and not generate_name:
        errors.append(required_value("metadata.name", "name or generateName is required"))
    if generate_name and not name:
        errors += validate_name("metadata.generateName", generate_name, name_rule, prefix=True)
    if name:
        errors += validate_name("metadata.name", name, name_rule)
    if not namespaced and meta.get("namespace"):
        errors.append(forbidden("metadata.namespace", "not allowed on this type"))
    errors += validate_labels("metadata.labels", meta.get("labels"))
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        errors.append(invalid_value("metadata.annotations", json.dumps(annotations), "must be a map of strings"))
    else:
        for key, value in annotations.items():  # ValidateAnnotations
            errors += [invalid_value("metadata.annotations", key, problem)
                       for problem in qualified_name_problems(key.lower())]
            if not isinstance(value, str):
                errors.append(invalid_value(f"metadata.annotations[{key}]", value, "must be a string"))
        if sum(len(k) + len(str(v)) for k, v in annotations.items()) > 256 * 1024:
            errors.append(FieldError("metadata.annotations", "FieldValueTooLong", "Too long: must have at most 262144 bytes"))
    for index, finalizer in enumerate(meta.get("finalizers") or []):  # ValidateFinalizerName
        problems = qualified_name_problems(finalizer) if isinstance(finalizer, str) else ["must be a string"]
        errors += [invalid_value(f"metadata.finalizers[{index}]", finalizer, problem) for problem in problems]
    controllers = 0
    for index, reference in enumerate(meta.get("ownerReferences") or []):
        base = f"metadata.ownerReferences[{index}]"
        for required in ("apiVersion", "kind", "name", "uid"):
            if not reference.get(required):
                errors.append(invalid_value(f"{base}.{required}", reference.get(required, ""), f"{required} must not be empty"))
        if reference.get("controller"):
            controllers += 1
    if controllers > 1:
        errors.append(
            invalid_value(
                "metadata.ownerReferences",
                "[...]",
                "Only one reference can have Controller set to true",
            )
        )
    return errors


def validate_immutable_meta(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    for field in ("name", "namespace"):
        if (new.get(field) or "") != (old.get(field) or ""):
            errors.append(invalid_value(f"metadata.{field}", new.get(field, ""), "field is immutable"))
    new_finalizers = set(new.get("finalizers") or [])
    if old.get("deletionTimestamp") and not new_finalizers <= set(old.get("finalizers") or []):
        errors.append(forbidden("metadata.finalizers", "no new finalizers can be added if the object is being deleted"))
    return errors


# --- custom resources --------------------------------------------------------


def served_schema(crd: dict[str, Any], version: str) -> dict[str, Any]:
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return served.get("schema", {}).get("openAPIV3Schema", {})
    raise KeyError(version)


def _path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _unknown_keys(error: jsonschema.ValidationError) -> list[str]:
    properties = error.schema.get("properties") or {}
    patterns = error.schema.get("patternProperties") or {}
    return [
        key
        for key in error.instance
        if key not in properties and not any(re.search(p, key) for p in patterns)
    ]


def _describe(error: jsonschema.ValidationError) -> FieldError:
    """One jsonschema error in kube-openapi's words."""
    path = _path(error.absolute_path)
    value = error.instance
    kind = error.validator
    if kind == "required":
        missing = re.match(r"'(.+)' is a required property", error.message)
        field = _path([*error.absolute_path, missing.group(1) if missing else "?"])
        return required_value(field)
    if kind == "type":
        expected = error.validator_value if isinstance(error.validator_value, str) else "/".join(error.validator_value)
        actual = _json_type(value)
        return FieldError(path, "FieldValueTypeInvalid",
                          f"Invalid value: {go_quote(actual)}: {path} in body must be of type {expected}: {go_quote(actual)}")
    if kind == "enum":
        return not_supported(path, value, list(error.validator_value))
    if kind == "pattern":
        return invalid_value(path, value, f"{path} in body should match '{error.validator_value}'")
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        words = {
            "minimum": "greater than or equal to",
            "maximum": "less than or equal to",
            "exclusiveMinimum": "greater than",
            "exclusiveMaximum": "less than",
        }[kind]
        return invalid_value(path, value, f"{path} in body should be {words} {error.validator_value}")
    if kind == "minLength":
        return invalid_value(path, value, f"{path} in body should be at least {error.validator_value} chars long")
    if kind == "maxLength":
        return FieldError(path, "FieldValueTooLong", f"Too long: may not be more than {error.validator_value} bytes")
    if kind == "minItems":
        return invalid_value(path, len(value), f"{path} in body should have at least {error.validator_value} items")
    if kind == "maxItems":
        return FieldError(path, "FieldValueTooMany", f"Too many: {len(value)}: must have at most {error.validator_value} items")
    shown = value if isinstance(value, (str, int, float, bool)) or value is None else json.dumps(value, sort_keys=True)
    return invalid_value(path, shown, error.message)


def _delete_path(obj: Any, parts: list[Any], key: str) -> None:
    current = obj
    for part in parts:
        current = current[part]
    current.pop(key, None)


# --- built-in kinds: Kubernetes' OpenAPI schemas ------------------------------

K8S_SCHEMA_VERSION = kubernetes_validate.latest_version()


@functools.lru_cache(maxsize=None)
def _k8s_schemas() -> tuple[Any, Registry]:
    base = importlib.resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", f"v{K8S_SCHEMA_VERSION}-local-strict"
    )
    definitions = json.loads(base.joinpath("_definitions.json").read_text())
    return base, Resource.from_contents(definitions) @ Registry()


@functools.lru_cache(maxsize=None)
def builtin_definitions() -> dict[str, Any]:
    """Kubernetes' OpenAPI definitions by name (`io.k8s.api.core.v1.Pod`, ...), as the JSON Schemas carry them."""
    base, _ = _k8s_schemas()
    return json.loads(base.joinpath("_definitions.json").read_text())["$defs"]


@functools.lru_cache(maxsize=None)
def builtin_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    """The strict schema of a built-in kind (None when the package has none)."""
    base, registry = _k8s_schemas()
    stem = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = base.joinpath(f"{kind.lower()}-{stem}.json")
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ registry)


def drop_nulls(value: Any) -> Any:
    """What decoding JSON into Go structs does to `null`: the field stays unset."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def decode_builtin(obj: dict[str, Any], field_validation: str) -> list[str]:
    """Decode-time checks of a built-in object, in place: wrong JSON types are 400, unknown fields per mode."""
    checker = builtin_validator(obj.get("apiVersion", ""), obj.get("kind", ""))
    if checker is None:
        return []
    kind = obj.get("kind", "")
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    errors = list(checker.iter_errors(obj))
    wrong_types = [e for e in errors if e.validator in ("type", "oneOf")]
    if wrong_types:
        error = min(wrong_types, key=lambda e: len(e.absolute_path))
        expected = error.validator_value if error.validator == "type" else "int-or-string"
        if isinstance(expected, list):
            expected = next((t for t in expected if t != "null"), "")
        raise bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot unmarshal '
            f"{_json_type(error.instance)} into Go struct field .{_path(error.absolute_path)} of type {expected}"
        )
    problem = _first_bad_quantity(obj, checker.schema)
    if problem is not None:
        raise bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {problem}')
    return _handle_unknown(obj, errors, field_validation, kind, version)


_QUANTITY_REF = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def _first_bad_quantity(value: Any, schema: dict[str, Any]) -> str | None:
    """The error of the first `resource.Quantity` in document order that does not parse (None: all parse).

    Decoding JSON into the Go struct calls Quantity.UnmarshalJSON for each
    (apimachinery@v0.33.1 pkg/api/resource/quantity.go), and the first error
    fails the request.
    """
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rpartition("/")[2]
        if name == _QUANTITY_REF:
            try:
                quantity_from_json(value)
            except QuantityError as error:
                return str(error)
            return None
        schema = builtin_definitions().get(name, {})
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if isinstance(sub, dict):
                problem = _first_bad_quantity(item, sub)
                if problem is not None:
                    return problem
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            problem = _first_bad_quantity(item, schema["items"])
            if problem is not None:
                return problem
    return None


def builtin_field_errors(obj: dict[str, Any]) -> list[FieldError]:
    """Schema violations of a built-in object other than types and unknown fields (required, enum, ...)."""
    checker = builtin_validator(obj.get("apiVersion", ""), obj.get("kind", ""))
    if checker is None:
        return []
    errors = [e for e in checker.iter_errors(obj) if e.validator not in ("type", "oneOf", "additionalProperties")]
    return [_describe(e) for e in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])]


def _handle_unknown(
    obj: dict[str, Any], errors: list[jsonschema.ValidationError], field_validation: str, kind: str, version: str
) -> list[str]:
    unknown: list[tuple[list[Any], str]] = []
    for error in errors:
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            unknown += [(list(error.absolute_path), key) for key in _unknown_keys(error)]
    if not unknown:
        return []
    names = [f'unknown field "{_path([*parts, key])}"' for parts, key in unknown]
    if field_validation == "Strict":
        raise bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: ' + ", ".join(names)
        )
    for parts, key in sorted(unknown, key=lambda u: -len(u[0])):
        _delete_path(obj, parts, key)
    return names if field_validation == "Warn" else []


def handle_unknown_fields(obj: dict[str, Any], field_validation: str, crd: dict[str, Any]) -> list[str]:
    """Unknown fields of a custom object, per `fieldValidation`.

    Strict raises a 400 "strict decoding error" like the real server; Warn and
    Ignore drop the fields in place (Warn returns the warning texts).
    """
    kind = obj.get("kind", "")
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    checker = schemas.crd_validator(crd, version)
    errors = list(checker.iter_errors(obj))
    meta = obj.get("metadata") or {}
    if any(key not in OBJECT_META_FIELDS for key in meta):
        # The CRD schema leaves metadata open; ObjectMeta itself is strict.
        meta_checker = builtin_validator("v1", "ConfigMap")
        assert meta_checker is not None
        errors += [
            e for e in meta_checker.iter_errors({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
            if e.validator == "additionalProperties"
        ]
    return _handle_unknown(obj, errors, field_validation, kind, version)


def schema_field_errors(obj: dict[str, Any], crd: dict[str, Any]) -> list[FieldError]:
    """What `kubesim.schemas.schema_errors(obj)` reports, as field errors in kube-openapi's words."""
    checker = schemas.crd_validator(crd, str(obj.get("apiVersion", "")).rpartition("/")[2])
    errors = sorted(checker.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [_describe(e) for e in errors]


def apply_schema_defaults(obj: dict[str, Any], schema: dict[str, Any]) -> None:
    """Structural defaulting and null pruning, in place (metadata is left alone)."""
    properties = schema.get("properties") or {}
    for key, sub in properties.items():
        if key in ("metadata", "apiVersion", "kind"):
            continue
        _default_node(obj, key, sub)


def _default_node(parent: dict[str, Any], key: str, schema: dict[str, Any]) -> None:
    if key not in parent:
        if "default" in schema:
            parent[key] = copy.deepcopy(schema["default"])
        else:
            return
    value = parent[key]
    if value is None:
        if not schema.get("nullable"):
            del parent[key]
        return
    _default_value(value, schema)


def _default_value(value: Any, schema: dict[str, Any]) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties")
        if properties:
            for key, sub in properties.items():
                _default_node(value, key, sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in list(value):
                if not properties or key not in properties:
                    _default_node(value, key, extra)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                if item is not None:
                    _default_value(item, items)


# --- x-kubernetes-list-type uniqueness (ValidateListSetsAndMaps) ---------------------


def _go_value(value: Any) -> str:
    """A value as Go's %#v prints an unstructured value in field.Duplicate."""
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{_go_value(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_value(v) for v in value) + "}"
    return go_quote(value)


def list_type_errors(obj: Any, schema: dict[str, Any], path: str = "") -> list[FieldError]:
    """Duplicate items of `set` lists and duplicate keys of `map` lists, as the CRD validator reports them."""
    errors: list[FieldError] = []
    if isinstance(obj, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            if key in properties:
                errors += list_type_errors(value, properties[key], f"{path}.{key}" if path else key)
            elif isinstance(extra, dict):
                errors += list_type_errors(value, extra, f"{path}[{key}]")
    elif isinstance(obj, list):
        kind = schema.get("x-kubernetes-list-type")
        if kind in ("set", "map") and len(obj) > 1:
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen: dict[str, int] = {}
            for index, item in enumerate(obj):
                if kind == "map":
                    item = {k: item[k] for k in keys if isinstance(item, dict) and k in item}
                marker = json.dumps(item, sort_keys=True)
                seen[marker] = seen.get(marker, 0) + 1
                if seen[marker] == 2:
                    errors.append(FieldError(f"{path}[{index}]", "FieldValueDuplicate",
                                             f"Duplicate value: {_go_value(item)}"))
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(obj):
                errors += list_type_errors(item, items, f"{path}[{index}]")
    return errors
