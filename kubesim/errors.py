"""Kubernetes `Status` failures, shaped like the ones kube-apiserver sends.

The test API server raises `ApiError` wherever a real server would answer with
a failure; the HTTP layer turns it into a `Status` body with the same code,
reason, message and details that k8s.io/apimachinery/pkg/api/errors builds, so
that client code under test sees what it would see against a real cluster.

What this does not do: only the reasons the test server can produce are
here; there is no retry or backoff logic (that belongs to clients).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FieldError:
    """One entry of a field.ErrorList: `<field>: <type>: <detail>`."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueRequired, ...
    message: str  # everything after "<field>: "

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def cause(self) -> dict[str, Any]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


def invalid_value(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, "FieldValueInvalid", f"Invalid value: {go_quote(value)}: {detail}")


def required_value(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "FieldValueForbidden", f"Forbidden: {detail}")


def not_supported(path: str, value: Any, allowed: list[Any]) -> FieldError:
    options = ", ".join(go_quote(a) for a in allowed)
    return FieldError(
        path, "FieldValueNotSupported", f"Unsupported value: {go_quote(value)}: supported values: {options}"
    )


def go_quote(value: Any) -> str:
    """How field errors print a value: strings quoted (%q), the rest as Go %v would."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class ApiError(Exception):
    """A failure answered as a `Status` object."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    list_meta: dict[str, Any] = field(default_factory=dict)  # Status.metadata (a continue token for 410s)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(name: str, group: str, resource: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


def qualified(resource: str, group: str) -> str:
    """`pods` for core, `rayjobs.ray.io` for a group: GroupResource.String()."""
    return f"{resource}.{group}" if group else resource


def not_found(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(name, group, resource)
    )


def unknown_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        _details(name, group, resource),
    )


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(group: str, kind: str, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid; `kind` is the Kind (not the resource), as NewInvalid uses it."""
    qualified_kind = f"{kind}.{group}" if group else kind
    text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [e.cause() for e in errors]
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden_error(group: str, resource: str, name: str, why: str, causes: list[dict[str, Any]] | None = None) -> ApiError:
    details = _details(name, group, resource)
    if causes:
        details["causes"] = causes
    prefix = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
    return ApiError(403, "Forbidden", f"{prefix} is forbidden: {why}", details)


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    del content_type  # the real message names only what is accepted
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: " + ", ".join(accepted),
    )


def not_acceptable(supported: list[str]) -> ApiError:
    return ApiError(
        406, "NotAcceptable", "only the following media types are accepted: " + ", ".join(supported)
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def unprocessable_patch(server_message: str) -> ApiError:
    """What a JSON patch that does not apply gets (NewGenericServerResponse with 422)."""
    return ApiError(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": server_message}]},
    )


class AdmissionDenied(Exception):
    """Raised by a mutating hook to reject a request, as a denying webhook would.

    The client sees `admission webhook "<webhook>" denied the request: <message>`
    with the given code (403 Forbidden is what controller-runtime webhooks send).
    """

    def __init__(self, webhook: str, message: str, code: int = 403, reason: str = "Forbidden") -> None:
        super().__init__(message)
        self.webhook = webhook
        self.message = message
        self.code = code
        self.reason = reason

    def to_api_error(self) -> ApiError:
        return ApiError(
            self.code, self.reason, f'admission webhook "{self.webhook}" denied the request: {self.message}'
        )
