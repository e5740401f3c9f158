"""A stand-in for KubeRay's submitter pods on the test cluster: their own command, run on this machine.

In K8sJobMode KubeRay makes a Kubernetes Job whose one pod runs `ray job submit` against the Ray cluster's
dashboard and follows the job's logs until it ends (kuberay@v1.6.1 controllers/ray/common/job.go
BuildJobSubmitCommand); KubeRay counts the job finished only once that Job has (rayjob_controller.go
checkSubmitterAndUpdateStatusIfNeeded). On the test cluster kwok plays every pod: it marks the submitter's pod
Running and runs nothing (kubesim/FIDELITY.md), so a K8sJobMode RayJob would never be submitted.

While started, this watches every namespace for pods whose first container is KubeRay's `ray-job-submitter`
and that kwok reports Running, and for each runs the pod's own command (`/bin/bash -c... SCRIPT`) here, with
what only the pod would have swapped for this machine's: the dashboard address in the script (the head
Service's in-cluster name, which nothing here resolves) for the shared Ray head's, which every head pod stands
for (tests/conftest.py `ray_head`); each ConfigMap volume the container mounts written out to a temporary
directory, and its mount path in the script swapped for that directory; `ray` from this Python's
environment. When the command exits, the pod's status is written as the kubelet would write it
(Succeeded or Failed, the container terminated with its exit code), so the Job controller and then KubeRay
see the submitter finish. A pod deleted meanwhile (KubeRay deletes the submitter Job when Kueue evicts the
RayJob) has its command's process group killed, as the kubelet would kill the container.

What it deliberately does not do: run any other pod, pull images, or stand for a second Ray head (the jobs it
submits run on the session's one shared head: tests that need a new cluster to have never heard of a job end
that job themselves, as tests/e2e/test_kube_eviction.py does).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

#: KubeRay's submitter container (ray-operator/controllers/ray/utils/constant.go SubmitterContainerName).
SUBMITTER_CONTAINER = "ray-job-submitter"
#: The dashboard address KubeRay writes into the submitter's command: the head Service's in-cluster name.
_IN_CLUSTER_DASHBOARD = re.compile(r"http://[a-z0-9.-]+\.svc(?:\.cluster\.local)?:\d+")
POLL_SECONDS = 0.3


class SubmitterStandIn:
    """Runs every submitter pod's command here while started; `stop()` kills what still runs."""

    def __init__(self, client: Any, dashboard_url: str, namespaces: "set[str] | None" = None) -> None:
        self.client = client
        #: Only pods of these namespaces (None: every namespace).
        self.namespaces = namespaces
        self.dashboard_url = dashboard_url.rstrip("/")
        self._running: dict[str, tuple[subprocess.Popen[bytes], dict[str, Any], Path]] = {}
        self._done: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="submitter-stand-in", daemon=True)
        self.log = Path(tempfile.mkdtemp(prefix="submitters")) / "submitters.log"
        #: (pod namespace/name, exit code) of every command that ended, in order.
        self.finished: list[tuple[str, int]] = []

    def start(self) -> "SubmitterStandIn":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for key in list(self._running):
            self._kill(key)

    def __enter__(self) -> "SubmitterStandIn":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- the loop ---------------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                pods = self.client.list_objects("v1", "Pod", None, label_selector="batch.kubernetes.io/job-name")
            except Exception:  # noqa: BLE001 - the API server restarting: look again
                continue
            present = set()
            for pod in pods:
                if self.namespaces is not None and pod["metadata"]["namespace"] not in self.namespaces:
                    continue
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}/{pod['metadata'].get('uid')}"
                present.add(key)
                containers = (pod.get("spec") or {}).get("containers") or []
                if not containers or containers[0].get("name") != SUBMITTER_CONTAINER:
                    continue
                if pod["metadata"].get("deletionTimestamp"):
                    self._kill(key)
                    continue
                if key not in self._running and key not in self._done and (pod.get("status") or {}).get("phase") == "Running":
                    self._run(key, pod)
            for key in list(self._running):
                process, pod, _ = self._running[key]
                if key not in present:
                    self._kill(key)
                elif process.poll() is not None:
                    self._finish(key, pod, process.returncode)

    def _run(self, key: str, pod: dict[str, Any]) -> None:
        container = pod["spec"]["containers"][0]
        workdir = Path(tempfile.mkdtemp(prefix="submitter"))
        argv = [str(word) for word in (container.get("command") or []) + (container.get("args") or [])]
        mounts = self._volumes(pod, container, workdir)
        script = []
        for word in argv:
            word = _IN_CLUSTER_DASHBOARD.sub(self.dashboard_url, word)
            for mount_path, local in mounts.items():
                word = word.replace(mount_path, str(local))
            script.append(word)
        env = dict(os.environ)
        env.update(self._container_env(pod["metadata"]["namespace"], container))
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env.pop("RAY_ADDRESS", None)
        with open(self.log, "ab") as log:
            log.write(f"--- {key}: {' '.join(script)}\n".encode())
            process = subprocess.Popen(script, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(workdir),
                                       start_new_session=True)  # fmt: skip
        self._running[key] = (process, pod, workdir)

    def _container_env(self, namespace: str, container: dict[str, Any]) -> dict[str, str]:
        """The container's variables: values, and Secret keys (KubeRay gives the submitter a token cluster's token so)."""
        found: dict[str, str] = {}
        for entry in container.get("env") or []:
            if "value" in entry:
                found[entry["name"]] = str(entry["value"])
                continue
            ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                secret = self.client.get_object("v1", "Secret", ref["name"], namespace) or {}
                value = (secret.get("data") or {}).get(ref["key"])
                if value is not None:
                    found[entry["name"]] = base64.b64decode(value).decode()
        return found

    def _volumes(self, pod: dict[str, Any], container: dict[str, Any], workdir: Path) -> dict[str, Path]:
        """Each ConfigMap volume the container mounts, written under `workdir`: {mount path: local directory}."""
        volumes = {v["name"]: v for v in (pod["spec"].get("volumes") or [])}
        found: dict[str, Path] = {}
        for mount in container.get("volumeMounts") or []:
            source = (volumes.get(mount["name"]) or {}).get("configMap")
            if not source:
                continue
            config_map = self.client.get_object("v1", "ConfigMap", source["name"], pod["metadata"]["namespace"]) or {}
            local = workdir / mount["name"]
            local.mkdir(parents=True)
            for name, value in (config_map.get("data") or {}).items():
                (local / name).write_text(value)
            for name, value in (config_map.get("binaryData") or {}).items():
                (local / name).write_bytes(base64.b64decode(value))
            found[mount["mountPath"].rstrip("/")] = local
        return found

    def _finish(self, key: str, pod: dict[str, Any], code: int) -> None:
        """The pod's status as a kubelet writes it once its one container has exited."""
        _, _, workdir = self._running.pop(key)
        self._done.add(key)
        self.finished.append((key.rsplit("/", 1)[0], code))
        shutil.rmtree(workdir, ignore_errors=True)
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        for _ in range(5):
            current = self.client.get_object("v1", "Pod", name, namespace)
            if current is None:
                return
            status = current.get("status") or {}
            status["phase"] = "Succeeded" if code == 0 else "Failed"
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"] + [
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}]
            started = ((((status.get("containerStatuses") or [{}])[0]).get("state") or {}).get("running") or {}).get("startedAt", now)
            status["containerStatuses"] = [{
                "name": SUBMITTER_CONTAINER, "image": current["spec"]["containers"][0].get("image", ""), "imageID": "", "ready": False,
                "restartCount": 0, "started": False,
                "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": started, "finishedAt": now}},
            }]  # fmt: skip
            current["status"] = status
            try:
                self.client.update_status(current)
                return
            except Exception:  # noqa: BLE001 - a conflict with kwok's own write: read and write again
                time.sleep(0.2)

    def _kill(self, key: str) -> None:
        entry = self._running.pop(key, None)
        self._done.add(key)
        if entry is None:
            return
        process, _, workdir = entry
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

