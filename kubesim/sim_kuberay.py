"""The simulated KubeRay: RayCluster and RayJob controllers, each cluster with its own Ray dashboard.

Why this module exists: raybridge watches what KubeRay does with its RayJobs
(cluster readiness, the dashboard URL, job status). `FakeKubeRay` plays the
operator against `kubesim/server.py` through the official client (the
polling loop and API access are in `sim_common.py`): it creates pods and
services, drives the RayJob state machine and submits to and polls the Ray
Job API. Every RayCluster gets its own `ClusterDashboard` (its own loopback
port) in front of the one real Ray head of the test: it knows only the jobs
submitted through it, answers 404 for any other, and when the cluster is
deleted or suspended it stops listening and its jobs are stopped, so a
cluster built after an eviction knows nothing of the old job, as on a real
cluster. `status.dashboardURL` and the port-forward target of the head pod
(`set_port_forward_target`) lead to that cluster's dashboard. It plays no
release: it behaves as KubeRay v1.6 and later do (the served v1.6.1 and the
newest CRDs'), with token auth (`authOptions.mode: token`, a Secret named after
the cluster or `authOptions.secretName`, key `auth_token`, 401/403 from the
dashboard as Ray answers) and `preRunningDeadlineSeconds`; what differs per
release is tested on the real operators (tests/e2e/test_release_matrix.py) and,
for the releases the Go module proxy does not serve, as unit tests of
raybridge's rules (docs/testing.md). The RayJob finalizer `ray.io/rayjob-finalizer` is added first
and removed on deletion after stopping a job that may still run;
`ValidationFailed` (ValidateRayJobSpec, including ValidateRayClusterSpec's
checks a rendered manifest could hit) is a failure that creates nothing; an
invalid standalone RayCluster is left alone. Transitions, reasons and messages
follow the Go sources (`rayjob_controller.go`, `utils/validation.go`).

What it deliberately does not do:

- No real pods or processes: all Ray pods report `podIP` 127.0.0.1 and all
  jobs run on one real Ray head. Job ids are shared there: a submission id
  that an earlier cluster used is run under another id on the real head
  (the cluster still answers to the id it was given, but Ray's JSON answers
  carry the other). The dashboard needs `Content-Length` (no chunked
  uploads), serves one request per connection, and `stop()` of the operator
  takes the dashboards down (a restart opens them on new ports; their jobs
  are remembered). No events (an invalid RayCluster gets no
  InvalidRayClusterSpec event).
- No autoscaling, no submitter Kubernetes Job (K8sJobMode is submitted over
  HTTP like HTTPMode), no RayService, no deletionStrategy, no cron
  schedules, no `enableK8sTokenAuth`, no GCS fault tolerance. Like the real
  operator it ignores `suspend` while a RayJob is `Waiting` for its job id.
- Hooks and handlers stay registered after `stop()` (the server cannot
  unregister them); stopping only ends reconciliation.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
import secrets
import select
import socket
import threading
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping, Optional

import yaml
from kubernetes.client.exceptions import ApiException

from kubesim.sim_common import (
    RAY_API,
    RAY_GROUP,
    RAY_VERSION,
    Obj,
    PollingController,
    find_condition,
    format_quantity,
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


#: The release whose behaviour "kuberay-newest" plays (its CRDs are v1.6.1's, kubesim/schemas.py MODULE_RELEASES;
#: every version check here is `>= (1, 6, 0)`, where the two agree).
NEWEST_KUBERAY = (1, 7, 0)
RAYJOB_FINALIZER = "ray.io/rayjob-finalizer"  # utils/constant.go RayJobStopJobFinalizer
AUTH_TOKEN_KEY = "auth_token"  # utils/constant.go RAY_AUTH_TOKEN_SECRET_KEY
MIN_RAY_FOR_TOKEN_AUTH = (2, 52, 0)


def check_name(name: str) -> str:
    """kuberay@v1.5.2 ray-operator/controllers/ray/utils/util.go CheckName: the last 50 characters; a leading
    digit or punctuation becomes 'r'."""
    if len(name) > 50:
        name = name[len(name) - 50 :]
    if name and (name[0].isdigit() or unicodedata.category(name[0]).startswith("P")):
        name = "r" + name[1:]
    return name


def _ray_version(text: str) -> Optional[tuple[int, ...]]:
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def token_auth_enabled(cluster_spec: Mapping[str, Any]) -> bool:
    """IsAuthEnabled: `authOptions.mode: token` (KubeRay v1.5.1 and later)."""
    return ((cluster_spec.get("authOptions") or {}).get("mode")) == "token"


def _group_checks(group_name: str, group: Mapping[str, Any]) -> Optional[str]:
    params = group.get("rayStartParams") or {}
    if any(params.get(key) for key in ("num-cpus", "num-gpus", "memory", "resources")) and group.get("resources"):
        return (
            f"resource fields should not be set in both rayStartParams and Resources for {group_name} group; "
            "please use only one"
        )
    if "labels" in params:
        return (
            f"rayStartParams['labels'] is not supported for {group_name} group; "
            "please use the top-level Labels field instead"
        )
    return None


def validate_raycluster_spec(spec: Mapping[str, Any], annotations: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The checks of KubeRay's ValidateRayClusterSpec a rendered manifest could hit; the error text or None."""
    head = spec.get("headGroupSpec") or {}
    head_containers = ((head.get("template") or {}).get("spec") or {}).get("containers") or []
    if not head_containers:
        return "headGroupSpec should have at least one container"
    error = _group_checks("Head", head)
    if error:
        return error
    for group in spec.get("workerGroupSpecs") or []:
        if not ((group.get("template") or {}).get("spec") or {}).get("containers"):
            return "workerGroupSpec should have at least one container"
        error = _group_checks(group.get("groupName", ""), group)
        if error:
            return error
    env = {e.get("name"): e.get("value") for e in head_containers[0].get("env") or []}
    fault_tolerant = bool(spec.get("gcsFaultToleranceOptions")) or (annotations or {}).get(
        "ray.io/ft-enabled", ""
    ).lower() == "true"
    if not fault_tolerant and "RAY_REDIS_ADDRESS" in env:
        return (
            "RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions "
            "is not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance"
        )
    if not spec.get("enableInTreeAutoscaling") and env.get("RAY_enable_autoscaler_v2") in ("1", "true"):
        return (
            f"environment variable RAY_enable_autoscaler_v2 cannot be set to '{env['RAY_enable_autoscaler_v2']}' "
            "when enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use autoscaler v2"
        )
    if token_auth_enabled(spec):
        wanted = ".".join(str(part) for part in MIN_RAY_FOR_TOKEN_AUTH)
        if not spec.get("rayVersion"):
            return f"authOptions.mode is 'token' but RayVersion was not specified. Ray version {wanted} or later is required"
        version = _ray_version(spec["rayVersion"])
        if version is None:
            return f"authOptions.mode is 'token' but RayVersion format is invalid: {spec['rayVersion']}"
        if version < MIN_RAY_FOR_TOKEN_AUTH:
            return f"authOptions.mode is 'token' but minimum Ray version is {wanted}, got {spec['rayVersion']}"
    return None


