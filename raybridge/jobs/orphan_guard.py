"""`OrphanGuard`: renews a RayJob's orphan bound while raybridge runs, so that the RayJob dies soon after it does.

The decision (which deadline, why it frees the quota on every KubeRay and
Kueue release) is `jobs/decision/protection.py`; this is its I/O: a daemon thread
that reads the RayJob every renewal interval and writes
`spec.activeDeadlineSeconds` when the right value changed, with the read's
resourceVersion as a precondition, so a deadline computed from a
`status.startTime` that has just been replaced (an eviction, a readmission)
is never written. It measures time with the monotonic clock from the moment
it first sees a `startTime`, so a skewed local clock cannot fire a deadline
early.

After the first write, which raises what the API says (`start`), it never
raises: a failed renewal is retried at the next interval, and the bound
leaves room for several in a row (`renew_interval`); the first failure and
the recovery are said once through `progress`. It does not
decide when to stop: the backend stops it when the job ended, was deleted
or was handed over.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from raybridge.jobs.decision.protection import renew_interval, renewed_deadline
from raybridge.errors import RaybridgeError
from raybridge.kube.rayapi import RayObjects


class OrphanGuard:
    def __init__(
        self,
        rays: RayObjects,
        name: str,
        namespace: str,
        bound: int,
        max_run_seconds: Optional[int],
        queued: bool,
        progress: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rays, self.name, self.namespace = rays, name, namespace
        self.bound, self.max_run_seconds, self.queued = bound, max_run_seconds, queued
        self.progress = progress
        self.clock = clock
        self.interval = renew_interval(bound)
        self._start_seen: tuple[str, float] = ("", 0.0)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failing = False
        self.renewals = 0

    def start(self) -> "OrphanGuard":
        """Write the bound once now, in the caller's thread, then renew it in the background.

        The first write raises what the API says (a missing `patch` right is an error before the
        job runs, not a job that fails half an hour later because its bound was never renewed).
        """
        obj = self.rays.get("RayJob", self.name, self.namespace)
        if obj is not None:
            self.rays.patch("RayJob", self.name, self.namespace, {"spec": {"activeDeadlineSeconds": self.deadline_for(obj)}})
        self._thread = threading.Thread(target=self._run, name=f"orphan-guard-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop renewing (idempotent); returns once no renewal is in flight, or after a bounded wait."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.interval + 5.0)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.renew_once()

    def deadline_for(self, obj: dict) -> int:
        """The deadline the RayJob should carry now, from its state and when its start was first seen."""
        status = obj.get("status") or {}
        start = str(status.get("startTime") or "")
        if start and start != self._start_seen[0]:
            self._start_seen = (start, self.clock())
        since = self.clock() - self._start_seen[1] if start else None
        return renewed_deadline(str(status.get("jobDeploymentStatus") or ""), since, self.bound, self.max_run_seconds, self.queued)

    def renew_once(self) -> Optional[int]:
        """Read, compute, write if changed; the deadline written, or None (unchanged, ended, or failed)."""
        try:
            obj = self.rays.get("RayJob", self.name, self.namespace)
            if obj is None:
                self._stop.set()  # deleted: nothing left to guard
                return None
            if (obj.get("status") or {}).get("jobDeploymentStatus") in ("Complete", "Failed"):
                return None
            wanted = self.deadline_for(obj)
            if (obj.get("spec") or {}).get("activeDeadlineSeconds") == wanted:
                self._recovered()
                return None
            version = (obj.get("metadata") or {}).get("resourceVersion")
            self.rays.patch(
                "RayJob", self.name, self.namespace,
                {"metadata": {"resourceVersion": version}, "spec": {"activeDeadlineSeconds": wanted}},
            )  # fmt: skip
            self.renewals += 1
            self._recovered()
            return wanted
        except RaybridgeError as exc:  # a conflict, an API hiccup: the next interval tries again
            if "cannot be fulfilled" not in str(exc).lower() and not self._failing:  # 409: the object changed meanwhile
                self._failing = True
                self.progress(f"warning: could not renew the orphan bound of RayJob {self.namespace}/{self.name}: {exc}")
            return None

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            self.progress(f"the orphan bound of RayJob {self.namespace}/{self.name} is renewed again")
