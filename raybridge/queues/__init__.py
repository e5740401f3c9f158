"""Queues: KAI's fair share on real inputs, and Kueue/KAI queue configs sized from the nodes.

Services the CLI (`raybridge queues ...`) and other commands call. This
`__init__` only re-exports: the fair-share service is in `fairshare.py`, the
config generator in `generate.py`.
"""

from raybridge.queues.fairshare import FairShareReport, cluster_fair_share, file_fair_share
from raybridge.queues.generate import GeneratedConfigs, generate_queue_configs

__all__ = ["FairShareReport", "GeneratedConfigs", "cluster_fair_share", "file_fair_share", "generate_queue_configs"]