def validate_rayjob(job: Mapping[str, Any]) -> Optional[str]:
    """The subset of KubeRay's ValidateRayJobSpec that raybridge can trip over; the error text or None."""
    spec = job.get("spec") or {}
    # kuberay@v1.5.2 rayjob_controller.go validateRayJob: ValidateRayJobMetadata (name <= MaxRayJobNameLength,
    # 53 - 6 = 47) runs before the spec checks.
    name = (job.get("metadata") or {}).get("name") or ""
    if len(name) > 47:
        return "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"
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
    if spec.get("rayClusterSpec"):
        error = validate_raycluster_spec(spec["rayClusterSpec"], (job.get("metadata") or {}).get("annotations"))
        if error:
            return f"The RayJob spec is invalid: {error}"
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


def _seconds_between(timestamp: Optional[str], now: datetime) -> float:
    if not timestamp:
        return 0.0
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return (now - then).total_seconds()


# --------------------------------------------------------------------------
# KubeRay
# --------------------------------------------------------------------------


class _DashboardClient:
    """The few Ray Job API calls the RayJob controller makes (plain urllib)."""

    def __init__(self, address: str, token: Optional[str] = None) -> None:
        self.base = f"http://{address}"
        # KubeRay's dashboard client sends the token in Ray's proxy header (utils RayAuthHeader).
        self.headers = {"x-ray-authorization": f"Bearer {token}"} if token else {}

    def job_info(self, job_id: str) -> Optional[Obj]:
        """The job's JobDetails, or None when the dashboard does not know the job (404)."""
        url = f"{self.base}/api/jobs/{urllib.parse.quote(job_id, safe='')}"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=self.headers), timeout=3) as response:
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
            headers={"Content-Type": "application/json", **self.headers},
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


