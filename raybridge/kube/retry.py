"""The one retry policy: when a failed call is asked again, how long to wait first, and who does the asking.

Every retry in raybridge is built from `RetryPolicy`: the bounded API client
(`kube.client`), the adjuster's writes (`adjuster.scaler`), the informers'
list and watch loop (`kube.informer`), a launcher's wait riding out a failing
API server (`jobs.cluster_wait`), and the Ray Job API's submission
(`jobapi.client`). One call is retried at one level only: a caller with a
loop of its own makes its calls inside `calls_tried_once()`, and the client
then tries each of them once. A wait between tries ends at once when a stop
event is set (`pause`), so a controller told to stop never sits out a backoff.

What it does not do: make calls, or know which calls are safe to repeat (the
client retries reads and deletes; a caller that knows a write is safe, such
as a create with a deterministic name, retries it itself).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

from raybridge.core.deadline import Deadline

#: Statuses worth asking again: throttled, or the server (or a proxy before it) failed for now.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Methods the client repeats without asking: reads, and DELETE (a second delete of a deleted object is a 404).
RETRIED_METHODS = frozenset({"GET", "HEAD", "DELETE"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before asking again.

    With a `Deadline` (a command with `--timeout`), a transient answer (429,
    5xx) is retried while time is left; without one, at most `attempts` tries
    in all. A request that timed out is never repeated: `--request-timeout`
    was the user's bound for it (client-go does not repeat a timed-out read
    either). A server that cannot be reached at all (refused, reset,
    unresolvable) is retried only while it has been failing for less than the
    request timeout, deadline or not. So a stale kubeconfig or a silent
    server ends a command within `--request-timeout`, never after the whole
    `--timeout` of a job; long waits ride out hiccups one level up, where a
    few failed polls in a row are tolerated (and their calls are tried once).
    """

    attempts: int = 4
    first_backoff: float = 0.25
    max_backoff: float = 4.0
    #: Without a deadline, a Retry-After longer than this is not waited for.
    max_retry_after: float = 10.0

    def backoff(self, attempt: int) -> float:
        """The wait after failed try `attempt` (1, 2, ...): doubled each time, at most `max_backoff`."""
        return min(self.max_backoff, self.first_backoff * 2 ** max(0, attempt - 1))

    def wait_before_retry(
        self,
        attempt: int,
        failure: str,
        deadline: Optional[Deadline],
        retry_after: Optional[float] = None,
        unreachable_for: Optional[tuple[float, float]] = None,
    ) -> Optional[float]:
        """Seconds to wait before try `attempt + 1`, or None to give up. `failure`: status, connection or timeout.

        `unreachable_for`: (seconds the server has been unreachable in this call, the request timeout).
        """
        if failure == "timeout":
            return None
        wait = max(self.backoff(attempt), retry_after or 0.0)
        if failure == "connection" and unreachable_for is not None:
            failing, bound = unreachable_for
            if failing + wait > bound:
                return None
        if deadline is not None:
            return wait if deadline.allows(wait) else None
        if attempt >= self.attempts:
            return None
        if retry_after is not None and retry_after > self.max_retry_after:
            return None
        return wait


#: What a command's API calls get (kube.client.connect).
DEFAULT_RETRY_POLICY = RetryPolicy()


def retry_after_seconds(headers: Any) -> Optional[float]:
    """A Retry-After header in seconds (never negative); None when absent or an HTTP date (the backoff applies)."""
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def pause(seconds: float, stop: Sequence[threading.Event] = ()) -> bool:
    """Wait `seconds`, ending at once when any of `stop` is set; True when told to stop."""
    if len(stop) <= 1:
        return (stop[0] if stop else threading.Event()).wait(seconds)
    # Several events: wait on the first, looking at the others every few milliseconds.
    until = time.monotonic() + seconds
    while not any(event.is_set() for event in stop):
        left = until - time.monotonic()
        if left <= 0:
            return False
        stop[0].wait(min(0.02, left))
    return True


_tried_once = threading.local()


@contextmanager
def calls_tried_once() -> Iterator[None]:
    """Inside, API calls made by this thread are tried once by the client: the caller retries them itself."""
    before = getattr(_tried_once, "active", False)
    _tried_once.active = True
    try:
        yield
    finally:
        _tried_once.active = before


def client_retries() -> bool:
    """False inside `calls_tried_once()` (in this thread): the client must not repeat the call."""
    return not getattr(_tried_once, "active", False)
