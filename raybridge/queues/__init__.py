"""Queues: KAI's fair share on real inputs, and Kueue/KAI queue configs sized from the nodes.

Services the CLI (`raybridge queues ...`) and other commands call. This
`__init__` only re-exports, lazily (a module of `queues/decision/` imported
by another domain does not load the services): the fair-share service is in
`fairshare.py`, the config generator in `generate.py`.
"""

from raybridge.core.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "FairShareReport": ".fairshare",
    "GeneratedConfigs": ".generate",
    "cluster_fair_share": ".fairshare",
    "file_fair_share": ".fairshare",
    "generate_queue_configs": ".generate",
})
