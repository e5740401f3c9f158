"""Bounded waits for tests: poll until something holds, or fail saying what was awaited and what was last seen.

Why this module exists: tests against a cluster (real or simulated) and a Ray head wait for controllers that act
on their own time; each wait needs a bound and a message that says what did not happen.
What it deliberately does not do: back off or retry failures (a probe that raises ends the wait at once).
"""

from __future__ import annotations

import time
from typing import Callable, Optional, TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], Optional[T]], timeout: float = 10.0, interval: float = 0.05, what: str = "condition"
) -> T:
    """Call `probe` until it returns something truthy; return that, or raise TimeoutError with the last value."""
    deadline = time.monotonic() + timeout
    last: Optional[T] = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)
