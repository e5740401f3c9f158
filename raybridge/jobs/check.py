"""`check`: before the first submit, what this cluster offers a job and what is missing, in one table.

The service behind `python -m raybridge check`, in the spirit of `sky check`:
it connects with the command's kubeconfig and context and reports, one row
each, the API server (its address and Kubernetes version), the namespace,
KubeRay (the API versions served, the fields the RayJob CRD knows, the
operator's release from its Deployment), Kueue (API versions, controller
release), the GPUs its nodes publish as DRA devices and whether Kueue counts them, the queue and WorkloadPriorityClass a job would name (through the
same preflight `submit` runs), and the orphan bound a job gets on that
KubeRay release. A row is `ok`, `missing` (a submit would fail or wait for
ever), `unknown` (this user may not read it) or `note`.

An API server that does not answer is exit 3 with one line, as for every
command. It returns data (`ClusterCheck`) and prints nothing; it creates
nothing and never asks for more than read rights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from raybridge.kuberay.names import RAY_API_GROUP
from raybridge.kueue.names import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL
from raybridge.errors import BadInput, RaybridgeError
from raybridge.jobs.decision.orphan_guard import orphan_bound_summary
from raybridge.kuberay.releases import pre_running_supported
from raybridge.jobs.preflight import Preflight, preflight
from raybridge.kube.calls import PermissionDenied, api_call
from raybridge.kube.client import Kube
from raybridge.kube.objects import namespace_exists, raw_get
from raybridge.core.dra import DRIVER_OF_VENDOR
from raybridge.core.inventory import DeviceSources
from raybridge.kube.dra import list_dra_objects
from raybridge.kube.kueue import kueue_dra_settings, list_local_queue_names, served_versions
from raybridge.kube.rayapi import RayObjects
from raybridge.kueue.dra import dra_counting
from raybridge.kube.operators import OperatorRelease, kuberay_operator_release, kueue_release

OK, MISSING, UNKNOWN, NOTE = "ok", "missing", "unknown", "note"
RAYJOB_CRD = "rayjobs.ray.io"


@dataclass(frozen=True)
class CheckRow:
    check: str
    status: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class ClusterCheck:
    server: str
    context: Optional[str]
    namespace: str
    rows: tuple[CheckRow, ...] = field(default=())

    @property
    def missing(self) -> list[CheckRow]:
        return [row for row in self.rows if row.status == MISSING]

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server, "context": self.context, "namespace": self.namespace,
            "ready": not self.missing, "checks": [row.to_dict() for row in self.rows],
        }  # fmt: skip


def check_cluster(kube: Kube, queue: Optional[str], priority_class: Optional[str], orphan_bound: int) -> ClusterCheck:
    """Every row of the check against `kube` (connected, with the namespace to check)."""
    rows = [_api_server(kube)]  # first: an API server that does not answer ends the check here (exit 3)
    namespace = _namespace(kube)
    rows.append(namespace)
    kuberay_rows, pre_running, known = _kuberay(kube)
    rows += kuberay_rows
    kueue = bool(served_versions(kube))
    rows += _kueue(kube) if kueue else [CheckRow("Kueue API", NOTE, "kueue.x-k8s.io is not served: jobs are not queued")]
    rows += _dra(kube)
    if not kueue:
        rows += _without_kueue(queue, priority_class)
    elif namespace.status != MISSING:  # the queue's preflight would only say the namespace is missing again
        queue_rows = _queue(kube, queue, priority_class)
        never = _never_admitted_without_queue(kube) if not queue and kuberay_rows[0].status == OK and not _queued(queue_rows) else []
        rows += [row for row in queue_rows if not (never and row.check == "queue")] + never
    if kuberay_rows[0].status == OK:  # without KubeRay no RayJob exists to bound: its row says what is missing
        summary = orphan_bound_summary(pre_running, orphan_bound, evictable=kueue)
        if not (known or not kueue):
            summary += " (operator release unknown: assumed before v1.6)"
        rows.append(CheckRow("orphan bound", OK if pre_running or not kueue else NOTE, summary))
    return ClusterCheck(kube.server, kube.context, kube.namespace, tuple(rows))


def _queued(rows: list[CheckRow]) -> bool:
    """Whether the queue rows found a LocalQueue the job lands in (the namespace's default one, without --queue)."""
    return any(row.check == "queue" and row.status == OK for row in rows)


def _without_kueue(queue: Optional[str], priority_class: Optional[str]) -> list[CheckRow]:
    """Without Kueue a queue or priority class named is missing, as `submit` refuses it (`jobs/preflight.py`)."""
    return [
        CheckRow(check, MISSING, f"{flag} {name}: Kueue is not installed (no kueue.x-k8s.io API), so nothing here knows a {kind}")
        for check, flag, name, kind in (("queue", "--queue", queue, "LocalQueue"), ("priority class", "--priority-class", priority_class, "WorkloadPriorityClass"))
        if name
    ]  # fmt: skip


def _never_admitted_without_queue(kube: Kube) -> list[CheckRow]:
    """A missing row where a job without --queue would be suspended and never admitted: Kueue manages every job
    (manageJobsWithoutQueueName) and the namespace has no LocalQueue named default. Asked of the cluster itself: a
    dry-run create of a queueless RayJob goes through Kueue's webhook, which suspends it there (kueue@v0.13.10
    pkg/controller/jobframework/defaults.go ApplyDefaultForSuspend); nothing is created. Where the user may not
    create RayJobs, or the dry run is refused, nothing is said (`submit` says it after its create)."""
    probe = {
        "apiVersion": f"{RAY_API_GROUP}/v1", "kind": "RayJob",
        "metadata": {"name": "raybridge-check", "namespace": kube.namespace},
        "spec": {"entrypoint": "true", "shutdownAfterJobFinishes": True, "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}}},
    }  # fmt: skip
    try:
        stored = RayObjects(kube).dry_run_create(probe)
    except RaybridgeError:
        return []
    if not (stored.get("spec") or {}).get("suspend") or ((stored.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL):
        return []
    queues = list_local_queue_names(kube, kube.namespace)
    known = f"LocalQueues here: {', '.join(queues)}" if queues else f"{kube.namespace} has no LocalQueue"
    return [CheckRow(
        "queue", MISSING,
        f"no --queue: this cluster's Kueue manages jobs without a queue name (manageJobsWithoutQueueName) and "
        f"{kube.namespace} has no LocalQueue named default, so Kueue would hold the job for ever and submit refuses it "
        f"({known})",
    )]  # fmt: skip


def _api_server(kube: Kube) -> CheckRow:
    """The Kubernetes version; an API server that does not answer raises (exit 3), as it would for any command."""
    version = api_call("reading the API server's version", raw_get, kube, "/version")
    git_version = version.get("gitVersion") if isinstance(version, dict) else None
    return CheckRow("API server", OK, f"{kube.server} (Kubernetes {git_version or 'version not given'})")


def _namespace(kube: Kube) -> CheckRow:
    exists = namespace_exists(kube, kube.namespace)
    if exists is None:
        return CheckRow("namespace", UNKNOWN, f"{kube.namespace}: this user may not read namespaces")
    return CheckRow("namespace", OK if exists else MISSING, kube.namespace if exists else f"{kube.namespace} does not exist")


def _optional(kube: Kube, what: str, path: str) -> tuple[Any, str]:
    """(answer, "") or (None, why not): not served, not allowed, or failing."""
    try:
        answer = api_call(what, raw_get, kube, path, None, False, not_found_ok=True)
    except PermissionDenied:
        return None, "this user may not read it"
    except RaybridgeError as exc:
        return None, str(exc)
    return answer, "" if answer is not None else "not served"


def _kuberay(kube: Kube) -> tuple[list[CheckRow], bool, bool]:
    """The KubeRay rows, whether the operator honours preRunningDeadlineSeconds, whether its release is known."""
    group, why = _optional(kube, "reading the ray.io API group", f"/apis/{RAY_API_GROUP}")
    versions = [v.get("version") for v in (group or {}).get("versions") or [] if isinstance(v, dict)] if isinstance(group, dict) else []
    rows = [CheckRow("KubeRay API", OK if "v1" in versions else MISSING,
                     f"ray.io {', '.join(versions)}" if versions else f"ray.io is {why}: KubeRay is not installed")]  # fmt: skip
    crd, why = _optional(kube, f"reading CRD {RAYJOB_CRD}", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{RAYJOB_CRD}")
    if isinstance(crd, dict):
        spec = _served_schema(crd, "v1")
        fields = [
            name for name, found in (
                ("preRunningDeadlineSeconds", "preRunningDeadlineSeconds" in spec),
                ("authOptions", "authOptions" in _properties(spec.get("rayClusterSpec"))),
            ) if found
        ]  # fmt: skip
        rows.append(CheckRow("RayJob CRD", OK, f"knows {', '.join(fields)}" if fields else "knows neither preRunningDeadlineSeconds (v1.6) nor authOptions (v1.5.1)"))
    elif versions:
        rows.append(CheckRow("RayJob CRD", UNKNOWN, f"CRD {RAYJOB_CRD}: {why}"))
    operator = kuberay_operator_release(kube, running=True)
    if versions:
        rows.append(_operator_row("KubeRay operator", operator, "nothing starts a RayJob's Ray cluster"))
    return rows, pre_running_supported(operator.version), operator.version is not None


def _properties(schema: Any) -> dict[str, Any]:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return properties if isinstance(properties, dict) else {}


def _served_schema(crd: dict[str, Any], version: str) -> dict[str, Any]:
    """The `spec` properties of a CRD's version (its openAPIV3Schema), {} when absent."""
    for entry in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(entry, dict) and entry.get("name") == version:
            root = ((entry.get("schema") or {}).get("openAPIV3Schema")) or {}
            return _properties(_properties(root).get("spec"))
    return {}


def _kueue(kube: Kube) -> list[CheckRow]:
    versions = served_versions(kube)
    release = kueue_release(kube, running=True)
    return [
        CheckRow("Kueue API", OK, f"kueue.x-k8s.io {', '.join(versions)}"),
        _operator_row("Kueue controller", release, "nothing admits a queued job"),
    ]


def _operator_row(check: str, release: OperatorRelease, consequence: str) -> CheckRow:
    """An operator's row: its release, or missing when no replica of its Deployment is available, saying why."""
    if release.not_running:
        return CheckRow(check, MISSING, f"{release.version or 'release unknown'}, not running: {release.not_running}; {consequence}")
    return CheckRow(check, OK if release.version else UNKNOWN, release.describe())


def _dra(kube: Kube) -> list[CheckRow]:
    """Where the cluster's nodes publish GPUs as DRA devices: how many, the class a job claims them through, and
    whether Kueue counts them (`kueue/dra.py`). No row on a cluster without DRA GPUs."""
    dra = list_dra_objects(kube)
    if dra.notes and not dra.slices:
        return [CheckRow("DRA GPUs", UNKNOWN, "; ".join(dra.notes))]
    devices = DeviceSources.read(dra.slices, dra.classes)
    rows: list[CheckRow] = []
    kueue_served = bool(served_versions(kube))
    settings = kueue_dra_settings(kube) if kueue_served else None
    for vendor, driver in DRIVER_OF_VENDOR.items():
        gpus = [g for node in devices.by_node.values() for g in node if g.vendor == vendor and g.whole]
        if not gpus:
            continue
        nodes = len({g.node for g in gpus})
        device_class = devices.device_classes.get(vendor)
        where = f"{len(gpus)} {vendor} GPUs on {nodes} node{'s' if nodes != 1 else ''} as DRA devices of {driver.name}"
        if device_class is None:
            rows.append(CheckRow("DRA GPUs", MISSING, f"{where}, but no DeviceClass selects them (the driver installs {driver.device_class})"))
            continue
        rows.append(CheckRow("DRA GPUs", OK, f"{where}, claimed through DeviceClass {device_class}"))
        if settings is not None:
            verdict = dra_counting(settings, device_class, len(gpus))
            if verdict.resource:
                rows.append(CheckRow("Kueue and DRA", OK, f"Kueue counts DeviceClass {device_class} as {verdict.resource}"))
            else:
                rows.append(CheckRow("Kueue and DRA", MISSING if verdict.problem else UNKNOWN, verdict.problem or verdict.note or ""))
    return rows


def _queue(kube: Kube, queue: Optional[str], priority_class: Optional[str]) -> list[CheckRow]:
    """The queue and the priority class a job would name, each through `submit`'s own preflight."""
    rows: list[CheckRow] = []
    found, problems = _preflight(kube, {KUEUE_QUEUE_LABEL: queue})
    rows += [CheckRow("queue", MISSING, problem) for problem in problems]
    if found is not None and found.queue:
        behind = f" -> ClusterQueue {found.cluster_queue}" if found.cluster_queue else ""
        rows.append(CheckRow("queue", OK, f"LocalQueue {found.queue}{behind}"))
    elif found is not None and not queue:
        rows.append(CheckRow("queue", NOTE, "no --queue, and no LocalQueue named default here: the job is not queued by Kueue"))
    rows += [CheckRow("queue", NOTE, text) for text in (found.notes if found is not None else ())]
    if priority_class:
        found, problems = _preflight(kube, {KUEUE_PRIORITY_LABEL: priority_class})
        missing = [p for p in problems if "WorkloadPriorityClass" in p]
        unread = [text for text in (found.notes if found is not None else ()) if "WorkloadPriorityClass" in text]
        if missing:
            rows += [CheckRow("priority class", MISSING, problem) for problem in missing]
        else:
            rows.append(CheckRow("priority class", UNKNOWN if unread else OK, unread[0] if unread else f"WorkloadPriorityClass {priority_class}"))
    return rows


def _preflight(kube: Kube, labels: dict[str, Optional[str]]) -> tuple[Optional[Preflight], list[str]]:
    """`submit`'s preflight of a RayJob carrying only these Kueue labels: what it found, or the problems it names."""
    present = {key: value for key, value in labels.items() if value}
    probe = {"kind": "RayJob", "metadata": {"name": "check", "namespace": kube.namespace, "labels": present}, "spec": {}}
    try:
        return preflight(kube, kube.namespace, probe), []
    except BadInput as exc:
        return None, list(exc.problems)
