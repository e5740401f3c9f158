"""Where tests import Kueue's flavor assignment and kubesim's quantity helpers from.

Why this module exists: Kueue's pod sets and flavor assignment live in `sim_kueue.py` and the quantity helpers in
`sim_common.py`; this module keeps the names the tests import (tests/unit/test_configs.py, kubesim/tests), so that a
test does not need to know which of the two a name lives in. Neither KubeRay nor Kueue is simulated: the tests run
the real operators on the real test cluster (testcluster/).

What it deliberately does not do: define anything. It only re-exports.
"""

from __future__ import annotations

from kubesim.sim_common import format_quantity, parse_quantity, pod_requests
from kubesim.sim_kueue import assign_flavors, ray_podsets

__all__ = ["assign_flavors", "format_quantity", "parse_quantity", "pod_requests", "ray_podsets"]
