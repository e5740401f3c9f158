"""`OrphanGuard`: renews a RayJob's orphan bound while raybridge runs, so that the RayJob dies soon after it does.

The decision (which fields, which values, why they free the quota on every
KubeRay and Kueue release) is `jobs/decision/orphan_guard.py` (`Renewal`); this
is its I/O: a daemon thread that reads the RayJob every renewal interval and
writes what changed, with the read's resourceVersion as a precondition, so a
deadline computed from a `status.startTime` that has just been replaced (an
eviction, a readmission) is never written.

Time since the start is measured twice, the larger wins
(`seconds_since_start`): on a local clock that runs on while the machine
sleeps (CLOCK_BOOTTIME on Linux, CLOCK_MONOTONIC on macOS; `time.monotonic`
stops during sleep, and every lid-close would shorten every later deadline)
from the moment the start was first seen, and by the API server's clock (the
read's `Date`) against the start the operator wrote. A skewed local wall
clock plays no part.

After the first write, which raises what the API says (`start`), it never
raises: a failed renewal is retried sooner (every RETRY_SECONDS) until one
gets through, and the first failure says when the RayJob will fail if none
does (a Kueue webhook that is down refuses every RayJob update); the
recovery is said once too. It does not decide when to stop: the backend
stops it when the job ended, was deleted or was handed over.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional

from raybridge.errors import BadInput, RaybridgeError
from raybridge.jobs.decision.orphan_guard import Renewal, renew_interval, renewed_deadline, seconds_since_start, unknown_fields
from raybridge.kube.rayapi import RayObjects
from raybridge.kuberay.rayjob import ray_state

#: How soon a failed renewal is tried again (the regular interval is a sixth of the bound, at most a minute).
RETRY_SECONDS = 5.0
#: How long after a deadline runs out the guard looks (and looks again while KubeRay has not failed the RayJob yet:
#: it checks at each reconcile of Running, at least every RayJobDefaultRequeueDuration, 3 s).
DEADLINE_LOOK_SECONDS = 2.0
#: The reasons KubeRay gives a RayJob it failed at a deadline (rayv1.DeadlineExceeded, PreRunningDeadlineExceeded).


def awake_or_asleep_clock() -> float:
    """Seconds on a clock that also counts the time the machine slept: CLOCK_BOOTTIME (Linux), CLOCK_MONOTONIC
    (macOS, where it runs on in sleep), else `time.monotonic`."""
    if sys.platform.startswith("linux") and hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    if sys.platform == "darwin" and hasattr(time, "CLOCK_MONOTONIC"):
        return time.clock_gettime(time.CLOCK_MONOTONIC)
    return time.monotonic()


class OrphanGuard:
    def __init__(
        self,
        rays: RayObjects,
        name: str,
        namespace: str,
        renewal: Renewal,
        progress: Callable[[str], None],
        clock: Callable[[], float] = awake_or_asleep_clock,
        on_deadline: Optional[Callable[[dict], None]] = None,
    ) -> None:
        self.rays, self.name, self.namespace = rays, name, namespace
        self.renewal = renewal
        self.progress = progress
        self.clock = clock
        self.interval = renew_interval(renewal.bound)
        self._start_seen: tuple[str, float] = ("", 0.0)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failing_since: Optional[float] = None
        self._expires: Optional[float] = None  # (clock) when the last written deadline runs out, if known
        self.renewals = 0
        self.last_error = ""
        #: Called once, from the guard's thread, with the RayJob KubeRay failed at a deadline (the run-time limit
        #: or the bound itself): the job's watcher ends the Ray job then, rather than when its cluster goes.
        self.on_deadline = on_deadline

    @property
    def bound(self) -> int:
        return self.renewal.bound

    def start(self) -> "OrphanGuard":
        """Write the bound once now, in the caller's thread, then renew it in the background.

        The first write raises what the API says (a missing `patch` right is an error before the
        job runs, not a job that fails half an hour later because its bound was never renewed).
        """
        obj, server_now = self.rays.get_dated("RayJob", self.name, self.namespace)
        if obj is not None:
            r, deployment = self.renewal, ray_state(obj).deployment
            seconds = renewed_deadline(deployment, self._since(obj, server_now), r.bound, r.max_run_seconds, r.kueue_limits_run)
            self.rays.patch("RayJob", self.name, self.namespace, {"spec": {"activeDeadlineSeconds": seconds}})
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
        while not self._stop.wait(self.next_wait()):
            self.renew_once()

    def next_wait(self) -> float:
        """Seconds to the next look: the interval, RETRY_SECONDS while renewals fail or no start has been seen,
        and no later than just after the deadline in force runs out (a run-time limit shorter than the
        interval), so its end is seen at once."""
        if self._failing_since is not None:
            return min(RETRY_SECONDS, self.interval)
        if self._expires is not None:
            return min(self.interval, max(DEADLINE_LOOK_SECONDS, self._expires - self.clock() + DEADLINE_LOOK_SECONDS))
        return min(self.interval, RETRY_SECONDS)  # no start seen yet: KubeRay sets it within seconds

    def _since(self, obj: dict, server_now: Optional[float]) -> Optional[float]:
        """How long ago the RayJob's current start was (a lower bound on KubeRay's measure), or None."""
        start = str((obj.get("status") or {}).get("startTime") or "")
        if start and start != self._start_seen[0]:
            self._start_seen = (start, self.clock())
        seen_for = self.clock() - self._start_seen[1] if start else None
        return seconds_since_start(start, seen_for, server_now)

    def renew_once(self) -> Optional[dict]:
        """Read, compute, write what changed; the fields written, or None (nothing to change, ended, or failed)."""
        try:
            obj, server_now = self.rays.get_dated("RayJob", self.name, self.namespace)
            if obj is None:
                self._stop.set()  # deleted: nothing left to guard
                return None
            state = ray_state(obj)
            if state.ended:
                if state.at_deadline and self.on_deadline is not None:
                    on_deadline, self.on_deadline = self.on_deadline, None
                    on_deadline(obj)
                return None
            since = self._since(obj, server_now)
            self._note_expiry((obj.get("spec") or {}).get("activeDeadlineSeconds"), since)
            wanted = self.renewal.fields(obj, since)
            if not wanted:
                self._recovered()
                return None
            self._write(obj, wanted)
            self._note_expiry(wanted.get("activeDeadlineSeconds"), since)
            self.renewals += 1
            self._recovered()
            return wanted
        except RaybridgeError as exc:  # a conflict, an API hiccup, a webhook down: tried again soon
            self._failed(exc)
            return None

    def _write(self, obj: dict, wanted: dict) -> None:
        version = (obj.get("metadata") or {}).get("resourceVersion")
        patch = {"metadata": {"resourceVersion": version}, "spec": wanted}
        try:
            self.rays.patch("RayJob", self.name, self.namespace, patch, field_validation="Strict" if "jobId" in wanted else None)
        except BadInput as exc:
            if "preRunningDeadlineSeconds" not in " ".join(unknown_fields(str(exc))):
                raise
            # An operator of v1.6 or later beside an older CRD (Helm never upgrades CRDs): no such field to set.
            self.renewal = Renewal(**{**self.renewal.__dict__, "pre_running": False})
            self.progress(
                f"note: the RayJob CRD of this cluster has no preRunningDeadlineSeconds (older than its KubeRay operator): "
                f"RayJob {self.namespace}/{self.name} keeps its job id, and an eviction after raybridge exits is bounded "
                "by the job's age plus the orphan bound"
            )
            return

    def _note_expiry(self, deadline: object, since: Optional[float]) -> None:
        """Remember when the deadline in force runs out, to say so if renewals start failing."""
        if isinstance(deadline, int) and not isinstance(deadline, bool) and since is not None:
            self._expires = self.clock() + deadline - since

    def _failed(self, exc: RaybridgeError) -> None:
        text = str(exc)
        self.last_error = text
        if "cannot be fulfilled" in text.lower():  # 409: the object changed meanwhile; the next read is newer
            return
        if self._failing_since is None:
            self._failing_since = self.clock()
            left = f"; the RayJob fails in about {_span(self._expires - self.clock())} unless a renewal gets through" if self._expires else ""
            self.progress(
                f"warning: could not renew the orphan bound of RayJob {self.namespace}/{self.name}: {text}{left} "
                f"(trying every {RETRY_SECONDS:.0f}s)"
            )

    def failing_for(self) -> Optional[float]:
        """Seconds since renewals started failing (None while they get through)."""
        return None if self._failing_since is None else self.clock() - self._failing_since

    def _recovered(self) -> None:
        if self._failing_since is not None:
            self._failing_since = None
            self.progress(f"the orphan bound of RayJob {self.namespace}/{self.name} is renewed again")


def _span(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
