"""The one error mapping: every API call made through `api_call`, its failures turned into raybridge's errors.

Connection failures, API statuses and bodies that are not JSON (or nested too deeply for the
JSON parser: its RecursionError, in the client's decoding or ours) become `ClusterUnreachable`
(`NoAnswer` when the server did not answer in time: the request may still land),
`PermissionDenied`, `InfraError` or `BadInput`, naming the server and what was being done, so a
user never sees a client traceback. `checked_object`/`checked_items` refuse an answer that is
not a Kubernetes object (exit 3). It does not retry (the bounded client does, `kube.client`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional, TypeVar

from raybridge.errors import BadInput, ClusterUnreachable, InfraError


T = TypeVar("T")


class NoAnswer(ClusterUnreachable):
    """The API server did not answer in time: unlike a refused or dropped connection or an error status, the request
    may still be on its way and be carried out later (a create that lands after the caller gave up)."""


class TimeBudgetSpent(NoAnswer):
    """The command's `--timeout` ran out while a call was waiting for the API server."""


def failure_kind(exc: BaseException) -> str:
    """timeout or connection (refused, reset, dropped, name resolution)."""
    from urllib3.exceptions import MaxRetryError, TimeoutError as Urllib3Timeout

    reason = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    if isinstance(reason, (Urllib3Timeout, TimeoutError)) or "timed out" in str(reason).lower():
        return "timeout"
    return "connection"


def _api_client_of(fn: Any, args: tuple[Any, ...]) -> Any:
    """The ApiClient a call goes through: the API object's, else that of a `Kube` handed to a helper (`raw_get`)."""
    api_client = getattr(getattr(fn, "__self__", None), "api_client", None)
    if api_client is None and args:
        api_client = getattr(args[0], "api_client", None)
    return api_client


def _server_of(fn: Any, args: tuple[Any, ...]) -> str:
    """The API server a call goes to, for messages ('' when unknown)."""
    return str(getattr(getattr(_api_client_of(fn, args), "configuration", None), "host", "") or "")


def _attempts_of(fn: Any, args: tuple[Any, ...]) -> int:
    return int(getattr(getattr(_api_client_of(fn, args), "attempts", None), "count", 1) or 1)


def api_call(what: str, fn: Callable[..., T], *args: Any, not_found_ok: bool = False, **kwargs: Any) -> Optional[T]:
    """Call the API; map failures onto raybridge errors naming `what` was being done and the server.

    A body that is not JSON (an HTML page from a proxy, a truncated answer) is an
    unreachable API too: the typed client hands such a body back as a plain string.
    """
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error

    try:
        result = fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status == 404 and not_found_ok:
            return None
        raise translate_api_exception(what, exc, _server_of(fn, args), _attempts_of(fn, args)) from None
    except TimeBudgetSpent as exc:
        raise TimeBudgetSpent(f"{what}: {exc.problems[0]}") from None
    except (Urllib3Error, OSError) as exc:
        error = NoAnswer if failure_kind(exc) == "timeout" else ClusterUnreachable
        raise error(f"{what}: {describe_unreachable(exc)}{_tries(_attempts_of(fn, args))}") from None
    except ValueError as exc:  # the client failed to decode what the server sent
        raise ClusterUnreachable(f"{what}: {api_at(_server_of(fn, args))} answered something that is not JSON ({short_error(exc)})") from None
    except RecursionError:  # json.loads, the client's or raw_get's, on a body nested past the interpreter's recursion limit
        raise ClusterUnreachable(f"{what}: {api_at(_server_of(fn, args))} {NESTED_TOO_DEEP}") from None
    if isinstance(result, (str, bytes)):
        raise ClusterUnreachable(f"{what}: {api_at(_server_of(fn, args))} answered something that is not JSON ({snippet(result)})")
    return result


#: What an answer whose JSON nests past the parser's recursion limit is called (no Kubernetes object nests so deep).
NESTED_TOO_DEEP = "answered JSON nested too deeply to read"


