"""The core/v1 calls raybridge makes, without importing the client's `CoreV1Api`.

Why it exists: the official client (kubernetes >= 33, generated with pydantic) imports an API class's
module on first use, and with it every model its signatures name. `CoreV1Api`'s module is the largest:
about half a CPU-second, a quarter of a cluster command's start, paid by every `submit`, `explain` or
`discover` that reads a node or a pod, and by the adjuster's start. raybridge reads core/v1 as raw JSON
everywhere (`_preload_content=False`), so the models are never used. `CoreApi` offers the same methods
under the same names and arguments for the requests raybridge makes (`ROUTES`) and builds each request
with the client's own `ApiClient.param_serialize` and sends it through its `call_api` (so
`kube.client.BoundedApiClient`'s bounds and retries apply as before); an answer outside 2xx is raised as
the client raises it (`ApiException.from_response`). A body goes as the caller wrote it: CoreV1Api reads
it into its model and writes that back (timestamps rewritten with +00:00 for Z, a field its model lacks
refused), the API server validates it either way.

`send` is that one request, for `kube.objects.raw_get` (paths no typed API covers) too.

What it deliberately does not do: deserialize into models, or stand in for any other call. A call it
does not route (another method, `_preload_content` left True, `async_req`) goes to the client's own
`CoreV1Api`, imported then; so does every call on a client older than the pydantic one (no
`param_serialize`), where that module is cheap.
"""

from __future__ import annotations

from types import MethodType
from typing import Any, Callable, Optional, Sequence

#: method name: (HTTP method, path, its positional parameters in the client's order; "body" last where it takes one)
ROUTES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "list_node": ("GET", "/api/v1/nodes", ()),
    "patch_node": ("PATCH", "/api/v1/nodes/{name}", ("name", "body")),
    "list_namespace": ("GET", "/api/v1/namespaces", ()),
    "read_namespace": ("GET", "/api/v1/namespaces/{name}", ("name",)),
    "list_pod_for_all_namespaces": ("GET", "/api/v1/pods", ()),
    "list_namespaced_pod": ("GET", "/api/v1/namespaces/{namespace}/pods", ("namespace",)),
    "read_namespaced_pod": ("GET", "/api/v1/namespaces/{namespace}/pods/{name}", ("name", "namespace")),
    "create_namespaced_pod": ("POST", "/api/v1/namespaces/{namespace}/pods", ("namespace", "body")),
    "delete_namespaced_pod": ("DELETE", "/api/v1/namespaces/{namespace}/pods/{name}", ("name", "namespace")),
    "list_namespaced_pod_template": ("GET", "/api/v1/namespaces/{namespace}/podtemplates", ("namespace",)),
    "create_namespaced_pod_template": ("POST", "/api/v1/namespaces/{namespace}/podtemplates", ("namespace", "body")),
    "delete_namespaced_pod_template": ("DELETE", "/api/v1/namespaces/{namespace}/podtemplates/{name}", ("name", "namespace")),
    "list_namespaced_event": ("GET", "/api/v1/namespaces/{namespace}/events", ("namespace",)),
    "create_namespaced_event": ("POST", "/api/v1/namespaces/{namespace}/events", ("namespace", "body")),
    "read_namespaced_secret": ("GET", "/api/v1/namespaces/{namespace}/secrets/{name}", ("name", "namespace")),
    "read_namespaced_config_map": ("GET", "/api/v1/namespaces/{namespace}/configmaps/{name}", ("name", "namespace")),
    "create_namespaced_config_map": ("POST", "/api/v1/namespaces/{namespace}/configmaps", ("namespace", "body")),
}

#: The query parameters of those methods, by the client's argument name (the API's name where they differ), in the
#: order the client writes them into the URL.
QUERY_PARAMETERS = {
    "pretty": "pretty", "allow_watch_bookmarks": "allowWatchBookmarks", "_continue": "continue", "dry_run": "dryRun",
    "field_manager": "fieldManager", "field_selector": "fieldSelector", "field_validation": "fieldValidation", "force": "force",
    "grace_period_seconds": "gracePeriodSeconds", "label_selector": "labelSelector", "limit": "limit",
    "orphan_dependents": "orphanDependents", "propagation_policy": "propagationPolicy", "resource_version": "resourceVersion",
    "resource_version_match": "resourceVersionMatch", "send_initial_events": "sendInitialEvents", "timeout_seconds": "timeoutSeconds",
    "watch": "watch",
}  # fmt: skip

