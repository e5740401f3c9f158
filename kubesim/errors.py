"""The one error the simulations raise and catch: a request the API server refused, with its HTTP status.

Why it exists: the simulated controllers (sim_gpu.py, sim_autoscaler.py) act on a real kube-apiserver through
real_api.py, and tell "changed or gone meanwhile" (404, 409: try again at the next step) from the rest by `code`,
without importing the kubernetes client's exception types.
What it deliberately does not do: build Status bodies or field errors; the real API server answers those.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ApiError(Exception):
    """A request the API server refused: its HTTP status, the Status reason and message."""

    code: int
    reason: str
    message: str

    def __post_init__(self) -> None:
        super().__init__(self.message)
