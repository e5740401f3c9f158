"""The simulated KubeRay: RayCluster and RayJob controllers, backed by one real Ray head.

Why this module exists: raybridge watches what KubeRay does with its RayJobs
(cluster readiness, the dashboard URL, job status). `FakeKubeRay` plays the
operator against `tests/kubeapi/server.py` through the official client (the
polling loop and API access are in `sim_common.py`): it creates pods and
services, drives the RayJob state machine and submits to and polls the real Ray
dashboard. The kubelet side of a port-forward is registered on the server with
`set_port_forward_target`. The state machine follows the Go sources (KubeRay
`rayjob_controller.go`, `utils/validation.go`) in its transitions, reasons and
messages.

What it deliberately does not do:

- FakeKubeRay: no real pods or processes; all Ray pods report `podIP`
  127.0.0.1 and every Ray job runs on the one real Ray head the test started,
  so the fake stops a Ray job where the real cluster would have died with it
  (suspension, deletion). No autoscaling, no submitter Kubernetes Job
  (K8sJobMode is submitted over HTTP like HTTPMode), no finalizer on RayJobs,
  no RayService, no deletionStrategy, no cron schedules, no auth tokens, no
  GCS fault tolerance. Like the real operator it ignores `suspend` while a
  RayJob is `Waiting` for its job id.
- Hooks and handlers stay registered after `stop()` (the server cannot
  unregister them); stopping only ends reconciliation.
"""

from __future__ import annotations

import copy
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping, Optional

import yaml
from kubernetes.client.exceptions import ApiException

from tests.kubeapi.sim_common import (
    RAY_API,
    RAY_GROUP,
    RAY_VERSION,
    Obj,
    PollingController,
    find_condition,
    format_quantity,
    now_rfc3339,
    owner_reference,
    pod_requests,
    set_condition,
)

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")

DASHBOARD_PORT = 8265
HEAD_SERVICE_PORTS = (("client", 10001), ("dashboard", DASHBOARD_PORT), ("gcs-server", 6379), ("metrics", 8080))
CLUSTER_DOMAIN = "cluster.local"
# k8s.io/apimachinery/pkg/util/rand: the alphabet of rand.String, used by KubeRay names.
_K8S_RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(length: int = 5) -> str:
    return "".join(random.choice(_K8S_RAND_ALPHABET) for _ in range(length))


# --------------------------------------------------------------------------
# KubeRay decision logic (pure)
# --------------------------------------------------------------------------


def validate_rayjob(job: Mapping[str, Any]) -> Optional[str]:
    """The subset of KubeRay's ValidateRayJobSpec that raybridge can trip over; the error text or None."""
    spec = job.get("spec") or {}
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    if spec.get("suspend") and not shutdown:
        return (
            "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false "
            "is not allowed to be suspended"
        )
    if int(spec.get("ttlSecondsAfterFinished") or 0) < 0:
        return "The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer"
    if not shutdown and int(spec.get("ttlSecondsAfterFinished") or 0) > 0:
        return (
            "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false "
            "cannot have TTLSecondsAfterFinished"
        )
    selector_mode = bool(spec.get("clusterSelector"))
    if spec.get("suspend") and selector_mode:
        return "The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation"
    if not spec.get("rayClusterSpec") and not selector_mode:
        return "The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set"
    backoff = spec.get("backoffLimit")
    if spec.get("submissionMode") == "InteractiveMode" and backoff is not None and int(backoff) > 0:
        return "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode"
    if spec.get("runtimeEnvYAML"):
        try:
            yaml.safe_load(spec["runtimeEnvYAML"])
        except yaml.YAMLError as exc:
            return f"failed to unmarshal RuntimeEnvYAML: {exc}"
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and int(deadline) <= 0:
        return "The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer"
    if backoff is not None and int(backoff) < 0:
        return "The RayJob spec is invalid: backoffLimit must be a positive integer"
    return None


