"""Where `explain` reads its objects: a cluster's API, or files of `kubectl get -o yaml|json` output.

`explain` needs the same objects either way (the RayJob or RayCluster, its
Kueue Workload, the queues, flavors, Cohorts and nodes; or a KAI PodGroup or
pod, the Queues and the pods), so the service asks one of two sources with
the same methods: `ClusterObjects` (through the `kube/` adapters) and
`FileObjects` (the objects of the given files, indexed by kind, namespace
and name). A method answers None where the object is absent and a list
method None where its kind is not known (the API refused, or no file holds
that kind); `missing` words that for the warning.

It does not explain anything (`raybridge.queues.explain` does) and the file
source does not check what the files say beyond what every reader checks:
objects that are Kubernetes objects, of kinds it can use.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, Sequence

from raybridge.core.consts import DEFAULT_NAMESPACE
from raybridge.core.views import read_meta
from raybridge.errors import BadInput, InfraError
from raybridge.kueue.workload import workload_of

#: The kinds `explain` reads from files, by kind (apiVersion groups are not checked: a file is what kubectl printed).
FILE_KINDS = (
    "RayJob", "RayCluster", "Workload", "LocalQueue", "ClusterQueue", "Cohort", "ResourceFlavor", "Node",
    "ProvisioningRequest", "PodGroup", "Pod", "Queue",
)  # fmt: skip


class ExplainObjects(Protocol):
    """What `explain` reads, wherever it comes from."""

    namespace: str
    #: Where the objects are, after "in namespace N": "" for the cluster, " of FILES" for files.
    where: str

    def missing(self, what: str, one: bool = False) -> str: ...
    def ray_object(self, kind: str, name: str) -> Optional[dict[str, Any]]: ...
    def pod_group(self, name: str) -> Optional[dict[str, Any]]: ...
    def pod(self, name: str) -> Optional[dict[str, Any]]: ...
    def workload(self, owner: dict[str, Any]) -> Optional[dict[str, Any]]: ...
    def pending_position(self, local_queue: str, workload_name: str) -> Optional[dict[str, Any]]: ...
    def local_queue(self, name: str) -> Optional[dict[str, Any]]: ...
    def cluster_queue(self, name: str) -> Optional[dict[str, Any]]: ...
    def kueue_objects(self, kind: str) -> Optional[list[dict[str, Any]]]: ...
    def nodes(self) -> Optional[list[dict[str, Any]]]: ...
    def provisioning_requests(self) -> Optional[list[dict[str, Any]]]: ...
    def kai_queues(self) -> Optional[list[dict[str, Any]]]: ...
    def kai_problem(self) -> Optional[str]: ...
    def pods(self) -> Optional[list[dict[str, Any]]]: ...


class ClusterObjects:
    """The objects as the cluster's API serves them to this user."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube
        self.namespace: str = kube.namespace
        self.where = ""
        self._versions: Optional[list[str]] = None
        self._kai_problem: Optional[str] = None

    def missing(self, what: str, one: bool = False) -> str:
        return f"{what} could not be {'read' if one else 'listed'}"

    def ray_object(self, kind: str, name: str) -> Optional[dict[str, Any]]:
        from raybridge.kube.rayapi import RayObjects

        return RayObjects(self.kube).get(kind, name, self.namespace)

    def pod_group(self, name: str) -> Optional[dict[str, Any]]:
        from raybridge.kube.kai import get_pod_group

        return get_pod_group(self.kube, self.namespace, name)

    def pod(self, name: str) -> Optional[dict[str, Any]]:
        from raybridge.kube.kai import get_pod

        return get_pod(self.kube, self.namespace, name)

    def workload(self, owner: dict[str, Any]) -> Optional[dict[str, Any]]:
        from raybridge.kube.kueue import find_workload

        return find_workload(self.kube, read_meta(owner).namespace or self.namespace, owner)

    def pending_position(self, local_queue: str, workload_name: str) -> Optional[dict[str, Any]]:
        from raybridge.kube.kueue import pending_position

        return pending_position(self.kube, self.namespace, local_queue, workload_name)

    def local_queue(self, name: str) -> Optional[dict[str, Any]]:
        from raybridge.kube.kueue import get_local_queue

        return get_local_queue(self.kube, self.namespace, name)

    def cluster_queue(self, name: str) -> Optional[dict[str, Any]]:
        from raybridge.kube.kueue import get_cluster_queue

        return get_cluster_queue(self.kube, name)

    def kueue_objects(self, kind: str) -> Optional[list[dict[str, Any]]]:
        from raybridge.kube.kueue import list_cohorts, list_kueue_objects, served_versions

        if self._versions is None:
            self._versions = served_versions(self.kube)
        if kind == "Cohort":
            return list_cohorts(self.kube, self._versions)
        if kind == "Workload":
            # Every namespace's, where this user may list them; else this namespace's (who else holds the quota is then unseen).
            return list_kueue_objects(self.kube, self._versions, "workloads") or list_kueue_objects(self.kube, self._versions, "workloads", self.namespace)
        return list_kueue_objects(self.kube, self._versions, {"ClusterQueue": "clusterqueues", "ResourceFlavor": "resourceflavors"}[kind])

    def nodes(self) -> Optional[list[dict[str, Any]]]:
        from raybridge.kube.objects import list_nodes

        try:
            return list_nodes(self.kube)
        except InfraError as exc:
            if "permission denied" not in str(exc):
                raise
            return None

    def provisioning_requests(self) -> Optional[list[dict[str, Any]]]:
        from raybridge.kube.provisioning import list_provisioning_requests

        return list_provisioning_requests(self.kube, self.namespace)

    def kai_queues(self) -> Optional[list[dict[str, Any]]]:
        """The KAI Queues; None (with `kai_problem` saying why) where KAI is absent or they may not be listed."""
        from raybridge.kube.kai import list_queues

        try:
            return list_queues(self.kube)
        except InfraError as exc:
            if "no scheduling.run.ai" not in str(exc) and "permission denied" not in str(exc):
                raise
            self._kai_problem = str(exc)
            return None

    def kai_problem(self) -> Optional[str]:
        return self._kai_problem

    def pods(self) -> Optional[list[dict[str, Any]]]:
        from raybridge.kube.objects import list_pods_all_namespaces

        return list_pods_all_namespaces(self.kube)