#: Arguments that leave the call to the client's CoreV1Api (see the module's docstring).
_CLIENT_ONLY = ("async_req", "_return_http_data_only", "_request_auth", "_host_index")


class CoreApi:
    """`CoreV1Api`'s methods in ROUTES, for `_preload_content=False` calls; the rest through `CoreV1Api` itself."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self._full: Any = None

    def _client_api(self) -> Any:
        if self._full is None:
            from kubernetes import client

            self._full = client.CoreV1Api(self.api_client)
        return self._full

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):  # not an API method (and `_full` before __init__, as copy makes it, is no recursion)
            raise AttributeError(name)
        if name not in ROUTES:
            return getattr(self._client_api(), name)

        def call(api: CoreApi, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("_preload_content", True) or any(kwargs.get(k) is not None for k in _CLIENT_ONLY):
                return getattr(api._client_api(), name)(*args, **kwargs)
            return api._send(name, args, kwargs)

        call.__name__ = call.__qualname__ = name
        # Bound, as the client's methods are: `kube.calls` names the server of a failed call from `fn.__self__.api_client`.
        return MethodType(call, self)

    def _send(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        method, path, positional = ROUTES[name]
        if len(args) > len(positional):
            raise TypeError(f"{name}() takes {len(positional)} positional arguments but {len(args)} were given")
        values = dict(zip(positional, args))
        kwargs = dict(kwargs)
        kwargs.pop("_preload_content", None)
        for parameter in positional[len(args):]:
            if parameter in kwargs:
                values[parameter] = kwargs.pop(parameter)
            else:
                raise TypeError(f"{name}() missing required argument: '{parameter}'")
        timeout = kwargs.pop("_request_timeout", None)
        headers = dict(kwargs.pop("_headers", None) or {})
        content_type = kwargs.pop("_content_type", None)
        body = kwargs.pop("body", values.pop("body", None))
        for client_only in _CLIENT_ONLY:
            kwargs.pop(client_only, None)
        unknown = sorted(k for k in kwargs if k not in QUERY_PARAMETERS)
        if unknown:
            raise TypeError(f"{name}() got unexpected keyword arguments: {', '.join(unknown)}")
        query = [(api_name, kwargs[name]) for name, api_name in QUERY_PARAMETERS.items() if kwargs.get(name) is not None]
        if content_type:
            headers["Content-Type"] = content_type
        return send(self.api_client, method, path, path_params=values, query=query, headers=headers, body=body, timeout=timeout)


def send(
    api_client: Any, method: str, path: str, *, path_params: Optional[dict[str, Any]] = None, query: Sequence[tuple[str, Any]] = (),
    headers: Optional[dict[str, Any]] = None, body: Any = None, timeout: Any = None, **call_options: Any,
) -> Any:
    """One request, built by the client's own `param_serialize` (JSON accepted unless `headers` say otherwise) and sent
    through `api_client.call_api` (`call_options`: `kube.client.BoundedApiClient`'s, such as `_retry`): the urllib3
    response, or, for an answer outside 2xx, ApiException as the client raises it. Clients with `param_serialize` only."""
    from kubernetes.client.exceptions import ApiException

    headers = {"Accept": "application/json", **(headers or {})}
    http_method, url, header_params, serialized, post_params = api_client.param_serialize(
        method=method, resource_path=path, path_params=path_params or {}, query_params=list(query), header_params=headers, body=body,
        post_params=[], files={}, auth_settings=["BearerToken"], collection_formats={},
    )  # fmt: skip
    response = api_client.call_api(http_method, url, header_params, serialized, post_params, _request_timeout=timeout, **call_options)
    if not 200 <= response.status <= 299:
        response.read()
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return response.response


def core_api(api_client: Any) -> Any:
    """`CoreApi` on `api_client`, or the client's own `CoreV1Api` where the client predates `param_serialize`."""
    from kubernetes.client.exceptions import ApiException

    if hasattr(api_client, "param_serialize") and hasattr(ApiException, "from_response"):
        return CoreApi(api_client)
    from kubernetes import client

    return client.CoreV1Api(api_client)


__all__ = ["QUERY_PARAMETERS", "ROUTES", "CoreApi", "core_api", "send"]
