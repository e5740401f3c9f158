"""Where tests import the simulated Kueue controller and its decisions from.

Why this module exists: the simulated controller lives in `sim_kueue.py`
(FakeKueue) and `sim_common.py` (what kubesim's simulations share); their
docstrings say what each simulates and what it deliberately leaves out. This
module keeps the names the tests import, so that a test does not need to know
which of the two a name lives in. KubeRay is not simulated: the tests run the
real operator on the real test cluster (testcluster/).

What it deliberately does not do: define or change any controller. It only
re-exports them, including `_pending_summary`, the old name of
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
    "workload_name",
]