class FileObjects:
    """The objects of `kubectl get -o yaml|json` files: Lists, single objects or YAML streams of them."""

    def __init__(self, objects: Sequence[dict[str, Any]], namespace: str, files: str) -> None:
        self.namespace = namespace
        self.files = files
        self.where = f" of {files}"
        self._by_kind: dict[str, list[dict[str, Any]]] = {}
        for obj in objects:
            self._by_kind.setdefault(str(obj.get("kind")), []).append(obj)

    def missing(self, what: str, one: bool = False) -> str:
        return f"{what} {'is' if one else 'are'} not in {self.files}"

    def _all(self, kind: str) -> Optional[list[dict[str, Any]]]:
        return list(self._by_kind[kind]) if kind in self._by_kind else None

    def _named(self, kind: str, name: str, namespace: Optional[str]) -> Optional[dict[str, Any]]:
        for obj in self._by_kind.get(kind, ()):
            if read_meta(obj).name == name and (namespace is None or _namespace_of(obj) == namespace):
                return obj
        return None

    def ray_object(self, kind: str, name: str) -> Optional[dict[str, Any]]:
        return self._named(kind, name, self.namespace)

    def pod_group(self, name: str) -> Optional[dict[str, Any]]:
        return self._named("PodGroup", name, self.namespace)

    def pod(self, name: str) -> Optional[dict[str, Any]]:
        return self._named("Pod", name, self.namespace)

    def workload(self, owner: dict[str, Any]) -> Optional[dict[str, Any]]:
        namespace = read_meta(owner).namespace or self.namespace
        mine = [w for w in self._by_kind.get("Workload", ()) if _namespace_of(w) == namespace]
        return workload_of(owner, mine)

    def pending_position(self, local_queue: str, workload_name: str) -> Optional[dict[str, Any]]:
        return None  # the visibility API's answer is not an object kubectl prints

    def local_queue(self, name: str) -> Optional[dict[str, Any]]:
        return self._named("LocalQueue", name, self.namespace)

    def cluster_queue(self, name: str) -> Optional[dict[str, Any]]:
        return self._named("ClusterQueue", name, None)

    def kueue_objects(self, kind: str) -> Optional[list[dict[str, Any]]]:
        if kind == "Cohort":
            return self._all(kind) or []  # most clusters name cohorts only in their ClusterQueues
        return self._all(kind)

    def nodes(self) -> Optional[list[dict[str, Any]]]:
        return self._all("Node")

    def provisioning_requests(self) -> Optional[list[dict[str, Any]]]:
        return self._all("ProvisioningRequest")

    def kai_queues(self) -> Optional[list[dict[str, Any]]]:
        return self._all("Queue")

    def kai_problem(self) -> Optional[str]:
        return f"no KAI Queues in {self.files}" if "Queue" not in self._by_kind else None

    def pods(self) -> Optional[list[dict[str, Any]]]:
        return self._all("Pod")

    def namespaces_of(self, name: str) -> list[str]:
        """The namespaces where an object `explain` can explain is called `name`."""
        return sorted({
            _namespace_of(obj) for kind in ("RayJob", "RayCluster", "PodGroup", "Pod") for obj in self._by_kind.get(kind, ())
            if read_meta(obj).name == name
        })  # fmt: skip


def _namespace_of(obj: dict[str, Any]) -> str:
    """An object's namespace as the API server defaults it."""
    return read_meta(obj).namespace or DEFAULT_NAMESPACE


def read_object_files(paths: Sequence[str], flag: str = "-f") -> tuple[list[dict[str, Any]], list[str]]:
    """Every object in the files (`kubectl get -o json|yaml` Lists, single objects, YAML streams), and notes.

    BadInput names the file and what is wrong where something is no Kubernetes object
    (no kind or metadata). Objects of kinds explain does not read (a Service of
    `kubectl get all`) are left out, and the notes say which.
    """
    from raybridge.files import read_yaml_documents

    objects: list[dict[str, Any]] = []
    problems: list[str] = []
    unread: dict[str, int] = {}
    for path in paths:
        for document in read_yaml_documents(path, flag):
            if document is None:
                continue
            items = document.get("items") if isinstance(document, dict) and "items" in document else [document]
            if not isinstance(items, list):
                problems.append(f"{flag} {path}: 'items' is not a list")
                continue
            for item in items:
                problem = _object_problem(item)
                if problem:
                    problems.append(f"{flag} {path}: {problem}")
                elif item["kind"] not in FILE_KINDS:
                    unread[item["kind"]] = unread.get(item["kind"], 0) + 1
                else:
                    objects.append(item)
    if problems:
        raise BadInput(*dict.fromkeys(problems))
    notes = [f"left out {', '.join(f'{n} {kind}' for kind, n in sorted(unread.items()))}: explain does not read them"] if unread else []
    return objects, notes


def _object_problem(item: Any) -> Optional[str]:
    if not isinstance(item, dict) or not isinstance(item.get("kind"), str) or not isinstance(item.get("metadata"), dict):
        return "an item is not a Kubernetes object (it needs a kind and metadata)"
    if not isinstance(item["metadata"].get("name"), str):
        return f"a {item['kind']} has no metadata.name"
    return None