def head_service_name(cluster: Mapping[str, Any]) -> str:
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    override = ((head.get("headService") or {}).get("metadata") or {}).get("name")
    return override or f"{cluster['metadata']['name']}-head-svc"


def _seconds_since(timestamp: Optional[str]) -> float:
    if not timestamp:
        return 0.0
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - then).total_seconds()


# --------------------------------------------------------------------------
# KubeRay
# --------------------------------------------------------------------------


class _DashboardClient:
    """The few Ray Job API calls the RayJob controller makes (plain urllib)."""

    def __init__(self, address: str) -> None:
        self.base = f"http://{address}"

    def job_info(self, job_id: str) -> Optional[Obj]:
        """The job's JobDetails, or None when the dashboard does not know the job (404)."""
        url = f"{self.base}/api/jobs/{urllib.parse.quote(job_id, safe='')}"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def submit(self, job_id: str, spec: Mapping[str, Any]) -> None:
        body: Obj = {"entrypoint": spec.get("entrypoint", ""), "submission_id": job_id}
        if spec.get("runtimeEnvYAML"):
            body["runtime_env"] = yaml.safe_load(spec["runtimeEnvYAML"])
        if spec.get("metadata"):
            body["metadata"] = spec["metadata"]
        for field_name, key in (
            ("entrypointNumCpus", "entrypoint_num_cpus"),
            ("entrypointNumGpus", "entrypoint_num_gpus"),
        ):
            if spec.get(field_name) is not None:
                body[key] = spec[field_name]
        if spec.get("entrypointResources"):
            body["entrypoint_resources"] = json.loads(spec["entrypointResources"])
        self._post("/api/jobs/", body)

    def stop(self, job_id: str) -> None:
        try:
            self._post(f"/api/jobs/{urllib.parse.quote(job_id, safe='')}/stop", {})
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise

    def _post(self, path: str, body: Obj) -> None:
        request = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


def _ray_node_labels(cluster_name: str, node_type: str, group: str) -> dict[str, str]:
    return {
        "ray.io/cluster": cluster_name,
        "ray.io/node-type": node_type,
        "ray.io/group": group,
        "ray.io/is-ray-node": "yes",
        "ray.io/identifier": f"{cluster_name}-{node_type}",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }


