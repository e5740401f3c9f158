"""What a test does to a running cluster directly: create, read, list, replace and delete objects.

Why: the end-to-end tests set up state (namespaces, queues, nodes, a rival RayJob)
and check what raybridge left behind. `ClusterClient` does that through the official
client as the admin, with short method names the test helpers (`fresh_queue`, `leftovers`, ...) and kubesim's
simulations (through kubesim/real_api.py `RealApi`) share. Objects are plain dicts.

What this does not do: no fault injection and no simulated controllers (the real
ones run), no waiting (a test waits for what it expects with its own bound), but for one: a PriorityClass is usable
once made (`create_priority_class`).
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

__all__ = ["ClusterClient", "dynamic_client"]

#: Held while a client reads its discovery cache (`ClusterClient._resource`): one lock for every client, so a client
#: made without its constructor (the unit tests') needs none of its own, and the reads are short once cached.
_DISCOVERY_LOCK = threading.RLock()


def dynamic_client(api_client: Any, cache_file: Path) -> Any:
    """A dynamic client over `api_client` that caches discovery in `cache_file`, in a directory of its owner's (mode
    0700). The kubernetes client's default is /tmp/osrcp-<md5 of the server URL>.json
    (kubernetes/dynamic/discovery.py `Discoverer.__init__`): a name any local user can guess and write first (the
    client loads what it finds there), and one left behind by every client of every stack."""
    from kubernetes import dynamic

    return dynamic.DynamicClient(api_client, cache_file=str(cache_file))


def _as_parsed(client: Any, answer: Any) -> Any:
    """The API server's answer as the JSON parser gave it (plain dicts and lists), for the dynamic client's
    `serializer=`: its own (`ResourceInstance`, then `.to_dict()`) wraps every field in an object and unwraps it again,
    a sixth of a test process's CPU where a simulation lists pods in a loop (py-spy, 2026-11-30)."""
    return answer


