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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from raybridge.core.consts import DEFAULT_NAMESPACE
from raybridge.errors import BadInput, ClusterUnreachable, InfraError

T = TypeVar("T")

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (_SA_DIR / "token").exists()


def kubeconfig_path(explicit: Optional[str] = None) -> Optional[Path]:
    """The kubeconfig that would be used, or None if there is none."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("KUBECONFIG")
    if env:
        for part in env.split(os.pathsep):
            if part and Path(part).exists():
                return Path(part)
        return None
    default = Path.home() / ".kube" / "config"
    return default if default.exists() else None


def cluster_configured(kubeconfig: Optional[str] = None) -> bool:
    """True when a kubeconfig or an in-cluster service account is available."""
    return kubeconfig_path(kubeconfig) is not None or in_cluster()


@dataclass
class Kube:
    """A connected API client and the namespace commands default to."""

    api_client: Any
    namespace: str
    in_cluster: bool
    context: Optional[str] = None

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)


def connect(kubeconfig: Optional[str] = None, context: Optional[str] = None, namespace: Optional[str] = None) -> Kube:
    """Load the kubeconfig (or in-cluster config) into a fresh ApiClient."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig_path(kubeconfig)
    if kubeconfig and (path is None or not path.exists()):
        raise BadInput(f"--kubeconfig {kubeconfig!r} does not exist")
    if path is None:
        if not in_cluster():
            raise ClusterUnreachable("no kubeconfig found (KUBECONFIG, ~/.kube/config) and not running in a cluster")
        config.load_incluster_config()
        ns_file = _SA_DIR / "namespace"
        default_ns = ns_file.read_text().strip() if ns_file.exists() else DEFAULT_NAMESPACE
        return Kube(client.ApiClient(), namespace or default_ns, in_cluster=True)
    configuration = client.Configuration()
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
        client.ApiClient(configuration),
        namespace or ctx_ns or DEFAULT_NAMESPACE,
        in_cluster=False,
        context=(chosen or {}).get("name"),
    )


def api_call(what: str, fn: Callable[..., T], *args: Any, not_found_ok: bool = False, **kwargs: Any) -> Optional[T]:
    """Call the API; map failures onto raybridge errors naming `what` was being done."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error

    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status == 404 and not_found_ok:
            return None
        raise translate_api_exception(what, exc) from None
    except (Urllib3Error, OSError) as exc:
        raise ClusterUnreachable(f"{what}: the Kubernetes API is unreachable ({_short(exc)})") from None


def translate_api_exception(what: str, exc: Any) -> Exception:
    status = getattr(exc, "status", 0) or 0
    message = status_message(exc)
    if status in (400, 409, 422):
        return BadInput(f"{what}: {message}")
    if status == 404:
        return InfraError(f"{what}: not found ({message}); is the CRD installed?")
    if status in (401, 403):
        return InfraError(f"{what}: permission denied ({message})")
    if status == 0 or status >= 500 or status == 429:
        return ClusterUnreachable(f"{what}: the API server answered {status or 'nothing'} ({message})")
    return InfraError(f"{what}: HTTP {status} ({message})")


def status_message(exc: Any) -> str:
    """The `message` of a Kubernetes Status body, else the reason phrase."""
    import json

    body = getattr(exc, "body", None)
    if body:
        try:
            data = json.loads(body)
            if isinstance(data, dict) and data.get("message"):
                return str(data["message"])
        except (ValueError, TypeError):
            pass
    return str(getattr(exc, "reason", "") or exc)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 200 else text[:200] + "..."


def list_nodes(kube: Kube) -> list[dict[str, Any]]:
    result = api_call("listing nodes", kube.core().list_node, _preload_content=False)
    return _items(result)


def list_pods_all_namespaces(kube: Kube) -> Optional[list[dict[str, Any]]]:
    """Every pod, or None when we may not list them (free GPUs are then unknown)."""
    from kubernetes.client.exceptions import ApiException

    try:
        result = kube.core().list_pod_for_all_namespaces(_preload_content=False)
    except ApiException as exc:
        if exc.status in (401, 403):
            return None
        raise translate_api_exception("listing pods", exc) from None
    except OSError as exc:
        raise ClusterUnreachable(f"listing pods: the Kubernetes API is unreachable ({_short(exc)})") from None
    return _items(result)


def _items(response: Any) -> list[dict[str, Any]]:
    """Raw JSON items from a `_preload_content=False` list (plain dicts, camelCase keys)."""
    import json

    data = json.loads(response.data)
    return list(data.get("items") or [])


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
