"""kubesim's simulated controllers (sim_gpu.py's KAI past v0.12, sim_autoscaler.py's cluster-autoscaler) as clients
of a real kube-apiserver, beside the real kube-scheduler and kwok's kubelets.

Why it exists: those controllers cannot run for real here (cluster-autoscaler is refused by the module proxy, by tag
and by commit; KAI past v0.12 is not served), but the API server, the scheduler and the kubelets they work with can.
`RealApi` gives a real cluster's admin client (testcluster/client.py `ClusterClient`; its ApiClient and dynamic
resources too, for the binding subresource and the writes the client has no method for) the few methods the
simulations call, with the simulations' own error type; GpuSim leaves default-scheduler pods to kube-scheduler and
pod phases to kwok, and binds KAI's pods through the binding subresource, as KAI's binder does. It lives in kubesim
because it is the simulations' side of the seam: kubesim's own tests (kubesim/tests/sim_stack.py) and raybridge's
(tests/e2e/ca_on_real_api.py, through tests/sims_on_real_api.py) run the simulations through it; it imports nothing
of either.

What it deliberately does not do: fault injection (testcluster/fault_proxy.py), start a cluster (testcluster/), or
any decision of its own.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from kubesim.errors import ApiError

T = TypeVar("T")


def _as_api_error(call: Callable[[], T]) -> T:
    """`call()`, with the kubernetes client's errors (the typed API's and the dynamic client's) raised as kubesim's
    ApiError (its `code` the HTTP status)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import DynamicApiError

    try:
        return call()
    except (ApiException, DynamicApiError) as exc:
        raise ApiError(code=int(exc.status or 0), reason=str(exc.reason or ""), message=str(exc.body or exc)) from exc


class RealApi:
    """A real cluster's admin client with the method names and error type kubesim's simulations use."""

    def __init__(self, client: Any) -> None:
        from kubernetes import client as k8s

        self.client = client
        self._core = k8s.CoreV1Api(client._api)  # the binding subresource, which the dynamic client does not name

    def list_objects(self, api_version: str, kind: str, namespace: Optional[str] = None, label_selector: Optional[str] = None) -> list[dict[str, Any]]:
        return _as_api_error(lambda: self.client.list_objects(api_version, kind, namespace, label_selector))

    def get_object(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        return _as_api_error(lambda: self.client.get_object(api_version, kind, name, namespace))

    def create_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """One create, as a kubelet registers its Node (status and all; kwok takes it over at once, so a second write
        of the status would meet a conflict)."""
        return _as_api_error(lambda: self.client.create_object(obj, write_status=False))

    def delete_object(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> dict[str, Any]:
        return _as_api_error(lambda: self.client.delete_object(api_version, kind, name, namespace))

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        return _as_api_error(lambda: self.client.update_status(obj))

    def patch_object(self, api_version: str, kind: str, name: str, patch: dict[str, Any], namespace: Optional[str] = None) -> dict[str, Any]:
        return _as_api_error(lambda: self.client.patch_object(api_version, kind, name, patch, namespace))

    def bind(self, pod: dict[str, Any], node: str, labels: dict[str, str]) -> None:
        """What KAI's binder does: the pod's GPU-group labels, then POST pods/<name>/binding (which sets nodeName and
        PodScheduled=True); a pod gone, changed or bound meanwhile is left alone."""
        meta = pod["metadata"]
        if labels:
            patch = {"metadata": {"labels": labels, "resourceVersion": meta.get("resourceVersion")}}
            try:
                self.patch_object("v1", "Pod", meta["name"], patch, meta["namespace"])
            except ApiError as exc:
                if exc.code in (404, 409):
                    return
                raise
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                                                                        "uid": meta.get("uid")},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
        try:
            _as_api_error(lambda: self._core.create_namespaced_binding(meta["namespace"], binding, _preload_content=False))
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