# --------------------------------------------------------------------------
# One Ray dashboard per RayCluster
# --------------------------------------------------------------------------

#: Paths a token-protected Ray dashboard serves without a token (Ray 2.60 dashboard/http_server_head.py).
PUBLIC_DASHBOARD_PATHS = frozenset(
    {
        "/",
        "/favicon.ico",
        "/api/authentication_mode",
        "/api/authenticate",
        "/api/healthz",
        "/api/gcs_healthz",
        "/api/local_raylet_healthz",
        "/-/healthz",
    }
)
_JOB_PATH = re.compile(r"^/api/jobs/([^/]+)(/.*)?$")
_HEAD_LIMIT = 64 * 1024
_BODY_LIMIT = 512 * 1024 * 1024  # Ray accepts working_dir packages up to 100 MiB; generous
_SOCKET_TIMEOUT = 30.0
_CONNECT_TIMEOUT = 5.0


def _http_response(status: int, reason: str, text: str) -> bytes:
    body = text.encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


class ClusterDashboard:
    """The Ray dashboard of one simulated RayCluster: its own port, its own Ray jobs.

    Every simulated cluster runs its jobs on the one real Ray head of the test.
    This proxy gives each cluster a separate Job API on its own loopback port:
    it remembers the submission ids submitted through it, answers 404 (Ray's
    `Job <id> does not exist`) for any other job, filters job lists to its own,
    and passes everything else (dashboard, package uploads, the log-tail
    WebSocket) through unchanged. With a token it refuses calls without one
    (401) or with a wrong one (403), as Ray's dashboard does with
    `RAY_AUTH_MODE=token`. `close()` stops listening, cuts open connections
    and stops its jobs on the real head: the cluster died with them.
    """

    def __init__(self, upstream: str, token: Optional[str] = None, jobs: Optional[dict[str, str]] = None) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host or "127.0.0.1", int(port))
        self.token = token
        # submission id as this cluster knows it -> the id on the shared real head. They differ only when
        # an id is submitted again that another (earlier) cluster used: a new real cluster accepts that.
        self.jobs: dict[str, str] = jobs if jobs is not None else {}
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.5)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name=f"ray-dashboard-{self.port}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def owns(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self.jobs

    def upstream_id(self, job_id: str) -> str:
        with self._lock:
            return self.jobs.get(job_id, job_id)

    def close(self, *, stop_jobs: bool) -> None:
        """Stop listening and cut every connection; with stop_jobs, stop this cluster's Ray jobs."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._listener.close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
            jobs = sorted(self.jobs.values())
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self._thread.join(timeout=2)
        if stop_jobs:
            upstream = _DashboardClient(f"{self._upstream[0]}:{self._upstream[1]}")
            for job_id in jobs:
                try:
                    upstream.stop(job_id)
                except (urllib.error.URLError, OSError, ValueError):
                    pass

    # ---- serving ----------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(_SOCKET_TIMEOUT)
            with self._lock:
                if self._closed.is_set():
                    conn.close()
                    return
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        upstream: Optional[socket.socket] = None
        try:
            request = self._read_request(conn)
            if request is None:
                return
            method, target, headers, body, head_lines = request
            parts = urllib.parse.urlsplit(target)
            path = parts.path
            refusal = self._refusal(method, path, headers)
            if refusal is not None:
                conn.sendall(refusal)
                return
            match = _JOB_PATH.match(path)
            if match:
                upstream_path = "/api/jobs/" + urllib.parse.quote(self.upstream_id(urllib.parse.unquote(match.group(1))), safe="")
                upstream_path += match.group(2) or ""
                head_lines[0] = " ".join([method, urllib.parse.urlunsplit(("", "", upstream_path, parts.query, "")), head_lines[0].rsplit(" ", 1)[1]])
            listing = method == "GET" and path.rstrip("/") == "/api/jobs"
            if method == "POST" and path.rstrip("/") == "/api/jobs":
                body = self._claim_submission(body)
            upgrade = "upgrade" in headers.get("connection", "").lower()
            upstream = socket.create_connection(self._upstream, timeout=_CONNECT_TIMEOUT)
            upstream.settimeout(_SOCKET_TIMEOUT)
            with self._lock:
                self._connections.add(upstream)
            upstream.sendall(self._forward_head(head_lines, body, listing=listing, upgrade=upgrade) + body)
            if listing:
                conn.sendall(self._filtered_listing(upstream))
            else:
                self._splice(conn, upstream)
        except (OSError, ValueError):
            pass  # the client went away, the upstream failed, or close() cut the connection
        finally:
            for sock in (conn, upstream):
                if sock is not None:
                    with self._lock:
                        self._connections.discard(sock)
                    sock.close()

    @staticmethod
    def _read_request(conn: socket.socket) -> Optional[tuple[str, str, dict[str, str], bytes, list[str]]]:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
            if len(data) > _HEAD_LIMIT:
                conn.sendall(_http_response(431, "Request Header Fields Too Large", "request head too large"))
                return None
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            conn.sendall(_http_response(411, "Length Required", "the simulated dashboard needs Content-Length"))
            return None
        length = int(headers.get("content-length") or 0)
        if length > _BODY_LIMIT:
            conn.sendall(_http_response(413, "Request Entity Too Large", "body too large"))
            return None
        body = rest
        while len(body) < length:
            chunk = conn.recv(min(1 << 20, length - len(body)))
            if not chunk:
                return None
            body += chunk
        return method, target, headers, body[:length], lines

    def _refusal(self, method: str, path: str, headers: Mapping[str, str]) -> Optional[bytes]:
        """Ray's answer when the token is missing or wrong, or 404 for another cluster's job."""
        if self.token is not None and path not in PUBLIC_DASHBOARD_PATHS and not path.startswith("/static/"):
            given = headers.get("authorization") or headers.get("x-ray-authorization") or ""
            if not given:
                return _http_response(401, "Unauthorized", "Unauthorized: Missing authentication token")
            if given != f"Bearer {self.token}":
                return _http_response(403, "Forbidden", "Forbidden: Invalid authentication token")
        match = _JOB_PATH.match(path)
        if match:
            job_id = urllib.parse.unquote(match.group(1))
            if not self.owns(job_id):
                return _http_response(404, "Not Found", f"Job {job_id} does not exist")
        return None

    def _claim_submission(self, body: bytes) -> bytes:
        """Record the submission id of a new job (choosing one as Ray would, if the request has none)."""
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return body  # Ray answers the bad request itself
        if not isinstance(request, dict):
            return body
        job_id = str(request.get("submission_id") or request.get("job_id") or "")
        if not job_id:
            job_id = f"raysubmit_{random_suffix(16)}"
        upstream_id = job_id
        if not self.owns(job_id) and self._known_upstream(job_id):
            upstream_id = f"{job_id}-{random_suffix(8)}"  # an earlier cluster's job: this cluster never saw it
        request["submission_id"] = upstream_id
        if request.get("job_id"):
            request["job_id"] = upstream_id
        with self._lock:
            self.jobs.setdefault(job_id, upstream_id)
        return json.dumps(request).encode()

    def _known_upstream(self, job_id: str) -> bool:
        url = f"http://{self._upstream[0]}:{self._upstream[1]}/api/jobs/{urllib.parse.quote(job_id, safe='')}"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    @staticmethod
    def _forward_head(lines: list[str], body: bytes, *, listing: bool, upgrade: bool) -> bytes:
        method, target, version = lines[0].split(" ", 2)
        # One request per connection (so that every request passes the checks above); a listing is
        # asked as HTTP/1.0 so that the answer comes whole, not chunked.
        out = [f"{method} {target} {'HTTP/1.0' if listing else version}"]
        for line in lines[1:]:
            key = line.partition(":")[0].strip().lower()
            if key in ("content-length", "keep-alive") or (key == "connection" and not upgrade):
                continue
            out.append(line)
        if not upgrade:
            out.append("Connection: close")
        if body or method in ("POST", "PUT", "PATCH"):
            out.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")

    def _filtered_listing(self, upstream: socket.socket) -> bytes:
        data = b""
        while True:
            chunk = upstream.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        try:
            jobs = json.loads(body)
        except ValueError:
            return data
        if not isinstance(jobs, list):
            return data
        with self._lock:
            local = {upstream: mine for mine, upstream in self.jobs.items()}
        mine = []
        for job in jobs:
            upstream_id = str(job.get("submission_id") or "") if isinstance(job, dict) else ""
            if upstream_id in local:
                mine.append({**job, "submission_id": local[upstream_id]})
        text = json.dumps(mine).encode()
        return (
            f"HTTP/1.1 {status_line.split(' ', 1)[1]}\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n"
        ).encode() + text

    def _splice(self, conn: socket.socket, upstream: socket.socket) -> None:
        """Copy bytes both ways until the upstream closes (or the proxy does)."""
        conn.settimeout(None)
        upstream.settimeout(None)
        peers = {conn: upstream, upstream: conn}
        client_open = True
        while not self._closed.is_set():
            watch = [upstream, conn] if client_open else [upstream]
            readable, _, _ = select.select(watch, [], [], 0.5)
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    if sock is upstream:
                        return
                    client_open = False
                    try:
                        upstream.shutdown(socket.SHUT_WR)
                    except OSError:
                        return
                    continue
                peers[sock].sendall(data)


class FakeKubeRay(PollingController):
    """KubeRay's RayJob and RayCluster controllers, backed by one real Ray head.

    `dashboard_address` ("host:port") is the real Ray dashboard behind every
    simulated cluster; each cluster gets its own `ClusterDashboard` in front of
    it once its head is ready, so a cluster sees only its own Ray jobs and a
    deleted cluster's jobs are gone. In "direct" mode `status.dashboardURL` is
    that cluster's dashboard; in "service" mode it is the in-cluster name
    `<cluster>-head-svc.<ns>.svc.cluster.local:8265`, and a port-forward to a
    head pod's port 8265 reaches the cluster's dashboard. `ready_delay` is how
    long a cluster waits before its pods exist and it turns ready. It records
    itself as the newest CRDs' release (`NEWEST_KUBERAY`).
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
        self._dashboards: dict[str, ClusterDashboard] = {}  # RayCluster uid -> its dashboard
        self._dashboard_keys: dict[tuple[str, str], str] = {}  # (namespace, name) -> RayCluster uid
        self._dashboards_lock = threading.Lock()
        # RayCluster uid -> its Ray jobs; outlives a stop()/start() of the operator, as the clusters do.
        self._cluster_jobs: dict[str, dict[str, str]] = {}

    def start(self) -> "FakeKubeRay":
        """Start reconciling, with the operator recorded as its Helm chart's Deployment (no replicas), which is
        where a client reads the operator's release (helm-chart/kuberay-operator/templates/_helpers.tpl labels)."""
        version = "v" + ".".join(str(part) for part in NEWEST_KUBERAY)
        if self._server.get_object("apps/v1", "Deployment", "kuberay-operator", "kuberay-system") is None:
            if self._server.get_object("v1", "Namespace", "kuberay-system") is None:
                self._server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kuberay-system"}})
            selector = {"app.kubernetes.io/name": "kuberay-operator"}
            self._server.create_object({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "kuberay-operator", "namespace": "kuberay-system",
                             "labels": {**selector, "app.kubernetes.io/version": version}},
                "spec": {"replicas": 0, "selector": {"matchLabels": selector},
                         "template": {"metadata": {"labels": selector},
                                      "spec": {"containers": [{"name": "manager", "image": f"quay.io/kuberay/operator:{version}"}]}}},
            })  # fmt: skip
        super().start()
        return self

    def _now(self) -> datetime:
        return datetime.now(timezone.utc)

    def _now_rfc3339(self) -> str:
        return self._now().strftime("%Y-%m-%dT%H:%M:%SZ")

    def _seconds_since(self, timestamp: Optional[str]) -> float:
        return _seconds_between(timestamp, self._now())

    def cluster_dashboard(self, namespace: str, cluster_name: str) -> Optional[ClusterDashboard]:
        """The dashboard of a live, ready RayCluster, or None."""
        with self._dashboards_lock:
            uid = self._dashboard_keys.get((namespace, cluster_name))
            return self._dashboards.get(uid) if uid else None

    def stop(self) -> None:
        """Stop reconciling and take the clusters' dashboards down (their Ray jobs are left alone)."""
        super().stop()
        with self._dashboards_lock:
            dashboards, self._dashboards, self._dashboard_keys = list(self._dashboards.values()), {}, {}
        for dashboard in dashboards:
            dashboard.close(stop_jobs=False)

    def _drop_dashboard(self, uid: str) -> None:
        """The cluster is gone, suspended or being deleted: its dashboard and its Ray jobs go with it."""
        with self._dashboards_lock:
            dashboard = self._dashboards.pop(uid, None)
            self._dashboard_keys = {k: v for k, v in self._dashboard_keys.items() if v != uid}
            jobs = self._cluster_jobs.pop(uid, {})
        if dashboard is not None:
            dashboard.close(stop_jobs=True)
        else:
            for job_id in sorted(jobs.values()):  # gone while the operator was stopped
                self._stop_ray_job(job_id)

    def _ensure_dashboard(self, cluster: Obj) -> ClusterDashboard:
        meta = cluster["metadata"]
        token = self._ensure_auth_secret(cluster) if token_auth_enabled(cluster.get("spec") or {}) else None
        with self._dashboards_lock:
            dashboard = self._dashboards.get(meta["uid"])
            if dashboard is None:
                jobs = self._cluster_jobs.setdefault(meta["uid"], {})
                dashboard = ClusterDashboard(self._dashboard_address, token, jobs)
                self._dashboards[meta["uid"]] = dashboard
                self._dashboard_keys[(meta["namespace"], meta["name"])] = meta["uid"]
            return dashboard

    def _ensure_auth_secret(self, cluster: Obj) -> str:
        """reconcileAuthSecret: a Secret named after the cluster (or authOptions.secretName), key auth_token."""
        meta = cluster["metadata"]
        options = (cluster.get("spec") or {}).get("authOptions") or {}
        # kuberay@v1.5.2 raycluster_controller.go reconcileAuthSecret: utils.CheckName(instance.Name), which keeps
        # the last 50 characters; authOptions.secretName (a Secret the user made) exists from v1.6.0.
        own = options.get("secretName")
        name = own or check_name(meta["name"])
        try:
            existing = self._api.core.read_namespaced_secret(name, meta["namespace"], _request_timeout=5)
            data = (existing.data or {}).get(AUTH_TOKEN_KEY)
            if data:
                return base64.b64decode(data).decode()
        except ApiException as exc:
            if exc.status != 404:
                raise
        if own:
            raise RuntimeError(f"Secret {meta['namespace']}/{name} named by authOptions.secretName has no {AUTH_TOKEN_KEY}")
        token = secrets.token_urlsafe(32)
        self._api.core.create_namespaced_secret(
            meta["namespace"],
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner_reference(cluster)]},
                "data": {AUTH_TOKEN_KEY: base64.b64encode(token.encode()).decode()},
            },
            _request_timeout=5,
        )
        return token

    def _job_api(self, cluster: Optional[Obj]) -> Optional[_DashboardClient]:
        """KubeRay's dashboard client for this cluster (with its token), or None before it is ready."""
        if cluster is None:
            return None
        dashboard = self.cluster_dashboard(cluster["metadata"]["namespace"], cluster["metadata"]["name"])
        if dashboard is None or dashboard.closed:
            return None
        return _DashboardClient(dashboard.address, dashboard.token)

    def _register(self) -> None:
        # Set on every start: another FakeKubeRay on the same server may have taken it over meanwhile.
        self._server.set_port_forward_target(self._port_forward_target)

    def _port_forward_target(self, namespace: str, pod_name: str, port: int) -> tuple[str, int]:
        if int(port) != DASHBOARD_PORT:
            raise ConnectionRefusedError(
                f"only the dashboard port {DASHBOARD_PORT} of a Ray head is simulated, not {port}"
            )
        pod = self._server.get_object("v1", "Pod", pod_name, namespace) or {}
        labels = (pod.get("metadata") or {}).get("labels") or {}
        dashboard = self.cluster_dashboard(namespace, labels.get("ray.io/cluster", ""))
        if labels.get("ray.io/node-type") != "head" or dashboard is None or dashboard.closed:
            raise ConnectionRefusedError(f"pod {namespace}/{pod_name} serves no Ray dashboard")
        return "127.0.0.1", dashboard.port

    def dashboard_url(self, cluster: Mapping[str, Any]) -> str:
        if self._url_mode == "direct":
            dashboard = self.cluster_dashboard(cluster["metadata"]["namespace"], cluster["metadata"]["name"])
            if dashboard is None:
                raise RuntimeError(f"RayCluster {cluster['metadata']['name']} has no dashboard yet")
            return dashboard.address
        namespace = cluster["metadata"]["namespace"]
        return f"{head_service_name(cluster)}.{namespace}.svc.{CLUSTER_DOMAIN}:{DASHBOARD_PORT}"

    # ---- reconcile ------------------------------------------------------
    def _reconcile(self) -> None:
        clusters = self._api.list(RAY_GROUP, RAY_VERSION, "rayclusters")
        live = {c["metadata"]["uid"] for c in clusters}
        for uid in list(self._first_seen):
            if uid not in live:
                del self._first_seen[uid]
        with self._dashboards_lock:
            gone = [uid for uid in set(self._dashboards) | set(self._cluster_jobs) if uid not in live]
        for uid in gone:
            self._drop_dashboard(uid)
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
            self._drop_dashboard(meta["uid"])
            return
        if validate_raycluster_spec(cluster.get("spec") or {}, meta.get("annotations")):
            return  # KubeRay records an InvalidRayClusterSpec event and does nothing else
        namespace, name = meta["namespace"], meta["name"]
        self._first_seen.setdefault(meta["uid"], time.monotonic())
        pods = self._api.list_pods(namespace, f"ray.io/cluster={name}")
        status = copy.deepcopy(cluster.get("status") or {})
        conds = status.get("conditions") or []
        if (cluster.get("spec") or {}).get("suspend"):
            self._drop_dashboard(meta["uid"])  # the head pod, and its jobs, are deleted
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
        self._ensure_dashboard(cluster)
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
            transitions["ready"] = self._now_rfc3339()
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
            status["lastUpdateTime"] = self._now_rfc3339()
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
        now = self._now_rfc3339()
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
        if (job.get("spec") or {}).get("managedBy") not in (None, "ray.io/kuberay-operator"):
            return
        old = job.get("status") or {}
        status = copy.deepcopy(old)
        spec = job.get("spec") or {}
        namespace = meta["namespace"]
        cluster_name = status.get("rayClusterName", "")
        cluster = clusters.get((namespace, cluster_name)) if cluster_name else None
        if meta.get("deletionTimestamp"):
            self._finalize_rayjob(job, cluster)
            return
        error = validate_rayjob(job)
        if error:
            status.update(jobDeploymentStatus="ValidationFailed", reason="ValidationFailed", message=error)
            self._write_rayjob_status(job, old, status)
            return
        deployment = status.get("jobDeploymentStatus", "")

        if deployment == "":
            if RAYJOB_FINALIZER not in (meta.get("finalizers") or []):
                # case JobDeploymentStatusNew: the finalizer first, then the status (next pass).
                self._api.patch(
                    RAY_GROUP,
                    RAY_VERSION,
                    "rayjobs",
                    job,
                    {
                        "metadata": {
                            "finalizers": list(meta.get("finalizers") or []) + [RAYJOB_FINALIZER],
                            "resourceVersion": meta.get("resourceVersion"),
                        }
                    },
                )
                return
            interactive = spec.get("submissionMode") == "InteractiveMode"
            if not status.get("jobId") and not interactive:
                status["jobId"] = spec.get("jobId") or f"{meta['name']}-{random_suffix()}"
            status.setdefault("rayClusterName", f"{meta['name']}-{random_suffix()}")
            status.setdefault("jobStatus", "")
            status["jobDeploymentStatus"] = "Initializing"
            status["startTime"] = self._now_rfc3339()
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
            # kuberay@v1.3.2 and @v1.5.2 rayjob_controller.go, case JobDeploymentStatusWaiting: only spec.jobId
            # is looked at -- no suspend, no activeDeadlineSeconds. kuberay@v1.6.0 and @v1.7.0 add
            # checkPreRunningDeadlineAndUpdateStatusIfNeeded first, still no suspend and no activeDeadlineSeconds.
            if self._pre_running_deadline_exceeded(spec, status):
                pass
            elif spec.get("jobId"):
                status["jobId"] = spec["jobId"]
                status["jobDeploymentStatus"] = "Running"
            else:
                return
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
                job_api = self._job_api(cluster)
                if status.get("jobId") and job_api is not None:
                    try:
                        job_api.stop(status["jobId"])  # the cluster takes the job with it
                    except (urllib.error.URLError, OSError, ValueError) as exc:
                        self._note_error(f"stopping Ray job {status['jobId']}: {exc!r}")
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
                if self._seconds_since(status.get("endTime")) >= ttl:
                    self._api.delete(RAY_GROUP, RAY_VERSION, "rayclusters", cluster_name, namespace)
            return
        else:
            return  # ValidationFailed and unknown states stay as they are
        self._count_attempts(spec, status)
        self._write_rayjob_status(job, old, status)

    def _deadline_exceeded(self, spec: Obj, status: Obj) -> bool:
        """Initializing and Running: checkActiveDeadlineAndUpdateStatusIfNeeded, then (Initializing, v1.6 and
        later) checkPreRunningDeadlineAndUpdateStatusIfNeeded. kuberay@v1.3.2..v1.7.0 rayjob_controller.go: both
        measure from status.startTime, which initRayJobStatusIfNeed sets anew at every start (New), so after
        a suspension (a Kueue eviction) the clock starts again at readmission."""
        elapsed = self._seconds_since(status.get("startTime"))
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
        return status.get("jobDeploymentStatus") == "Initializing" and self._pre_running_deadline_exceeded(spec, status)

    def _pre_running_deadline_exceeded(self, spec: Obj, status: Obj) -> bool:
        """kuberay@v1.6.0 rayjob_controller.go checkPreRunningDeadlineAndUpdateStatusIfNeeded (the field exists from v1.6)."""
        pre_running = spec.get("preRunningDeadlineSeconds")
        if pre_running and self._seconds_since(status.get("startTime")) >= int(pre_running):
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
        job_api = self._job_api(cluster)
        if job_api is None:
            return False  # the cluster's head is not ready (again) yet
        try:
            info = job_api.job_info(job_id)
            if info is None:
                if (job.get("spec") or {}).get("submissionMode") in (None, "HTTPMode", "K8sJobMode"):
                    job_api.submit(job_id, job.get("spec") or {})
                # InteractiveMode: the user has not submitted yet -- or submitted to a cluster that is
                # gone (an eviction): this cluster never heard of the job, and KubeRay waits on.
                return False
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self._note_error(f"dashboard {job_api.base} for job {job_id}: {exc!r}")
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

    def _finalize_rayjob(self, job: Obj, cluster: Optional[Obj]) -> None:
        """A RayJob being deleted: stop a job that may still run, then remove the finalizer."""
        meta = job["metadata"]
        if RAYJOB_FINALIZER not in (meta.get("finalizers") or []):
            return
        status = job.get("status") or {}
        if status.get("jobStatus") not in ("SUCCEEDED", "FAILED", "STOPPED") and status.get("jobId"):
            job_api = self._job_api(cluster)
            if job_api is not None:
                try:
                    job_api.stop(status["jobId"])
                except (urllib.error.URLError, OSError, ValueError) as exc:
                    self._note_error(f"stopping Ray job {status['jobId']}: {exc!r}")  # removed anyway, as KubeRay
        self._ray_jobs.pop(meta["uid"], None)
        remaining = [f for f in meta.get("finalizers") or [] if f != RAYJOB_FINALIZER]
        self._api.patch(
            RAY_GROUP,
            RAY_VERSION,
            "rayjobs",
            job,
            {"metadata": {"finalizers": remaining or None, "resourceVersion": meta.get("resourceVersion")}},
        )

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
            status["endTime"] = self._now_rfc3339()
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