class FakeKubeRay(PollingController):
    """KubeRay's RayJob and RayCluster controllers, backed by one real Ray head.

    `dashboard_address` ("host:port") is the real Ray dashboard that every
    simulated cluster stands for. In "direct" mode `status.dashboardURL` is that
    address; in "service" mode it is the in-cluster name
    `<cluster>-head-svc.<ns>.svc.cluster.local:8265`, and a port-forward to a
    head pod's port 8265 reaches the real dashboard. `ready_delay` is how long
    a cluster waits before its pods exist and it turns ready.
    """

    name = "kuberay"

    def __init__(
        self,
        server: Any,
        *,
        dashboard_address: str,
        dashboard_url_mode: str = "direct",
        ready_delay: float = 0.0,
        interval: float = 0.05,
    ) -> None:
        if dashboard_url_mode not in ("direct", "service"):
            raise ValueError(f"dashboard_url_mode must be 'direct' or 'service', not {dashboard_url_mode!r}")
        super().__init__(server, interval=interval)
        self._dashboard_address = dashboard_address
        self._dashboard = _DashboardClient(dashboard_address)
        self._url_mode = dashboard_url_mode
        self._ready_delay = ready_delay
        self._first_seen: dict[str, float] = {}  # RayCluster uid -> monotonic time
        self._ray_jobs: dict[str, str] = {}  # RayJob uid -> Ray job id it is running

    def _register(self) -> None:
        # Set on every start: another FakeKubeRay on the same server may have taken it over meanwhile.
        self._server.set_port_forward_target(self._port_forward_target)

    def _port_forward_target(self, namespace: str, pod_name: str, port: int) -> tuple[str, int]:
        if int(port) != DASHBOARD_PORT:
            raise ConnectionRefusedError(
                f"only the dashboard port {DASHBOARD_PORT} of a Ray head is simulated, not {port}"
            )
        host, _, dash_port = self._dashboard_address.rpartition(":")
        return host, int(dash_port)

    def dashboard_url(self, cluster: Mapping[str, Any]) -> str:
        if self._url_mode == "direct":
            return self._dashboard_address
        namespace = cluster["metadata"]["namespace"]
        return f"{head_service_name(cluster)}.{namespace}.svc.{CLUSTER_DOMAIN}:{DASHBOARD_PORT}"

    # ---- reconcile ------------------------------------------------------
    def _reconcile(self) -> None:
        clusters = self._api.list(RAY_GROUP, RAY_VERSION, "rayclusters")
        live = {c["metadata"]["uid"] for c in clusters}
        for uid in list(self._first_seen):
            if uid not in live:
                del self._first_seen[uid]
        self._each(clusters, self._reconcile_cluster, "raycluster")
        by_key = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c
            for c in self._api.list(RAY_GROUP, RAY_VERSION, "rayclusters")
        }
        rayjobs = self._api.list(RAY_GROUP, RAY_VERSION, "rayjobs")
        self._each(rayjobs, lambda job: self._reconcile_rayjob(job, by_key), "rayjob")
        # A deleted RayJob takes its cluster (and so its Ray job) with it; KubeRay's finalizer stops the job.
        live_jobs = {job["metadata"]["uid"] for job in rayjobs}
        for uid in [uid for uid in self._ray_jobs if uid not in live_jobs]:
            self._stop_ray_job(self._ray_jobs.pop(uid))

    # RayCluster -----------------------------------------------------------
    def _reconcile_cluster(self, cluster: Obj) -> None:
        meta = cluster["metadata"]
        if meta.get("deletionTimestamp"):
            return
        namespace, name = meta["namespace"], meta["name"]
        self._first_seen.setdefault(meta["uid"], time.monotonic())
        pods = self._api.list_pods(namespace, f"ray.io/cluster={name}")
        status = copy.deepcopy(cluster.get("status") or {})
        conds = status.get("conditions") or []
        if (cluster.get("spec") or {}).get("suspend"):
            if pods:
                for pod in pods:
                    self._api.delete_pod(namespace, pod["metadata"]["name"])
                conds = set_condition(conds, "RayClusterSuspending", True, "RayClusterSuspending", "")
            else:
                conds = set_condition(conds, "RayClusterSuspending", False, "RayClusterSuspended", "")
                conds = set_condition(conds, "RayClusterSuspended", True, "RayClusterSuspended", "")
                conds = set_condition(conds, "HeadPodReady", False, "HeadPodNotFound", "Head Pod not found")
                status.update(state="suspended", readyWorkerReplicas=0, availableWorkerReplicas=0, head={})
            status["conditions"] = conds
            self._write_cluster_status(cluster, status)
            return
        if find_condition(cluster, "RayClusterSuspended"):
            conds = set_condition(conds, "RayClusterSuspended", False, "RayClusterSuspended", "")
        if time.monotonic() - self._first_seen[meta["uid"]] < self._ready_delay:
            conds = set_condition(conds, "HeadPodReady", False, "HeadPodNotFound", "Head Pod not found")
            conds = set_condition(
                conds,
                "RayClusterProvisioned",
                False,
                "RayClusterPodsProvisioning",
                "RayCluster Pods are being provisioned for first time",
            )
            status["conditions"] = conds
            status.pop("state", None)
            self._write_cluster_status(cluster, status)
            return
        head_pod = self._ensure_pods(cluster, pods)
        service = self._ensure_head_service(cluster)
        spec = cluster.get("spec") or {}
        desired = sum(
            int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1) or 1) for g in spec.get("workerGroupSpecs") or []
        )
        totals: dict[str, Decimal] = {}
        templates = [((spec.get("headGroupSpec") or {}).get("template") or {}, 1)] + [
            (g.get("template") or {}, int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1) or 1))
            for g in spec.get("workerGroupSpecs") or []
        ]
        for template, count in templates:
            for resource, amount in pod_requests(template.get("spec") or {}).items():
                totals[resource] = totals.get(resource, Decimal(0)) + amount * count
        conds = set_condition(conds, "HeadPodReady", True, "HeadPodRunningAndReady", "")
        conds = set_condition(
            conds,
            "RayClusterProvisioned",
            True,
            "AllPodRunningAndReadyFirstTime",
            "All Ray Pods are ready for the first time",
        )
        transitions = dict(status.get("stateTransitionTimes") or {})
        if status.get("state") != "ready":
            transitions["ready"] = now_rfc3339()
        status.update(
            state="ready",
            conditions=conds,
            head={
                "podIP": "127.0.0.1",
                "podName": head_pod,
                "serviceName": head_service_name(cluster),
                "serviceIP": (service.get("spec") or {}).get("clusterIP") or "",
            },
            endpoints={port_name: str(port) for port_name, port in HEAD_SERVICE_PORTS},
            desiredWorkerReplicas=desired,
            readyWorkerReplicas=desired,
            availableWorkerReplicas=desired,
            minWorkerReplicas=sum(int(g.get("minReplicas", 0)) for g in spec.get("workerGroupSpecs") or []),
            maxWorkerReplicas=sum(int(g.get("maxReplicas", 2**31 - 1)) for g in spec.get("workerGroupSpecs") or []),
            desiredCPU=format_quantity(totals.get("cpu", Decimal(0))),
            desiredMemory=format_quantity(totals.get("memory", Decimal(0))),
            desiredGPU=format_quantity(sum((totals.get(r, Decimal(0)) for r in GPU_RESOURCES), Decimal(0))),
            desiredTPU=format_quantity(totals.get("google.com/tpu", Decimal(0))),
            stateTransitionTimes=transitions,
        )
        if meta.get("generation") is not None:
            status["observedGeneration"] = meta["generation"]
        self._write_cluster_status(cluster, status)

    def _write_cluster_status(self, cluster: Obj, status: Obj) -> None:
        if status != (cluster.get("status") or {}):
            status["lastUpdateTime"] = now_rfc3339()
            self._api.patch_status(RAY_GROUP, RAY_VERSION, "rayclusters", cluster, status)

    def _ensure_pods(self, cluster: Obj, pods: list[Obj]) -> str:
        """Create the missing head and worker pods (Running, Ready); return the head pod's name."""
        spec = cluster.get("spec") or {}
        name = cluster["metadata"]["name"]
        existing: dict[str, list[str]] = {}
        for pod in pods:
            group = (pod["metadata"].get("labels") or {}).get("ray.io/group", "")
            existing.setdefault(group, []).append(pod["metadata"]["name"])
        heads = existing.get("headgroup") or [
            self._create_pod(
                cluster,
                (spec.get("headGroupSpec") or {}).get("template") or {},
                "head",
                "headgroup",
                f"{name}-head-{random_suffix()}",
            )
        ]
        for group in spec.get("workerGroupSpecs") or []:
            wanted = int(group.get("replicas", 0)) * int(group.get("numOfHosts", 1) or 1)
            for _ in range(wanted - len(existing.get(group["groupName"], []))):
                pod_name = f"{name}-{group['groupName']}-worker-{random_suffix()}"
                self._create_pod(cluster, group.get("template") or {}, "worker", group["groupName"], pod_name)
        return heads[0]

    def _create_pod(self, cluster: Obj, template: Obj, node_type: str, group: str, pod_name: str) -> str:
        template_meta = template.get("metadata") or {}
        labels = {
            **(template_meta.get("labels") or {}),
            **_ray_node_labels(cluster["metadata"]["name"], node_type, group),
        }
        pod_meta: Obj = {
            "name": pod_name,
            "namespace": cluster["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(cluster)],
        }
        if template_meta.get("annotations"):
            pod_meta["annotations"] = dict(template_meta["annotations"])
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_meta,
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        created = self._api.create_pod(pod)
        now = now_rfc3339()
        containers = (created.get("spec") or {}).get("containers") or []
        self._api.patch_pod_status(
            pod_meta["namespace"],
            pod_name,
            {
                "phase": "Running",
                "podIP": "127.0.0.1",
                "podIPs": [{"ip": "127.0.0.1"}],
                "hostIP": "127.0.0.1",
                "startTime": now,
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
                "containerStatuses": [
                    {
                        "name": c.get("name", "ray"),
                        "image": c.get("image", ""),
                        "imageID": "",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                    }
                    for c in containers
                ],
            },
        )
        return pod_name

    def _ensure_head_service(self, cluster: Obj) -> Obj:
        namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
        service_name = head_service_name(cluster)
        existing = self._api.get_service(namespace, service_name)
        if existing is not None:
            return existing
        return self._api.create_service(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": service_name,
                    "namespace": namespace,
                    "labels": _ray_node_labels(name, "head", "headgroup"),
                    "ownerReferences": [owner_reference(cluster)],
                },
                "spec": {
                    "type": "ClusterIP",
                    "selector": {"ray.io/cluster": name, "ray.io/node-type": "head"},
                    "ports": [
                        {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
                        for port_name, port in HEAD_SERVICE_PORTS
                    ],
                },
            }
        )

    # RayJob ---------------------------------------------------------------
    def _reconcile_rayjob(self, job: Obj, clusters: dict[tuple[str, str], Obj]) -> None:
        meta = job["metadata"]
        if meta.get("deletionTimestamp") or (job.get("spec") or {}).get("managedBy") not in (
            None,
            "ray.io/kuberay-operator",
        ):
            return
        old = job.get("status") or {}
        status = copy.deepcopy(old)
        spec = job.get("spec") or {}
        error = validate_rayjob(job)
        if error:
            status.update(jobDeploymentStatus="ValidationFailed", reason="ValidationFailed", message=error)
            self._write_rayjob_status(job, old, status)
            return
        deployment = status.get("jobDeploymentStatus", "")
        namespace = meta["namespace"]
        cluster_name = status.get("rayClusterName", "")
        cluster = clusters.get((namespace, cluster_name)) if cluster_name else None

        if deployment == "":
            interactive = spec.get("submissionMode") == "InteractiveMode"
            if not status.get("jobId") and not interactive:
                status["jobId"] = spec.get("jobId") or f"{meta['name']}-{random_suffix()}"
            status.setdefault("rayClusterName", f"{meta['name']}-{random_suffix()}")
            status.setdefault("jobStatus", "")
            status["jobDeploymentStatus"] = "Initializing"
            status["startTime"] = now_rfc3339()
        elif deployment == "Initializing":
            if spec.get("suspend"):
                status["jobDeploymentStatus"] = "Suspending"
            elif not self._deadline_exceeded(spec, status):
                cluster = cluster or self._create_cluster_for(job, status["rayClusterName"])
                if not status.get("dashboardURL"):
                    if (cluster.get("status") or {}).get("state") != "ready":
                        status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
                        self._write_rayjob_status(job, old, status)
                        return
                    status["dashboardURL"] = self.dashboard_url(cluster)
                if spec.get("submissionMode") == "InteractiveMode":
                    status["jobDeploymentStatus"] = "Waiting"
                else:
                    status["jobDeploymentStatus"] = "Running"
        elif deployment == "Waiting":
            if not spec.get("jobId"):
                self._deadline_exceeded(spec, status)
            else:
                status["jobId"] = spec["jobId"]
                status["jobDeploymentStatus"] = "Running"
        elif deployment == "Running":
            if spec.get("suspend"):
                status["jobDeploymentStatus"] = "Suspending"
            elif not self._deadline_exceeded(spec, status):
                cluster = cluster or self._create_cluster_for(job, status["rayClusterName"])
                self._ensure_rayjob_service(job, cluster)
                self._ray_jobs[meta["uid"]] = status["jobId"]
                if not self._poll_ray_job(job, cluster, status):
                    return
        elif deployment in ("Suspending", "Retrying"):
            if cluster is not None:
                if status.get("jobId"):
                    self._stop_ray_job(status["jobId"])  # the cluster takes the job with it
                self._ray_jobs.pop(meta["uid"], None)
                self._api.delete(RAY_GROUP, RAY_VERSION, "rayclusters", cluster_name, namespace)
                return
            for key in (
                "rayClusterStatus",
                "rayClusterName",
                "dashboardURL",
                "jobId",
                "message",
                "reason",
                "rayJobInfo",
            ):
                status.pop(key, None)
            status["jobStatus"] = ""
            status["jobDeploymentStatus"] = "Suspended" if deployment == "Suspending" else ""
        elif deployment == "Suspended":
            if spec.get("suspend"):
                return
            status.update(jobStatus="", jobDeploymentStatus="")
        elif deployment in ("Complete", "Failed"):
            self._ray_jobs.pop(meta["uid"], None)
            if spec.get("shutdownAfterJobFinishes") and cluster is not None and not spec.get("clusterSelector"):
                ttl = int(spec.get("ttlSecondsAfterFinished") or 0)
                if _seconds_since(status.get("endTime")) >= ttl:
                    self._api.delete(RAY_GROUP, RAY_VERSION, "rayclusters", cluster_name, namespace)
            return
        else:
            return  # ValidationFailed and unknown states stay as they are
        self._count_attempts(spec, status)
        self._write_rayjob_status(job, old, status)

    def _deadline_exceeded(self, spec: Obj, status: Obj) -> bool:
        """activeDeadlineSeconds (any pre-terminal state) and preRunningDeadlineSeconds (before Running)."""
        elapsed = _seconds_since(status.get("startTime"))
        active = spec.get("activeDeadlineSeconds")
        if active is not None and elapsed >= int(active):
            status.update(
                jobDeploymentStatus="Failed",
                reason="DeadlineExceeded",
                message=(
                    f"The RayJob has passed the activeDeadlineSeconds. "
                    f"StartTime: {status.get('startTime')}. ActiveDeadlineSeconds: {active}"
                ),
            )
            return True
        pre_running = spec.get("preRunningDeadlineSeconds")
        if (
            pre_running  # zero disables it
            and status.get("jobDeploymentStatus") in ("Initializing", "Waiting")
            and elapsed >= int(pre_running)
        ):
            status.update(
                jobDeploymentStatus="Failed",
                reason="PreRunningDeadlineExceeded",
                message=(
                    f"The RayJob has passed the preRunningDeadlineSeconds. "
                    f"StartTime: {status.get('startTime')}. PreRunningDeadlineSeconds: {pre_running}"
                ),
            )
            return True
        return False

    def _poll_ray_job(self, job: Obj, cluster: Obj, status: Obj) -> bool:
        """Mirror the Ray job's status from the dashboard; False when there is nothing to update."""
        job_id = status.get("jobId", "")
        try:
            info = self._dashboard.job_info(job_id)
            if info is None:
                if (job.get("spec") or {}).get("submissionMode") in (None, "HTTPMode", "K8sJobMode"):
                    self._dashboard.submit(job_id, job.get("spec") or {})
                return False  # InteractiveMode: the user has not submitted yet
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self._note_error(f"dashboard {self._dashboard_address} for job {job_id}: {exc!r}")
            return False
        ray_status = info.get("status", "")
        deployment = "Running"
        reason = ""
        if ray_status in ("SUCCEEDED", "STOPPED", "FAILED"):
            deployment = "Failed" if ray_status == "FAILED" else "Complete"
            reason = "AppFailed" if ray_status == "FAILED" else ""
        status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
        status.update(jobStatus=ray_status, jobDeploymentStatus=deployment, message=info.get("message") or "")
        if reason:
            status["reason"] = reason
        else:
            status.pop("reason", None)
        info_times = {}
        for key, field_name in (("start_time", "startTime"), ("end_time", "endTime")):
            if info.get(key):
                info_times[field_name] = datetime.fromtimestamp(int(info[key]) / 1000, timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                )
        if info_times:
            status["rayJobInfo"] = info_times
        return True

    def _stop_ray_job(self, job_id: str) -> None:
        try:
            self._dashboard.stop(job_id)
        except (urllib.error.URLError, OSError) as exc:
            self._note_error(f"stopping Ray job {job_id}: {exc!r}")

    @staticmethod
    def _count_attempts(spec: Obj, status: Obj) -> None:
        """checkBackoffLimitAndUpdateStatusIfNeeded: counters, and Retrying while the backoff allows."""
        failed = int(status.get("failed") or 0) + int(status.get("jobDeploymentStatus") == "Failed")
        succeeded = int(status.get("succeeded") or 0) + int(
            status.get("jobDeploymentStatus") == "Complete" and status.get("jobStatus") == "SUCCEEDED"
        )
        status.update(failed=failed, succeeded=succeeded)
        backoff = spec.get("backoffLimit")
        if (
            status.get("jobDeploymentStatus") == "Failed"
            and backoff is not None
            and failed < int(backoff) + 1
            and status.get("reason") != "DeadlineExceeded"
        ):
            status["jobDeploymentStatus"] = "Retrying"

    def _write_rayjob_status(self, job: Obj, old: Obj, status: Obj) -> None:
        """updateRayJobStatus: write only when jobStatus or jobDeploymentStatus changed."""
        if (old.get("jobStatus"), old.get("jobDeploymentStatus")) == (
            status.get("jobStatus"),
            status.get("jobDeploymentStatus"),
        ):
            return
        if status.get("jobDeploymentStatus") in ("Complete", "Failed"):
            status["endTime"] = now_rfc3339()
        self._api.patch_status(RAY_GROUP, RAY_VERSION, "rayjobs", job, status)

    def _create_cluster_for(self, job: Obj, cluster_name: str) -> Obj:
        meta = job["metadata"]
        labels = dict(meta.get("labels") or {})
        labels.update({"ray.io/originated-from-cr-name": meta["name"], "ray.io/originated-from-crd": "RayJob"})
        cluster_meta: Obj = {
            "name": cluster_name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(job)],
        }
        if meta.get("annotations"):
            cluster_meta["annotations"] = dict(meta["annotations"])
        cluster = {
            "apiVersion": RAY_API,
            "kind": "RayCluster",
            "metadata": cluster_meta,
            "spec": copy.deepcopy((job.get("spec") or {}).get("rayClusterSpec") or {}),
        }
        try:
            return self._api.create(RAY_GROUP, RAY_VERSION, "rayclusters", cluster)
        except ApiException as exc:
            if exc.status != 409:
                raise
            existing = self._api.get(RAY_GROUP, RAY_VERSION, "rayclusters", cluster_name, meta["namespace"])
            if existing is None:
                raise
            return existing

    def _ensure_rayjob_service(self, job: Obj, cluster: Obj) -> None:
        """reconcileServices: `<rayjob>-head-svc`, selecting the current cluster's head."""
        namespace = job["metadata"]["namespace"]
        service_name = f"{job['metadata']['name']}-head-svc"
        selector = {"ray.io/cluster": cluster["metadata"]["name"], "ray.io/node-type": "head"}
        existing = self._api.get_service(namespace, service_name)
        if existing is None:
            self._api.create_service(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {
                        "name": service_name,
                        "namespace": namespace,
                        "ownerReferences": [owner_reference(job)],
                    },
                    "spec": {
                        "type": "ClusterIP",
                        "selector": selector,
                        "ports": [
                            {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
                            for port_name, port in HEAD_SERVICE_PORTS
                        ],
                    },
                }
            )
        elif (existing.get("spec") or {}).get("selector") != selector:
            self._api.patch_service(namespace, service_name, {"spec": {"selector": selector}})