def decode_json(what: str, data: Any, server: str = "") -> Any:
    """A body's JSON; ClusterUnreachable (exit 3) naming `what` and the server when it is not JSON or nests too deeply
    for the parser."""
    import json

    try:
        return json.loads(data)
    except RecursionError:
        raise ClusterUnreachable(f"{what}: {api_at(server)} {NESTED_TOO_DEEP}") from None
    except (ValueError, TypeError):  # UnicodeDecodeError is a ValueError
        raise ClusterUnreachable(f"{what}: {api_at(server)} answered something that is not JSON ({snippet(data)})") from None


def api_at(server: str) -> str:
    return f"the Kubernetes API at {server}" if server else "the Kubernetes API"


def _tries(attempts: int) -> str:
    return f" (tried {attempts} times)" if attempts > 1 else ""


def unexpected_object(what: str, why: str, server: str = "") -> ClusterUnreachable:
    """The error for valid JSON of the wrong shape: the server (or something before it) is not behaving as Kubernetes."""
    return ClusterUnreachable(f"{what}: {api_at(server)} answered an unexpected object ({why})")


def object_shape_problem(obj: Any, kind: Optional[str] = None) -> Optional[str]:
    """Why `obj` is not a Kubernetes object raybridge can read (None when it is): metadata with a name, dict spec and status."""
    if not isinstance(obj, dict):
        return f"{_json_type(obj)} where an object belongs"
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        return "no metadata.name"
    for key in ("spec", "status"):
        if obj.get(key) is not None and not isinstance(obj.get(key), dict):
            return f"{meta['name']}: {key} is {_json_type(obj[key])}, not an object"
    conditions = (obj.get("status") or {}).get("conditions")
    if conditions is not None and not (isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions)):
        return f"{meta['name']}: status.conditions is not a list of objects"
    for key in ("labels", "annotations"):
        if meta.get(key) is not None and not isinstance(meta.get(key), dict):
            return f"{meta['name']}: metadata.{key} is not an object"
    if meta.get("ownerReferences") is not None and not (
        isinstance(meta["ownerReferences"], list) and all(isinstance(r, dict) for r in meta["ownerReferences"])
    ):
        return f"{meta['name']}: metadata.ownerReferences is not a list of objects"
    if kind is not None and obj.get("kind") not in (None, kind):
        return f"{meta['name']}: kind {obj.get('kind')!r}, not {kind}"
    return None


def _json_type(value: Any) -> str:
    """How JSON would call the type of `value`: a number, a string, a list ..."""
    for types, name in ((bool, "a boolean"), ((int, float), "a number"), (str, "a string"), (list, "a list"), (dict, "an object")):
        if isinstance(value, types):
            return name
    return "null" if value is None else type(value).__name__


def checked_object(what: str, obj: Any, kind: Optional[str] = None, server: str = "") -> dict[str, Any]:
    """`obj` when it has the shape of a Kubernetes object (with `kind` set if missing); else exit 3 naming it."""
    problem = object_shape_problem(obj, kind)
    if problem is not None:
        raise unexpected_object(what, problem, server)
    if kind is not None and obj.get("kind") is None:
        obj = {**obj, "kind": kind}
    return obj


def checked_items(what: str, result: Any, kind: Optional[str] = None, server: str = "") -> list[dict[str, Any]]:
    """The items of a list answer, each checked (`checked_object`); exit 3 naming the first that is not an object."""
    items = result.get("items", ()) if isinstance(result, dict) else ()
    if items is None:
        return []  # `"items": null`, how Go writes an empty list
    if not isinstance(items, list):
        raise unexpected_object(what, "not a list of objects", server)
    return [checked_object(what, item, kind, server) for item in items]


def describe_unreachable(exc: BaseException) -> str:
    """One phrase for a connection-level failure, naming the server."""
    from urllib3.exceptions import MaxRetryError, ProtocolError, ReadTimeoutError

    reason = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    pool = getattr(exc, "pool", None) or getattr(reason, "pool", None)
    where = f" at {pool.scheme}://{pool.host}:{pool.port}" if pool is not None else ""
    if isinstance(reason, ReadTimeoutError) or "timed out" in str(reason).lower():
        return f"the Kubernetes API{where} did not answer in time ({short_error(reason)})"
    if isinstance(reason, ProtocolError):
        return f"the Kubernetes API{where} dropped the connection ({short_error(reason)})"
    return f"the Kubernetes API{where} is unreachable ({short_error(reason)})"


