"""The Ray Job API adapter (named so it cannot be mistaken for the `ray` package).

Only re-exports: the client is `raybridge.jobapi.client.RayJobs`.
"""

from raybridge.jobapi.client import TERMINAL, RayJobs

__all__ = ["TERMINAL", "RayJobs"]
