"""`adjuster plan` at growing sizes: the two steps that were quadratic, now n log n.

* `--policy kai` on N pending half-GPU pods (KAI's rule, one pass; was 174 s at 100,000 pods);
* the exact planner on N pods that each ask for a different fraction of a GPU (was 19 s at 20,000).

Each times the decision itself, `plan_placeholders` (what `adjuster plan` and `adjuster run` call),
in this process on pods already parsed, once per size, and prints the wall time and the time per
pod: about constant per pod when the cost is proportional. (The command line cannot take 100,000
pods: a file of more than 1,000,000 JSON values is refused, core/documents.py.) The tests check the
same by counting steps (tests/unit/test_adjuster_kai_scaling.py,
tests/unit/test_adjuster_packing_scaling.py); this shows the seconds.

    python benchmarks/adjuster_plan_growth.py [--sizes 10000 20000 40000 100000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NOW = "2025-06-01T12:00:00Z"


def _pods(n: int, distinct: bool) -> dict:
    items = []
    for i in range(n):
        fraction = f"{(i + 1) / (n + 1):.6f}" if distinct else "0.5"
        items.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i:06d}", "namespace": "work", "uid": f"u{i}", "annotations": {"gpu-fraction": fraction}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                           "lastTransitionTime": "2025-06-01T11:00:00Z"}]},
        })  # fmt: skip
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _time_plan(pods: list, policy: str) -> float:
    from datetime import datetime

    from raybridge.adjuster.decision.settings import AdjusterSettings
    from raybridge.adjuster.decision.plan import plan_placeholders

    now = datetime.fromisoformat(NOW.replace("Z", "+00:00"))
    settings = AdjusterSettings(node_gpus=8, policy=policy)
    started = time.perf_counter()
    plan_placeholders(pods, None, settings, now)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 20000, 40000, 100000])
    args = parser.parse_args()
    print(f"{'case':<34} {'pods':>7} {'seconds':>8} {'ms/pod':>7}")
    for case, distinct, policy in (("--policy kai, half-GPU pods", False, "kai"), ("exact, every fraction different", True, "exact")):
        for n in args.sizes:
            seconds = _time_plan(_pods(n, distinct)["items"], policy)
            print(f"{case:<34} {n:>7} {seconds:>8.2f} {1000 * seconds / n:>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
