"""The Ray Job API adapter (named so it cannot be mistaken for the `ray` package).

Only re-exports, lazily (`ray_import.py` alone does not load the client): the client is
`raybridge.jobapi.client.RayJobs`.
"""

from raybridge.core.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "TERMINAL": ".client",
    "RayJobs": ".client",
})
