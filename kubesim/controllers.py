"""Where tests import the simulated Kueue and KubeRay controllers from.

Why this module exists: the simulated controllers live in `sim_kueue.py`
(FakeKueue), `sim_kuberay.py` (FakeKubeRay) and `sim_common.py` (what both
share); their docstrings say what each simulates and what it deliberately
leaves out. This module keeps the names the tests import, so that a test does
not need to know which of the three a name lives in.

What it deliberately does not do: define or change anything. It only
re-exports, including `_pending_summary`, the old name of
`sim_kueue.pending_summary`.
"""

from __future__ import annotations

from kubesim.sim_common import (
    condition_is_true,
    find_condition,
    format_quantity,
    merge_patch_for,
    parse_quantity,
    pod_requests,
)
from kubesim.sim_kuberay import FakeKubeRay, validate_rayjob
from kubesim.sim_kueue import (
    FakeKueue,
    assign_flavors,
    kueue_create_errors,
    pending_summary,
    ray_podsets,
    workload_name,
)

_pending_summary = pending_summary  # the name tests used before the split

__all__ = [
    "FakeKubeRay",
    "FakeKueue",
    "assign_flavors",
    "condition_is_true",
    "find_condition",
    "format_quantity",
    "kueue_create_errors",
    "merge_patch_for",
    "parse_quantity",
    "pending_summary",
    "pod_requests",
    "ray_podsets",
    "validate_rayjob",
    "workload_name",
]
