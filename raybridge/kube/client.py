"""Connecting to a cluster, bounding and retrying its calls, and turning client errors into raybridge errors.

One place resolves the kubeconfig (every file of $KUBECONFIG merged as kubectl
merges them, the context, the namespace: `resolve_kube_target`) and builds the
`ApiClient` (`connect_target`); one place (`BoundedApiClient.call_api`) bounds
every request by `--request-timeout` and the command's `Deadline` and retries
what is safe to retry (`kube.retry.RetryPolicy`; calls made inside
`kube.retry.calls_tried_once()` are tried once, their caller retries); one place (`api_call`) maps connection
failures, API statuses and bodies that are not JSON onto `ClusterUnreachable`,
`InfraError` or `BadInput`, naming the server and what was being done. Every
other kube module goes through all three, so a user never sees a client
traceback and nothing waits past its bound.

What it does not do: retry a create or an update (the caller knows whether a
write that may have happened can be re-read: `rayapi.RayObjects.create`), or
wait for a state (the launcher's `Waiter` does).
"""

from __future__ import annotations

import os
import stat
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from raybridge.core.consts import DEFAULT_NAMESPACE
from raybridge.core.deadline import Deadline
from raybridge.errors import BadInput, ClusterUnreachable, InfraError
from raybridge.kube.retry import DEFAULT_RETRY_POLICY, RETRIED_METHODS, TRANSIENT_STATUSES, RetryPolicy, client_retries
from raybridge.kube.retry import retry_after_seconds

T = TypeVar("T")

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

#: kubectl's --request-timeout, for every API call that does not set its own.
DEFAULT_REQUEST_TIMEOUT = 30.0


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (_SA_DIR / "token").exists()


# --- the kubeconfig: which files, which context, which namespace -----------------------------


