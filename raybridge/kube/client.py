"""Connecting to a cluster, and turning client errors into raybridge errors.

One place loads the kubeconfig or in-cluster config and builds the
`ApiClient`; one place (`api_call`) maps connection failures and API
statuses onto `ClusterUnreachable`, `InfraError` or `BadInput`. Every other
kube module goes through both, so a user never sees a client traceback.

This module does not retry: callers that wait (the launcher, controllers)
decide how often to try again.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from raybridge.core.consts import DEFAULT_NAMESPACE
from raybridge.errors import BadInput, ClusterUnreachable, InfraError

T = TypeVar("T")

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

#: kubectl's --request-timeout, for every API call that does not set its own.
DEFAULT_REQUEST_TIMEOUT = 30.0


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (_SA_DIR / "token").exists()


@dataclass(frozen=True)
class KubeconfigFiles:
    """The kubeconfig files that would be read, and those named that do not exist."""

    existing: tuple[Path, ...]
    missing: tuple[Path, ...]

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(f"kubeconfig {str(p)!r} does not exist: skipped" for p in self.missing)


def kubeconfig_files(explicit: Optional[str] = None) -> KubeconfigFiles:
    """`--kubeconfig`, else every file in $KUBECONFIG, else ~/.kube/config (as kubectl looks)."""
    if explicit:
        path = Path(explicit).expanduser()
        return KubeconfigFiles((path,), ()) if path.exists() else KubeconfigFiles((), (path,))
    env = os.environ.get("KUBECONFIG")
    if env:
        named = [Path(part).expanduser() for part in env.split(os.pathsep) if part]
        return KubeconfigFiles(tuple(p for p in named if p.exists()), tuple(p for p in named if not p.exists()))
    default = Path.home() / ".kube" / "config"
    return KubeconfigFiles((default,), ()) if default.exists() else KubeconfigFiles((), ())


def kubeconfig_path(explicit: Optional[str] = None) -> Optional[Path]:
    """The first kubeconfig that would be used, or None if there is none."""
    files = kubeconfig_files(explicit)
    return files.existing[0] if files.existing else None


def cluster_configured(kubeconfig: Optional[str] = None) -> bool:
    """True when a kubeconfig or an in-cluster service account is available."""
    return kubeconfig_path(kubeconfig) is not None or in_cluster()


def context_namespace(kubeconfig: Optional[str] = None, context: Optional[str] = None) -> Optional[str]:
    """The namespace of the kubeconfig's chosen context (or the in-cluster one), without connecting.

    Reads the YAML directly (kubectl's merge rule: the first file that sets a
    value wins), so `render` and `plan` can honour it without importing the
    kubernetes client. None when nothing sets one.
    """
    import yaml

    files = kubeconfig_files(kubeconfig)
    current: Optional[str] = context
    contexts: dict[str, Any] = {}
    for path in files.existing:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        if current is None and isinstance(data.get("current-context"), str) and data["current-context"]:
            current = data["current-context"]
        for item in data.get("contexts") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                contexts.setdefault(item["name"], item.get("context") or {})
    if files.existing:
        chosen = contexts.get(current or "")
        namespace = chosen.get("namespace") if isinstance(chosen, dict) else None
        return namespace if isinstance(namespace, str) and namespace else None
    ns_file = _SA_DIR / "namespace"
    if in_cluster() and ns_file.exists():
        return ns_file.read_text().strip() or None
    return None


@dataclass
class Kube:
    """A connected API client and the namespace commands default to."""

    api_client: Any
    namespace: str
    in_cluster: bool
    context: Optional[str] = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)


def _bounded_api_client(configuration: Any, request_timeout: float) -> Any:
    """An ApiClient whose every call without its own `_request_timeout` gets (connect, read) = request_timeout."""
    from kubernetes import client

    # urllib3 would otherwise retry a timed-out read three times, quadrupling the bound;
    # callers that wait decide themselves how often to try again.
    configuration.retries = 0

    class BoundedApiClient(client.ApiClient):  # type: ignore[misc,valid-type]
        def call_api(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("_request_timeout") is None:
                kwargs["_request_timeout"] = (request_timeout, request_timeout)
            return super().call_api(*args, **kwargs)

    return BoundedApiClient(configuration)


def connect(
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
    namespace: Optional[str] = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
) -> Kube:
    """Load the kubeconfig (or in-cluster config) into a fresh ApiClient whose calls are bounded."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    files = kubeconfig_files(kubeconfig)
    if kubeconfig and not files.existing:
        raise BadInput(f"--kubeconfig {kubeconfig!r} does not exist")
    configuration = client.Configuration()
    if not files.existing:
        if not in_cluster():
            missing = f" ({'; '.join(files.notes)})" if files.missing else ""
            raise ClusterUnreachable(f"no kubeconfig found (KUBECONFIG, ~/.kube/config) and not running in a cluster{missing}")
        config.load_incluster_config(client_configuration=configuration)
        return Kube(
            _bounded_api_client(configuration, request_timeout),
            namespace or context_namespace() or DEFAULT_NAMESPACE,
            in_cluster=True,
            request_timeout=request_timeout,
        )
    path = files.existing[0]
    try:
        config.load_kube_config(config_file=str(path), context=context, client_configuration=configuration)
        contexts, active = config.list_kube_config_contexts(config_file=str(path))
    except ConfigException as exc:
        raise BadInput(f"kubeconfig {str(path)!r}: {exc}") from None
    except Exception as exc:  # malformed YAML and the like
        raise BadInput(f"kubeconfig {str(path)!r} cannot be loaded: {exc}") from None
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    ctx_ns = ((chosen or {}).get("context") or {}).get("namespace")
    return Kube(
        _bounded_api_client(configuration, request_timeout),
        namespace or ctx_ns or DEFAULT_NAMESPACE,
        in_cluster=False,
        context=(chosen or {}).get("name"),
        request_timeout=request_timeout,
    )