#: The API server's words when admission refuses an object: a webhook's denial (apiserver
#: admission/plugin/webhook/errors ToStatusErr) or a ValidatingAdmissionPolicy's (apiserver
#: admission/plugin/policy/validating dispatcher.go, 403 or 422 by the validation's reason).
_ADMISSION_DENIAL = re.compile(r"admission webhook \"[^\"]*\" denied the request|ValidatingAdmissionPolicy '[^']*' (with binding '[^']*' )?denied request")


def translate_api_exception(what: str, exc: Any, server: str = "", attempts: int = 1) -> Exception:
    status = getattr(exc, "status", 0) or 0
    message = status_message(exc)
    if status in (400, 403, 422) and _ADMISSION_DENIAL.search(message):
        return BadInput(f"{what}: {message}")  # the cluster's admission policy refused the object: the input is wrong, not the user's rights
    if status in (400, 409, 422):
        return BadInput(f"{what}: {message}")
    if status == 404:
        return NotFound(f"{what}: not found ({message})")
    if status in (401, 403):
        return PermissionDenied(f"{what}: permission denied ({message})")
    if status == 0:
        return ClusterUnreachable(f"{what}: {api_at(server)} answered something raybridge cannot read ({message})")
    if status >= 500 or status == 429:
        return ClusterUnreachable(f"{what}: {api_at(server)} answered {status} ({message}){_tries(attempts)}")
    return InfraError(f"{what}: HTTP {status} ({message})")


#: A quoted value long enough to be a whole object: kube-apiserver's 422 for a patch it cannot decode strictly
#: quotes the whole patched object before the reason (apimachinery field.Invalid of the "patch" field, as
#: `Invalid value: "{...}": strict decoding error: unknown field "spec.x"`), which would hide the reason.
_LONG_INVALID_VALUE = re.compile(r'Invalid value: "(?:[^"\\]|\\.){120,}?"(?=: )')


def status_message(exc: Any) -> str:
    """The `message` of a Kubernetes Status body, else the reason phrase (and a snippet of a non-JSON body).

    A whole object quoted as the invalid value is left out, so what follows it (the reason) is kept."""
    import json

    body = getattr(exc, "body", None)
    if body:
        try:
            data = json.loads(body)
            if isinstance(data, dict) and data.get("message"):
                return short_text(_LONG_INVALID_VALUE.sub("Invalid value: (the patched object)", str(data["message"])))
        except (ValueError, TypeError, RecursionError):
            return f"{getattr(exc, 'reason', '') or 'error'}: {snippet(body)}"
    return short_text(str(getattr(exc, "reason", "") or exc))


def short_text(text: str) -> str:
    import textwrap

    return textwrap.shorten(text, width=300, placeholder=" ...") or text


def short_error(exc: BaseException) -> str:
    """The error on one line, shortened at a word boundary (urllib3's pool prefix and long floats cut)."""
    import textwrap

    text = re.sub(r"\w+ConnectionPool\(host='[^']*', port=\d+\): ", "", str(exc))
    text = re.sub(r"(\d+\.\d)\d+", r"\1", text)
    return textwrap.shorten(text, width=200, placeholder=" ...") or type(exc).__name__


def snippet(body: Any) -> str:
    """The start of a body that is not JSON, on one line, tags stripped."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else str(body)
    import textwrap

    return repr(textwrap.shorten(re.sub(r"<[^>]*>", " ", text), width=80, placeholder=" ...") or "(empty)")


class PermissionDenied(InfraError):
    """The API server refused this user (401/403): callers that can do without the answer catch it."""


class NotFound(InfraError):
    """404: the object, or the API it was asked of (a CRD not installed), does not exist."""