@dataclass(frozen=True)
class KubeconfigFiles:
    """The kubeconfig files that would be read, and those named that do not exist."""

    existing: tuple[Path, ...]
    missing: tuple[Path, ...]
    explicit: bool = False
    #: Files named that cannot be a kubeconfig (a FIFO, a device, larger than `MAX_KUBECONFIG_BYTES`), with why.
    unusable: tuple[str, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(f"kubeconfig {str(p)!r} does not exist: skipped" for p in self.missing)

    def check_explicit(self) -> None:
        """BadInput when `--kubeconfig` names a file that does not exist (never a silent fallback)."""
        if self.explicit and self.missing:
            raise BadInput(f"--kubeconfig {str(self.missing[0])!r} does not exist")
        if self.unusable:
            raise BadInput(*self.unusable)


#: The largest kubeconfig read (a FIFO or /dev/zero would never end).
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024


def _unusable(path: Path, named_by: str) -> Optional[str]:
    """Why an existing `path` cannot be read as a kubeconfig (not a regular file, too large), or None."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"{named_by} {str(path)!r} cannot be read: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return f"{named_by} {str(path)!r} is not a regular file"
    if info.st_size > MAX_KUBECONFIG_BYTES:
        return f"{named_by} {str(path)!r} is larger than {MAX_KUBECONFIG_BYTES // 2**20} MiB"
    return None


def kubeconfig_files(explicit: Optional[str] = None) -> KubeconfigFiles:
    """`--kubeconfig`, else every file in $KUBECONFIG, else ~/.kube/config (as kubectl looks); unusable ones set apart."""
    if explicit:
        named, named_by, is_explicit = [Path(explicit).expanduser()], "--kubeconfig", True
    elif os.environ.get("KUBECONFIG"):
        named = [Path(part).expanduser() for part in os.environ["KUBECONFIG"].split(os.pathsep) if part]
        named_by, is_explicit = "KUBECONFIG file", False
    else:
        named, named_by, is_explicit = [Path.home() / ".kube" / "config"], "kubeconfig", False
    existing = [p for p in named if p.exists()]
    missing = [p for p in named if not p.exists()] if explicit or os.environ.get("KUBECONFIG") else []
    problems = {p: _unusable(p, named_by) for p in existing}
    return KubeconfigFiles(
        tuple(p for p in existing if problems[p] is None),
        tuple(missing),
        is_explicit,
        tuple(problem for problem in problems.values() if problem),
    )


def kubeconfig_path(explicit: Optional[str] = None) -> Optional[Path]:
    """The first kubeconfig that would be used, or None if there is none."""
    files = kubeconfig_files(explicit)
    return files.existing[0] if files.existing else None


def cluster_configured(kubeconfig: Optional[str] = None) -> bool:
    """True when a kubeconfig or an in-cluster service account is available.

    BadInput when `kubeconfig` (the `--kubeconfig` flag) names a file that does
    not exist: the user named a cluster, so nothing falls back to running locally.
    """
    files = kubeconfig_files(kubeconfig)
    files.check_explicit()
    return bool(files.existing) or in_cluster()


@dataclass(frozen=True)
class KubeTarget:
    """Where a command's API calls go, resolved once: the files merged, the context, the namespace."""

    files: tuple[Path, ...]
    missing: tuple[Path, ...]
    context: Optional[str]
    #: The namespace commands default to: the one asked for, else the context's, else `default`.
    namespace: str
    #: The context's own namespace (None when it sets none): what `-n` overrides.
    context_namespace: Optional[str]
    in_cluster: bool
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT


def _merged_view(files: tuple[Path, ...]) -> tuple[Optional[str], dict[str, Any]]:
    """(current-context, contexts by name) as kubectl merges the files: the first file that sets a value wins."""
    import yaml

    current: Optional[str] = None
    contexts: dict[str, Any] = {}
    for path in files:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        if current is None and isinstance(data.get("current-context"), str) and data["current-context"]:
            current = data["current-context"]
        listed = data.get("contexts")
        for item in listed if isinstance(listed, list) else []:  # a malformed list is the client loader's to refuse
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                contexts.setdefault(item["name"], item.get("context") or {})
    return current, contexts


def resolve_kube_target(
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
    namespace: Optional[str] = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
) -> KubeTarget:
    """The target without connecting: the kubeconfig files, the context and the namespace (-n, else the context's, else default).

    BadInput when `kubeconfig` names a file that does not exist.
    """
    files = kubeconfig_files(kubeconfig)
    files.check_explicit()
    if files.existing:
        current, contexts = _merged_view(files.existing)
        if context and context not in contexts:
            where = ", ".join(str(path) for path in files.existing)
            raise BadInput(f"no context named {context!r} in {where} (contexts: {', '.join(sorted(contexts)) or 'none'})")
        chosen_name = context or current
        chosen = contexts.get(chosen_name or "")
        ctx_ns = chosen.get("namespace") if isinstance(chosen, dict) else None
        ctx_ns = ctx_ns if isinstance(ctx_ns, str) and ctx_ns else None
        return KubeTarget(
            files.existing, files.missing, chosen_name, namespace or ctx_ns or DEFAULT_NAMESPACE, ctx_ns, False, request_timeout
        )
    if context:
        looked = ", ".join(str(path) for path in files.missing) or str(Path.home() / ".kube" / "config")
        raise BadInput(f"--context {context}: no kubeconfig to find it in ({looked} does not exist; --kubeconfig or KUBECONFIG names one)")
    inside = in_cluster()
    ns_file = _SA_DIR / "namespace"
    sa_ns = (ns_file.read_text().strip() or None) if inside and ns_file.exists() else None
    return KubeTarget((), files.missing, None, namespace or sa_ns or DEFAULT_NAMESPACE, sa_ns, inside, request_timeout)


def context_namespace(kubeconfig: Optional[str] = None, context: Optional[str] = None) -> Optional[str]:
    """The namespace of the kubeconfig's chosen context (or the in-cluster one), without connecting; None when nothing sets one."""
    return resolve_kube_target(kubeconfig, context).context_namespace


# --- retries and the time budget: the policy is kube/retry.py's ------------------------------


class NoAnswer(ClusterUnreachable):
    """The API server did not answer in time: unlike a refused or dropped connection or an error status, the request
    may still be on its way and be carried out later (a create that lands after the caller gave up)."""


class TimeBudgetSpent(NoAnswer):
    """The command's `--timeout` ran out while a call was waiting for the API server."""


def _failure_kind(exc: BaseException) -> str:
    """timeout or connection (refused, reset, dropped, name resolution)."""
    from urllib3.exceptions import MaxRetryError, TimeoutError as Urllib3Timeout

    reason = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    if isinstance(reason, (Urllib3Timeout, TimeoutError)) or "timed out" in str(reason).lower():
        return "timeout"
    return "connection"


def _streams(url: str) -> bool:
    lowered = url.lower()
    return "watch=true" in lowered or "follow=true" in lowered or "/watch/" in lowered


def _bounded_api_client(configuration: Any, request_timeout: float, policy: RetryPolicy = DEFAULT_RETRY_POLICY) -> Any:
    """An ApiClient whose every call is bounded (connect and read) by request_timeout and the deadline, and retried per `policy`."""
    from kubernetes import client
    from urllib3.exceptions import HTTPError as Urllib3Error

    # urllib3 would otherwise retry on its own, multiplying the bound; the policy here decides.
    configuration.retries = 0

    class BoundedApiClient(client.ApiClient):  # type: ignore[misc,valid-type]
        deadline: Optional[Deadline] = None
        server: str = configuration.host
        attempts = threading.local()

        def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            asked = kwargs.get("_request_timeout")
            base = request_timeout if asked is None else (asked if isinstance(asked, (int, float)) else max(asked))
            retried = kwargs.pop("_retry", True) and client_retries() and method.upper() in RETRIED_METHODS and not _streams(url)
            attempt = 0
            unreachable_since: Optional[float] = None
            while True:
                attempt += 1
                deadline = self.deadline
                timeout = deadline.bound(base) if deadline is not None else base
                kwargs["_request_timeout"] = (timeout, timeout)
                self.attempts.count = attempt
                try:
                    response = super().call_api(method, url, *args, **kwargs)
                    if retried:
                        response.read()  # a body cut short is a failure to retry, not a surprise later
                except (Urllib3Error, OSError) as exc:
                    kind = _failure_kind(exc)
                    if kind == "connection" and unreachable_since is None:
                        unreachable_since = time.monotonic()
                    failing = (time.monotonic() - unreachable_since, base) if unreachable_since is not None else None
                    wait = policy.wait_before_retry(attempt, kind, deadline, unreachable_for=failing) if retried else None
                    if wait is None:
                        if deadline is not None and kind == "timeout" and deadline.cuts(base + 0.01):
                            raise TimeBudgetSpent(
                                f"{describe_unreachable(exc)}, and the command's --timeout of {deadline.seconds:g}s ran out"
                            ) from None
                        raise
                    time.sleep(wait)
                    continue
                status = getattr(response, "status", 200)
                if retried and status in TRANSIENT_STATUSES:
                    wait = policy.wait_before_retry(attempt, "status", deadline, retry_after_seconds(getattr(response, "headers", None) or {}))
                    if wait is not None:
                        time.sleep(wait)
                        continue
                return response

    return BoundedApiClient(configuration)


# --- connecting -------------------------------------------------------------------------------


@dataclass
class Kube:
    """A connected API client and the namespace commands default to."""

    api_client: Any
    namespace: str
    in_cluster: bool
    context: Optional[str] = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    @property
    def server(self) -> str:
        return str(getattr(self.api_client, "server", None) or getattr(self.api_client.configuration, "host", ""))

    @property
    def deadline(self) -> Optional[Deadline]:
        """The command's time budget every call is bounded by (None: only `request_timeout`)."""
        return getattr(self.api_client, "deadline", None)

    @deadline.setter
    def deadline(self, value: Optional[Deadline]) -> None:
        self.api_client.deadline = value

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)