def api_call(what: str, fn: Callable[..., T], *args: Any, not_found_ok: bool = False, **kwargs: Any) -> Optional[T]:
    """Call the API; map failures onto raybridge errors naming `what` was being done.

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
        raise translate_api_exception(what, exc) from None
    except (Urllib3Error, OSError) as exc:
        raise ClusterUnreachable(f"{what}: {describe_unreachable(exc)}") from None
    except ValueError as exc:  # the client failed to decode what the server sent
        raise ClusterUnreachable(f"{what}: the Kubernetes API answered something that is not JSON ({_short(exc)})") from None
    if isinstance(result, (str, bytes)):
        raise ClusterUnreachable(f"{what}: the Kubernetes API answered something that is not JSON ({_snippet(result)})")
    return result


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


_WEBHOOK_DENIAL = re.compile(r'admission webhook "[^"]*" denied the request')


def translate_api_exception(what: str, exc: Any) -> Exception:
    status = getattr(exc, "status", 0) or 0
    message = status_message(exc)
    if status in (400, 403, 422) and _WEBHOOK_DENIAL.search(message):
        return BadInput(f"{what}: {message}")  # a validating webhook refused the object: the input is wrong
    if status in (400, 409, 422):
        return BadInput(f"{what}: {message}")
    if status == 404:
        return InfraError(f"{what}: not found ({message})")
    if status in (401, 403):
        return InfraError(f"{what}: permission denied ({message})")
    if status == 0 or status >= 500 or status == 429:
        return ClusterUnreachable(f"{what}: the API server answered {status or 'nothing'} ({message})")
    return InfraError(f"{what}: HTTP {status} ({message})")


def status_message(exc: Any) -> str:
    """The `message` of a Kubernetes Status body, else the reason phrase (and a snippet of a non-JSON body)."""
    import json

    body = getattr(exc, "body", None)
    if body:
        try:
            data = json.loads(body)
            if isinstance(data, dict) and data.get("message"):
                return str(data["message"])
        except (ValueError, TypeError):
            return f"{getattr(exc, 'reason', '') or 'error'}: {_snippet(body)}"
    return str(getattr(exc, "reason", "") or exc)


def _short(exc: BaseException) -> str:
    """The error on one line, shortened at a word boundary."""
    import textwrap

    return textwrap.shorten(str(exc), width=200, placeholder=" ...") or type(exc).__name__


def _snippet(body: Any) -> str:
    """The start of a body that is not JSON, on one line, tags stripped."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else str(body)
    import textwrap

    return repr(textwrap.shorten(re.sub(r"<[^>]*>", " ", text), width=80, placeholder=" ...") or "(empty)")


