"""Bounded waits for tests: poll until something holds, or fail saying what was awaited and what was last seen.

Why this module exists: tests against a cluster (real or simulated) and a Ray head wait for controllers that act
on their own time; each wait needs a bound and a message that says what did not happen. A simulated controller's
clock (`PausableClock`) lets a test stop its time instead of racing it.
What it deliberately does not do: back off or retry failures (a probe that raises ends the wait at once).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
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


class PausableClock:
    """The simulated autoscaler's clock (monotonic seconds): real time, except that a test can stop it, so that no
    node decided meanwhile comes whatever the machine's speed, and start it again where it stopped."""

    def __init__(self) -> None:
        self._behind = 0.0
        self._stopped_at: Optional[float] = None

    def __call__(self) -> float:
        return self._stopped_at if self._stopped_at is not None else time.monotonic() - self._behind

    def pause(self) -> None:
        self._stopped_at = self()

    def resume(self) -> None:
        assert self._stopped_at is not None
        self._behind = time.monotonic() - self._stopped_at
        self._stopped_at = None

    def jump(self, seconds: float) -> None:
        """Move it ahead at once: what was due within `seconds` is due now."""
        assert self._stopped_at is None
        self._behind -= seconds


class ShiftedClock:
    """A controller clock `ahead` seconds past real time; a test moves it on instead of waiting."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead

    def __call__(self) -> datetime:
        return datetime.now(timezone.utc) + timedelta(seconds=self.ahead)
