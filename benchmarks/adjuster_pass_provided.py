"""One `adjuster run` pass with many placeholders already on their nodes: this tree against a git ref, side by side.

A pass credits each placeholder that got its node with the waiting pods its node's room holds, and asks
for the demand of those pods: with hundreds of such placeholders and a thousand nodes, how often the pass
reads the nodes decides its time. The same seeded state (`--nodes` 8-GPU nodes, `--placeholders`
provided placeholders, two waiting half-GPU pods each) is decided by `reconcile` in a fresh process of
this working tree and in one of `--ref` (a temporary `git worktree`), best of `--repeat`, and the ratio
is printed. Both must decide the same (what each keeps, creates and deletes is compared).

    python benchmarks/adjuster_pass_provided.py [--ref HEAD~1] [--nodes 1000] [--placeholders 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Run in the tree under test (its own raybridge on sys.path): decide the state, print the best time and the outcome.
PASS = r"""
import json, sys, time
from datetime import datetime, timedelta, timezone
sys.path.insert(0, sys.argv[1])
from raybridge.adjuster.decision.demand import ConstraintGroup
from raybridge.adjuster.decision.placeholders import PROVIDED, ExistingPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from raybridge.adjuster.decision.settings import AdjusterSettings

nodes_count, placeholders, repeat = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
now = datetime(2026, 1, 1, tzinfo=timezone.utc)
node = lambda i: {"metadata": {"name": f"n{i}", "labels": {"nvidia.com/gpu.memory": "81559"}},
                  "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1500Gi", "pods": "110"},
                             "allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1500Gi", "pods": "110"},
                             "conditions": [{"type": "Ready", "status": "True"}]}}
waited = (now - timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
pod = lambda name: {"metadata": {"name": name, "namespace": "team", "annotations": {"gpu-fraction": "0.5"}},
                    "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "x"}]},
                    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                                  "reason": "Unschedulable", "lastTransitionTime": waited}]}}
nodes = [node(i) for i in range(nodes_count)]
group = ConstraintGroup("nvidia").id
pods, existing = [], []
for i in range(placeholders):
    names = [f"p{i}-{j}" for j in range(2)]
    pods += [pod(n) for n in names]
    existing.append(ExistingPlaceholder(f"ph{i}", group, 1, PROVIDED, tuple(f"team/{n}" for n in names),
                                        now - timedelta(seconds=10), f"n{i % nodes_count}"))
best = float("inf")
for _ in range(repeat):
    start = time.perf_counter()
    result = reconcile(pods, nodes, existing, AdjusterSettings(), now, provision_timeout_seconds=600, name_prefix="x")
    best = min(best, time.perf_counter() - start)
print(json.dumps({"seconds": best, "keep": sorted(result.keep), "create": len(result.create), "delete": sorted(result.delete)}))
"""


def run(tree: Path, args: argparse.Namespace) -> dict:
    out = subprocess.run([sys.executable, "-c", PASS, str(tree), str(args.nodes), str(args.placeholders), str(args.repeat)],
                         capture_output=True, text=True, timeout=1800, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="HEAD~1", help="the git ref to compare with (default HEAD~1)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--placeholders", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        worktree = Path(tmp) / "ref"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.ref],
                       check=True, capture_output=True, timeout=120)
        try:
            before = run(worktree, args)
            after = run(ROOT, args)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], capture_output=True, timeout=120)
    same = {k: before[k] for k in ("keep", "create", "delete")} == {k: after[k] for k in ("keep", "create", "delete")}
    print(f"| {args.nodes} nodes, {args.placeholders} placeholders on their nodes | {args.ref}: {before['seconds']:.3f} s "
          f"| this tree: {after['seconds']:.3f} s | {before['seconds'] / after['seconds']:.1f}x | same decision: {same} |")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
