"""Leader election on a coordination.k8s.io Lease, through the official `kubernetes.leaderelection` module.

`releasable_lease_lock` is the official `LeaseLock` plus `release`: on a clean
stop the holder clears the Lease's holderIdentity (client-go's
ReleaseOnCancel, which the Python module lacks), so a standby takes over at
its next retry instead of after a whole lease duration. `run_elections` runs
election rounds until stopped, handing each term to a callback with an event
that is set when the term ends. The election's own loop (a retry every
retry period until the renew deadline) is the one level that retries the
Lease's reads and writes: its calls run inside `calls_tried_once()`.

The official module logs every renewal at info; only the lines that change are let through
(`TransitionsOnly`): acquiring, losing, another holder.

What it does not do: decide what a leader does (the service's callback does),
or stop a term's work (the callback watches its event).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from raybridge.kube.informer import one_line_error
from raybridge.kube.retry import calls_tried_once

log = logging.getLogger(__name__)


def releasable_lease_lock(name: str, namespace: str, identity: str, api_client: Any, logger: logging.Logger = log) -> Any:
    """The official LeaseLock, plus `release(timeout)`: after it, this replica writes the Lease no more."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    class ReleasableLeaseLock(LeaseLock):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(name, namespace, identity)
            self.api_instance = client.CoordinationV1Api(api_client)
            self.released = False
            self.writing = threading.Lock()

        def create(self, name: str, namespace: str, election_record: Any) -> bool:
            with self.writing:
                return False if self.released else super().create(name, namespace, election_record)

        def update(self, name: str, namespace: str, updated_record: Any) -> bool:
            with self.writing:
                return False if self.released else super().update(name, namespace, updated_record)

        def release(self, timeout: float) -> bool:
            """Stop renewing; if the Lease is still ours, clear its holder (True when cleared).

            An empty holderIdentity is what client-go writes on release: a standby of either
            library takes it on its next retry instead of waiting for the lease to expire. The
            replace carries the resourceVersion read, so a Lease taken meanwhile is left alone."""
            with self.writing:
                self.released = True
                try:
                    lease = self.api_instance.read_namespaced_lease(self.name, self.namespace, _request_timeout=(timeout, timeout))
                    if lease.spec is None or lease.spec.holder_identity != self.identity:
                        return False
                    lease.spec.holder_identity = None
                    lease.spec.lease_duration_seconds = 1
                    lease.spec.renew_time = datetime.now(timezone.utc)
                    self.api_instance.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=(timeout, timeout))
                    return True
                except (ApiException, OSError) as exc:
                    logger.warning("could not release the Lease %s (%s): it expires in its own time", self.name, one_line_error(exc))
                    return False
                except Exception as exc:  # noqa: BLE001 - urllib3 errors and the like: never fail the shutdown
                    logger.warning("could not release the Lease %s (%s): it expires in its own time", self.name, one_line_error(exc))
                    return False

    return ReleasableLeaseLock()


#: The official module's logger (kubernetes/leaderelection/leaderelection.py `logging.getLogger("leaderelection")`).
ELECTION_LOGGER = "leaderelection"


class TransitionsOnly(logging.Filter):
    """Lets a logger's record through only when its text differs from the one before: the official module logs
    "leader X has successfully acquired lease" at info on every renewal (every retry period: about 43,000 lines a
    day per replica at 2 s) and a standby's "yet to finish lease_duration" as often; what changes is worth a line."""

    def __init__(self) -> None:
        super().__init__()
        self._last: Optional[str] = None
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        with self._lock:
            changed, self._last = text != self._last, text
        return changed


def quiet_renewals() -> None:
    """Install `TransitionsOnly` on the official module's logger, once per process."""
    logger = logging.getLogger(ELECTION_LOGGER)
    if not any(isinstance(f, TransitionsOnly) for f in logger.filters):
        logger.addFilter(TransitionsOnly())


def run_elections(
    lock: Any,
    *,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    lead: Callable[[threading.Event], None],
    stop: threading.Event,
    logger: logging.Logger = log,
) -> None:
    """Election rounds until `stop`: while this replica holds the Lease, `lead(term)` runs (in the module's
    thread) and `term` is set when the Lease is lost. The official module has no cancel: a round in progress
    ends with the process (run this in a daemon thread)."""
    from kubernetes.leaderelection import electionconfig, leaderelection

    quiet_renewals()
    with calls_tried_once():
        while not stop.is_set():
            term = threading.Event()

            def started(term: threading.Event = term) -> None:
                lead(term)

            def stopped(term: threading.Event = term) -> None:
                logger.warning("lost the Lease %s: standing by", lock.name)
                term.set()

            config = electionconfig.Config(lock, lease_duration, renew_deadline, retry_period, started, stopped)
            try:
                leaderelection.LeaderElection(config).run()
            except Exception as exc:  # noqa: BLE001 - an election round failed: try again
                logger.warning("leader election failed (%s): retrying", one_line_error(exc))
            term.set()
            stop.wait(retry_period)