class _CredentialFailures:
    """While loading a kubeconfig, what the client logs at ERROR (a failed exec plugin) is kept, not printed.

    kubernetes.config's loader reports a failing exec credential plugin only through
    `logging.error` and carries on without credentials; the module-level call would also
    configure the root logger and print `ERROR:root:...` on stderr.
    """

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._handler: Any = None

    def __enter__(self) -> "_CredentialFailures":
        import logging

        messages = self.messages

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                messages.append(record.getMessage())

        self._handler = Keep(logging.ERROR)
        logging.getLogger().addHandler(self._handler)
        return self

    def __exit__(self, *exc_info: object) -> None:
        import logging

        logging.getLogger().removeHandler(self._handler)


def connect_target(target: KubeTarget, deadline: Optional[Deadline] = None) -> Kube:
    """A fresh bounded ApiClient for a resolved target: the kubeconfig files merged (kubectl's rule), or in-cluster."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    if not target.files:
        if not target.in_cluster:
            missing = " (KUBECONFIG names only files that do not exist)" if target.missing else ""
            raise ClusterUnreachable(f"no kubeconfig found (KUBECONFIG, ~/.kube/config) and not running in a cluster{missing}")
        config.load_incluster_config(client_configuration=configuration)
        kube = Kube(_bounded_api_client(configuration, target.request_timeout), target.namespace, True, None, target.request_timeout)
        kube.deadline = deadline
        return kube
    named = ", ".join(repr(str(p)) for p in target.files)
    failures = _CredentialFailures()
    try:
        # The client merges a colon list as kubectl does (first file wins per cluster, context and
        # user); the context is passed explicitly because it would take the *last* current-context.
        with failures:
            config.load_kube_config(
                config_file=os.pathsep.join(str(p) for p in target.files), context=target.context, client_configuration=configuration
            )
    except ConfigException as exc:
        raise BadInput(f"kubeconfig {named}: {exc}") from None
    except Exception as exc:  # malformed YAML and the like
        raise BadInput(f"kubeconfig {named} cannot be loaded: {_short(exc)}") from None
    if failures.messages and not (configuration.api_key or configuration.cert_file):
        # The user's exec credential plugin failed: the client only logs it and would go on as anonymous.
        raise ClusterUnreachable(f"kubeconfig {named}: getting credentials: {_short_text(failures.messages[0])}")
    kube = Kube(
        _bounded_api_client(configuration, target.request_timeout), target.namespace, False, target.context, target.request_timeout
    )
    kube.deadline = deadline
    return kube


def connect(
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
    namespace: Optional[str] = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    deadline: Optional[Deadline] = None,
) -> Kube:
    """Resolve the target (`resolve_kube_target`) and connect to it."""
    return connect_target(resolve_kube_target(kubeconfig, context, namespace, request_timeout), deadline)


# --- the one error mapping --------------------------------------------------------------------


def _server_of(fn: Any, args: tuple[Any, ...]) -> str:
    """The API server a call goes to, for messages ('' when unknown)."""
    api_client = getattr(getattr(fn, "__self__", None), "api_client", None)
    if api_client is None and args and isinstance(args[0], Kube):
        api_client = args[0].api_client
    return str(getattr(getattr(api_client, "configuration", None), "host", "") or "")


def _attempts_of(fn: Any, args: tuple[Any, ...]) -> int:
    api_client = getattr(getattr(fn, "__self__", None), "api_client", None)
    if api_client is None and args and isinstance(args[0], Kube):
        api_client = args[0].api_client
    return int(getattr(getattr(api_client, "attempts", None), "count", 1) or 1)


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
        error = NoAnswer if _failure_kind(exc) == "timeout" else ClusterUnreachable
        raise error(f"{what}: {describe_unreachable(exc)}{_tries(_attempts_of(fn, args))}") from None
    except ValueError as exc:  # the client failed to decode what the server sent
        raise ClusterUnreachable(f"{what}: {_api_at(_server_of(fn, args))} answered something that is not JSON ({_short(exc)})") from None
    if isinstance(result, (str, bytes)):
        raise ClusterUnreachable(f"{what}: {_api_at(_server_of(fn, args))} answered something that is not JSON ({_snippet(result)})")
    return result


def _api_at(server: str) -> str:
    return f"the Kubernetes API at {server}" if server else "the Kubernetes API"


def _tries(attempts: int) -> str:
    return f" (tried {attempts} times)" if attempts > 1 else ""


def unexpected_object(what: str, why: str, server: str = "") -> ClusterUnreachable:
    """The error for valid JSON of the wrong shape: the server (or something before it) is not behaving as Kubernetes."""
    return ClusterUnreachable(f"{what}: {_api_at(server)} answered an unexpected object ({why})")


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
        return f"the Kubernetes API{where} did not answer in time ({_short(reason)})"
    if isinstance(reason, ProtocolError):
        return f"the Kubernetes API{where} dropped the connection ({_short(reason)})"
    return f"the Kubernetes API{where} is unreachable ({_short(reason)})"


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
        return InfraError(f"{what}: not found ({message})")
    if status in (401, 403):
        return PermissionDenied(f"{what}: permission denied ({message})")
    if status == 0:
        return ClusterUnreachable(f"{what}: {_api_at(server)} answered something raybridge cannot read ({message})")
    if status >= 500 or status == 429:
        return ClusterUnreachable(f"{what}: {_api_at(server)} answered {status} ({message}){_tries(attempts)}")
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
                return _short_text(_LONG_INVALID_VALUE.sub("Invalid value: (the patched object)", str(data["message"])))
        except (ValueError, TypeError):
            return f"{getattr(exc, 'reason', '') or 'error'}: {_snippet(body)}"
    return _short_text(str(getattr(exc, "reason", "") or exc))


def _short_text(text: str) -> str:
    import textwrap

    return textwrap.shorten(text, width=300, placeholder=" ...") or text


def _short(exc: BaseException) -> str:
    """The error on one line, shortened at a word boundary (urllib3's pool prefix and long floats cut)."""
    import textwrap

    text = re.sub(r"\w+ConnectionPool\(host='[^']*', port=\d+\): ", "", str(exc))
    text = re.sub(r"(\d+\.\d)\d+", r"\1", text)
    return textwrap.shorten(text, width=200, placeholder=" ...") or type(exc).__name__


def _snippet(body: Any) -> str:
    """The start of a body that is not JSON, on one line, tags stripped."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else str(body)
    import textwrap

    return repr(textwrap.shorten(re.sub(r"<[^>]*>", " ", text), width=80, placeholder=" ...") or "(empty)")


def list_nodes(kube: Kube) -> list[dict[str, Any]]:
    result = api_call("listing nodes", kube.core().list_node, _preload_content=False)
    return _items("listing nodes", result, kube.server)


def list_pods_all_namespaces(kube: Kube) -> Optional[list[dict[str, Any]]]:
    """Every pod, or None when we may not list them (free GPUs are then unknown)."""
    try:
        result = api_call("listing pods", kube.core().list_pod_for_all_namespaces, _preload_content=False)
    except PermissionDenied:
        return None
    return _items("listing pods", result, kube.server)


def _items(what: str, response: Any, server: str = "") -> list[Any]:
    """Raw JSON items from a `_preload_content=False` list (plain dicts, camelCase keys); each item's shape is the reader's business."""
    import json

    try:
        data = json.loads(response.data)
    except (ValueError, UnicodeDecodeError):
        raise ClusterUnreachable(f"{what}: {_api_at(server)} answered something that is not JSON ({_snippet(response.data)})") from None
    items = data.get("items", ()) if isinstance(data, dict) else ()
    if items is None:
        return []  # `"items": null`, how Go writes an empty list
    if not isinstance(items, list):
        raise unexpected_object(what, "not a list of objects", server)
    return items


def raw_get(kube: Kube, path: str, timeout: Optional[float] = None, retry: bool = True) -> Any:
    """GET a path the typed APIs do not cover (aggregated APIs): the decoded JSON.

    ApiException on HTTP errors, ValueError on a body that is not JSON: call it through `api_call`.
    Bounded like every other call (`BoundedApiClient`); retried unless `retry` is False (an
    optional API that is failing is not worth waiting for).
    """
    import json

    api = kube.api_client
    bound = timeout if timeout is not None else kube.request_timeout
    if hasattr(api, "param_serialize"):  # kubernetes >= 33 (the pydantic-generated client)
        method, url, headers, _, _ = api.param_serialize(
            method="GET", resource_path=path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
        )
        extra = {} if retry else {"_retry": False}
        response = api.call_api(method, url, header_params=headers, _request_timeout=bound, **extra)
        response.read()
        if not 200 <= response.status < 300:
            from kubernetes.client.exceptions import ApiException

            raise ApiException(status=response.status, reason=response.reason, body=response.data)
        return json.loads(response.data)
    response = api.call_api(
        path, "GET", header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        _preload_content=False, _return_http_data_only=True, _request_timeout=bound,
    )  # fmt: skip
    return json.loads(response.data)


class PermissionDenied(InfraError):
    """The API server refused this user (401/403): callers that can do without the answer catch it."""


def namespace_exists(kube: Kube, namespace: str) -> Optional[bool]:
    """True or False; None when the API will not say (no permission to read namespaces)."""
    try:
        found = api_call(f"reading namespace {namespace}", kube.core().read_namespace, namespace, not_found_ok=True, _preload_content=False)
    except PermissionDenied:
        return None
    return found is not None


def list_namespace_names(kube: Kube) -> Optional[list[str]]:
    """Every namespace's name, or None when we may not list them."""
    try:
        result = api_call("listing namespaces", kube.core().list_namespace, _preload_content=False)
    except PermissionDenied:
        return None
    items = _items("listing namespaces", result, kube.server)
    return sorted(str((n.get("metadata") or {}).get("name")) for n in items if isinstance(n, dict))


def read_secret_value(kube: Kube, namespace: str, name: str, key: str) -> Optional[str]:
    """One decoded value of a Secret; None when the Secret or the key is absent."""
    import base64
    import json

    what = f"reading Secret {namespace}/{name}"
    result = api_call(what, kube.core().read_namespaced_secret, name, namespace, not_found_ok=True, _preload_content=False)
    if result is None:
        return None
    try:
        data = json.loads(result.data)
    except (ValueError, UnicodeDecodeError):
        raise ClusterUnreachable(f"{what}: {_api_at(kube.server)} answered something that is not JSON ({_snippet(result.data)})") from None
    if not isinstance(data, dict):
        raise unexpected_object(what, "not an object", kube.server)
    values, plain_values = data.get("data") or {}, data.get("stringData") or {}
    encoded = values.get(key) if isinstance(values, dict) else None
    if encoded is None:
        plain = plain_values.get(key) if isinstance(plain_values, dict) else None
        return plain if isinstance(plain, str) else None
    try:
        return base64.b64decode(encoded).decode("utf-8").strip()
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
