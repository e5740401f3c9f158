"""A command's time budget: one point in time every call of the command is measured against.

`submit --timeout 5` must end within about five seconds whatever the servers
do, so every network call before the job runs takes as its own timeout the
smaller of its usual bound (`--request-timeout`) and the time left. This value
object holds that point in time (on the monotonic clock) and the budget it
came from, for messages.

It does not sleep, retry or raise: the adapters decide what to do when the
time is spent (`raybridge.kube.client`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

#: The shortest timeout a call is given once the budget is nearly spent: a call that
#: answers at once (a poll after the deadline) still gets its answer, a silent server
#: costs at most this much more.
MIN_CALL_SECONDS = 0.5


@dataclass(frozen=True)
class Deadline:
    """`at` on the `clock` (the caller's: time.monotonic in the commands, a fake one in tests); `seconds` the
    budget it was made from."""

    at: float
    seconds: float
    clock: Callable[[], float]

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float]) -> "Deadline":
        return cls(clock() + seconds, seconds, clock)

    def left(self) -> float:
        """Seconds left; never negative."""
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        return self.clock() >= self.at

    def bound(self, timeout: float) -> float:
        """The timeout one call gets: `timeout`, cut to the time left (not below MIN_CALL_SECONDS)."""
        return min(timeout, max(self.left(), MIN_CALL_SECONDS))

    def cuts(self, timeout: float) -> bool:
        """True when the time left, not `timeout`, bounds the next call."""
        return self.left() < timeout

    def allows(self, wait: float) -> bool:
        """True when there is time to wait `wait` seconds and still make a call."""
        return self.left() > wait