class ClusterClient:
    """The admin's view of the cluster whose admin kubeconfig is `kubeconfig`."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import config

        self.kubeconfig = Path(kubeconfig)
        self._config = yaml.safe_load(self.kubeconfig.read_text())
        self._api = config.new_client_from_config(str(self.kubeconfig))
        #: Where this client's dynamic clients cache discovery (`dynamic_client`), removed with the client.
        self.discovery_cache = Path(tempfile.mkdtemp(prefix="testcluster-discovery-"))
        self._remove_cache = weakref.finalize(self, shutil.rmtree, str(self.discovery_cache), True)
        self._dynamic = dynamic_client(self._api, self.discovery_cache / "discovery.json")

    @property
    def url(self) -> str:
        return self._config["clusters"][0]["cluster"]["server"]

    @property
    def ca_data(self) -> str:
        return self._config["clusters"][0]["cluster"]["certificate-authority-data"]

    def close(self) -> None:
        self._api.close()
        self._remove_cache()

    def dynamic_client(self, api_client: Any) -> Any:
        """A dynamic client over `api_client` (one of `api_client()`'s) caching discovery in this client's own directory."""
        return dynamic_client(api_client, self.discovery_cache / f"discovery-{id(api_client)}.json")

    # -- clients and kubeconfigs --------------------------------------------------------------
    def api_client(self, token: Optional[str] = None, *, retries: Optional[bool] = None) -> Any:
        """An official-client ApiClient: the admin's, or one that sends `token`."""
        from kubernetes import client, config

        if token is None:
            api = config.new_client_from_config(str(self.kubeconfig))
        else:
            configuration = client.Configuration()
            configuration.host = self.url
            configuration.ssl_ca_cert = self._ca_file()
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
            api = client.ApiClient(configuration)
        if retries is not None:
            api.configuration.retries = retries
        return api

    def _ca_file(self) -> str:
        path = self.kubeconfig.with_name(self.kubeconfig.name + ".ca.crt")
        if not path.exists():
            path.write_bytes(base64.b64decode(self.ca_data))
        return str(path)

    def write_kubeconfig(
        self, path: str | Path, namespace: str = "default", context: str = "raybridge-test", *, token: Optional[str] = None,
        certificate_authority: str = "data", exec_api_version: Optional[str] = None,
    ) -> Path:
        """A kubeconfig for this cluster in `namespace`: the admin's credentials, or the bearer `token`.

        The CA as real kubeconfigs name it: `certificate_authority="data"` inlines it, `"file"` writes it next to the
        kubeconfig (`<name>.ca.crt`) and names that file. `exec_api_version` (`client.authentication.k8s.io/v1` or
        `/v1beta1`) hands `token` out through an exec credential plugin, a script next to the kubeconfig
        (`<name>.exec.sh`) that prints an ExecCredential, as cloud plugins do."""
        target = Path(path)
        cluster: dict[str, Any] = {"server": self.url}
        if certificate_authority == "data":
            cluster["certificate-authority-data"] = self.ca_data
        elif certificate_authority == "file":
            ca_file = target.with_name(target.name + ".ca.crt")
            ca_file.write_bytes(base64.b64decode(self.ca_data))
            cluster["certificate-authority"] = str(ca_file)
        else:
            raise ValueError(f"certificate_authority is 'file' or 'data', not {certificate_authority!r}")
        user: dict[str, Any] = {"token": token} if token is not None else self._config["users"][0]["user"]
        if exec_api_version is not None:
            if token is None:
                raise ValueError("an exec credential plugin hands out a token: pass token=")
            user = {"exec": _exec_plugin(target.with_name(target.name + ".exec.sh"), token, exec_api_version)}
        written = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "testcluster", "cluster": cluster}],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": context, "context": {"cluster": "testcluster", "user": "user", "namespace": namespace}}],
            "current-context": context,
        }
        target.write_text(yaml.safe_dump(written))
        target.chmod(0o600)
        return target

    def service_account_token(self, namespace: str, name: str, *, expiration_seconds: int = 3600) -> str:
        """A token for ServiceAccount namespace/name, from the TokenRequest API."""
        from kubernetes import client

        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": expiration_seconds}}
        answer = client.CoreV1Api(self._api).create_namespaced_service_account_token(name, namespace, request, _preload_content=False)
        return json.loads(answer.data)["status"]["token"]

    # -- objects ------------------------------------------------------------------------------
    def _resource(self, api_version: str, kind: str) -> Any:
        """The dynamic client's resource for the kind, discovery read again where the kind is new to it; one thread
        at a time, as the kubernetes client's discovery cache is not safe across threads (a test and a thread
        beside it, a simulation or a watch, share a client: two reading discovery again at once met
        `KeyError: 'resources'` in kubernetes/dynamic/discovery.py `parse_api_groups`)."""
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        with _DISCOVERY_LOCK:
            try:
                return self._dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                self._dynamic.resources.invalidate_cache()  # a CRD installed since discovery was read
                return self._dynamic.resources.get(api_version=api_version, kind=kind)

    @staticmethod
    def _namespace(resource: Any, namespace: Optional[str]) -> Optional[str]:
        return (namespace or "default") if resource.namespaced else None

    def create_object(self, obj: dict[str, Any], *, dry_run: bool = False, write_status: bool = True) -> dict[str, Any]:
        """Create `obj`; a `status` it carries is then written through the status subresource, unless `write_status`
        is False (one create, as a kubelet registers its Node: kwok takes such a node over at once, so a second write
        of its status would meet a conflict). `dry_run`: as `kubectl create --dry-run=server`, every check (schema,
        CEL rules, admission webhooks) and nothing kept."""
        resource = self._resource(obj["apiVersion"], obj["kind"])
        namespace = self._namespace(resource, obj.get("metadata", {}).get("namespace"))
        created = resource.create(body=obj, namespace=namespace, serializer=_as_parsed, **({"dry_run": "All"} if dry_run else {}))
        if write_status and obj.get("status") is not None and "status" in resource.subresources and not dry_run:
            created = self.update_status(dict(created, status=obj["status"]))
        return created

    def patch_object(self, api_version: str, kind: str, name: str, patch: dict[str, Any], namespace: Optional[str] = None) -> dict[str, Any]:
        """A JSON merge patch of the object (`kubectl patch --type=merge`)."""
        resource = self._resource(api_version, kind)
        return resource.patch(name=name, namespace=self._namespace(resource, namespace), body=patch,
                              content_type="application/merge-patch+json", serializer=_as_parsed)  # fmt: skip

    def create_priority_class(self, name: str, value: int, *, namespace: str = "default", timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        """Create the PriorityClass `name` at `value` (and `fields`, e.g. preemptionPolicy="Never") and return once a pod
        naming it is admitted at that value. The API server's Priority admission plugin reads PriorityClasses from its
        informer, not from storage (kubernetes v1.34.1 plugin/pkg/admission/priority/admission.go, `admitPod` through
        `p.lister.Get`): a pod made at once can be refused ("no PriorityClass with name ... was found") or, where the class
        was deleted and made again at another value, be given the old value."""
        created = self.create_object({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                                      "value": value, **fields})  # fmt: skip
        self._until_a_pod_is_admitted(f"priority-probe-{name}"[:63], namespace, {"priorityClassName": name}, (403, "PriorityClass"),
                                      timeout, f"the Priority admission plugin knowing PriorityClass {name} at {value}",
                                      lambda pod: pod["spec"].get("priority") == value)  # fmt: skip
        return created

    def create_namespace(self, name: str, *, timeout: float = 30.0) -> dict[str, Any]:
        """Create the namespace `name` and return once a pod in it passes admission. Kueue's pod webhook reads the
        namespace from its manager's cache (kueue v0.17.0 pkg/controller/jobs/pod/pod_webhook.go `Default`, through
        `w.client.Get`): a pod made at once can be refused with `Namespace "<name>" not found` until that cache has
        seen it. On a cluster with no such webhook the first probe passes."""
        created = self.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self._until_a_pod_is_admitted("namespace-probe", name, {}, (404, "Namespace"), timeout, f"admission seeing namespace {name}")
        return created

    def _until_a_pod_is_admitted(self, name: str, namespace: str, spec: dict[str, Any], refusal: tuple[int, str], timeout: float,
                                 what: str, accepted: Callable[[dict[str, Any]], bool] = lambda pod: True) -> None:
        """Server-side dry runs of the pod `name` (with `spec`) in `namespace`, which go through every admission and keep
        nothing, until one is admitted and `accepted` by the caller. An answer of `refusal` (its status, and a word its
        body names) is waited out; any other error is raised."""
        from kubernetes.dynamic.exceptions import DynamicApiError
        from testcluster.processes import wait_until

        probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                 "spec": {**spec, "containers": [{"name": "c", "image": "probe"}]}}  # fmt: skip

        def admitted() -> bool:
            try:
                return accepted(self.create_object(probe, dry_run=True))
            except DynamicApiError as exc:
                if exc.status == refusal[0] and refusal[1] in str(exc.body or ""):
                    return False
                raise

        wait_until(admitted, timeout, what)

    def get_object(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        from kubernetes.dynamic.exceptions import NotFoundError

        resource = self._resource(api_version, kind)
        try:
            return resource.get(name=name, namespace=self._namespace(resource, namespace), serializer=_as_parsed)
        except NotFoundError:
            return None

    def list_objects(self, api_version: str, kind: str, namespace: Optional[str] = None, label_selector: Optional[str] = None) -> list[dict[str, Any]]:
        resource = self._resource(api_version, kind)
        listed = resource.get(namespace=namespace if resource.namespaced else None, label_selector=label_selector, serializer=_as_parsed)
        return [dict(item, apiVersion=api_version, kind=kind) for item in listed.get("items", [])]

    def replace_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        namespace = self._namespace(resource, obj.get("metadata", {}).get("namespace"))
        return resource.replace(body=obj, namespace=namespace, serializer=_as_parsed)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        namespace = self._namespace(resource, obj.get("metadata", {}).get("namespace"))
        return resource.status.replace(body=obj, namespace=namespace, serializer=_as_parsed)

    def delete_object(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None, propagation_policy: Optional[str] = None) -> dict[str, Any]:
        resource = self._resource(api_version, kind)
        body = {"propagationPolicy": propagation_policy} if propagation_policy else None
        return resource.delete(name=name, namespace=self._namespace(resource, namespace), body=body, serializer=_as_parsed)


EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


def _exec_plugin(script: Path, token: str, api_version: str) -> dict[str, Any]:
    """An exec credential plugin printing an ExecCredential of `api_version` with `token`, and its kubeconfig entry.

    The script refuses to run without KUBERNETES_EXEC_INFO (clients set it, with the apiVersion they expect), as a
    real plugin would."""
    if api_version not in EXEC_API_VERSIONS:
        raise ValueError(f"exec_api_version is one of {EXEC_API_VERSIONS}, not {api_version!r}")
    credential = json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": {"token": token}})
    script.write_text(
        "#!/bin/sh\n"
        'if [ -z "$KUBERNETES_EXEC_INFO" ]; then echo "KUBERNETES_EXEC_INFO is not set" >&2; exit 1; fi\n'
        f"cat <<'EOF'\n{credential}\nEOF\n"
    )
    script.chmod(0o755)
    # interactiveMode is required by client.authentication.k8s.io/v1 (optional in v1beta1).
    return {"apiVersion": api_version, "command": str(script), "interactiveMode": "Never", "provideClusterInfo": False}