def list_nodes(kube: Kube) -> list[dict[str, Any]]:
    result = api_call("listing nodes", kube.core().list_node, _preload_content=False)
    return _items("listing nodes", result)


def list_pods_all_namespaces(kube: Kube) -> Optional[list[dict[str, Any]]]:
    """Every pod, or None when we may not list them (free GPUs are then unknown)."""
    try:
        result = api_call("listing pods", kube.core().list_pod_for_all_namespaces, _preload_content=False)
    except InfraError as exc:
        if "permission denied" in str(exc):
            return None
        raise
    return _items("listing pods", result)


def _items(what: str, response: Any) -> list[dict[str, Any]]:
    """Raw JSON items from a `_preload_content=False` list (plain dicts, camelCase keys)."""
    import json

    try:
        data = json.loads(response.data)
    except (ValueError, UnicodeDecodeError):
        raise ClusterUnreachable(f"{what}: the Kubernetes API answered something that is not JSON ({_snippet(response.data)})") from None
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ClusterUnreachable(f"{what}: the Kubernetes API answered JSON that is not a list of objects")
    return items


def raw_get(kube: Kube, path: str, timeout: float = 5.0) -> dict[str, Any]:
    """GET a path the typed APIs do not cover (aggregated APIs); ApiException on HTTP errors."""
    import json

    api = kube.api_client
    if hasattr(api, "param_serialize"):  # kubernetes >= 33 (the pydantic-generated client)
        method, url, headers, _, _ = api.param_serialize(
            method="GET", resource_path=path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
        )
        response = api.call_api(method, url, header_params=headers, _request_timeout=timeout)
        response.read()
        if not 200 <= response.status < 300:
            from kubernetes.client.exceptions import ApiException

            raise ApiException(status=response.status, reason=response.reason, body=response.data)
        return json.loads(response.data)
    response = api.call_api(
        path, "GET", header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        _preload_content=False, _return_http_data_only=True, _request_timeout=timeout,
    )  # fmt: skip
    return json.loads(response.data)


def namespace_exists(kube: Kube, namespace: str) -> Optional[bool]:
    """True or False; None when the API will not say (no permission to read namespaces)."""
    from kubernetes.client.exceptions import ApiException

    try:
        kube.core().read_namespace(namespace, _preload_content=False)
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        if exc.status in (401, 403):
            return None
        raise translate_api_exception(f"reading namespace {namespace}", exc) from None
    except (OSError, ValueError) as exc:
        raise ClusterUnreachable(f"reading namespace {namespace}: {describe_unreachable(exc)}") from None


def list_namespace_names(kube: Kube) -> Optional[list[str]]:
    """Every namespace's name, or None when we may not list them."""
    try:
        result = api_call("listing namespaces", kube.core().list_namespace, _preload_content=False)
    except InfraError:
        return None
    return sorted(str((n.get("metadata") or {}).get("name")) for n in _items("listing namespaces", result))


def read_secret_value(kube: Kube, namespace: str, name: str, key: str) -> Optional[str]:
    """One decoded value of a Secret; None when the Secret or the key is absent."""
    import base64

    result = api_call(
        f"reading Secret {namespace}/{name}", kube.core().read_namespaced_secret, name, namespace,
        not_found_ok=True, _preload_content=False,
    )  # fmt: skip
    if result is None:
        return None
    import json

    try:
        data = json.loads(result.data)
    except ValueError:
        raise ClusterUnreachable(f"reading Secret {namespace}/{name}: the Kubernetes API answered something that is not JSON") from None
    encoded = ((data or {}).get("data") or {}).get(key)
    if encoded is None:
        plain = ((data or {}).get("stringData") or {}).get(key)
        return plain if isinstance(plain, str) else None
    try:
        return base64.b64decode(encoded).decode("utf-8").strip()
    except (ValueError, UnicodeDecodeError):
        return None
