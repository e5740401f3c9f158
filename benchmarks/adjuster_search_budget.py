"""What the exact packing's search budget costs and what it buys: a controller's first pass, and what it asks for.

A constraint group's pods are packed exactly (`adjuster/decision/packing.py`): bin completion for up to
`AdjusterSettings.search_budget` steps (200,000 by default), then branch and bound for a tenth of that. Most groups
end their searches long before; a few hard ones run the whole budget, and what they return depends on where it runs
out. Those searches are a third of a controller's first pass on a large shared cluster, so the budget is where a
faster first pass would come from, at the price of other decisions for the hard groups. This measures both sides of
that choice, so that it is made on numbers:

for each generated shared cluster (`adjuster_shared_cluster.py`: 10,000 pending pods over `--groups` constraint
sets, 2,000 nodes, each `--seeds`) and each budget of `--budgets`, one whole process per budget and run, the budgets
alternating, each doing one cold pass (the snapshot read and `decide`, as the group curve's pass: nothing packed
before in the process). It reports the pass's wall and CPU time (medians), the placeholders the pass creates and
their GPUs, how many placeholders differ from those of the first budget given (the default unless told), the GPUs
asked beyond or below it, and the groups whose packing stopped at the budget ("heuristic"). A budget of 0 is
first-fit-decreasing alone.

    python benchmarks/adjuster_search_budget.py [--groups 30 300 1239] [--seeds 1 2] [--budgets 200000 50000 20000 0] [--runs 3] [--json out.json]

It decides nothing by itself: the default stays what `settings.py` says.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from adjuster_plan_speed import NOW, child_environment  # noqa: E402
from adjuster_shared_cluster import make_cluster, write_cluster  # noqa: E402

#: Run in a process of its own: one cold pass at one budget; prints JSON.
PASS = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
from datetime import datetime
from raybridge.adjuster.decision.demand import AdjusterSettings, ClusterSnapshot
from raybridge.adjuster.decision.scale_adjuster import decide
from raybridge.adjuster.decision.settings import RunSettings
pods = json.load(open(sys.argv[2]))["items"]
nodes = json.load(open(sys.argv[3]))["items"]
now = datetime.fromisoformat(sys.argv[4].replace("Z", "+00:00"))
settings = RunSettings(planner=AdjusterSettings(search_budget=int(sys.argv[5])))
gc.disable()
started, cpu = time.perf_counter(), time.process_time()
result = decide(ClusterSnapshot.read(pods, nodes, now), settings)
wall, cpu = time.perf_counter() - started, time.process_time() - cpu
groups = result.decision.plan.groups
print(json.dumps({"wall": wall, "cpu": cpu,
                  "placeholders": sorted([p.placeholder.gpus, *p.placeholder.pods] for p in result.decision.create),
                  "heuristic": sum(1 for g in groups if g.method == "heuristic"),
                  "packedAboveBound": sum(g.packed_gpus - g.lower_bound for g in groups)}))
"""


def one_pass(pods: Path, nodes: Path, budget: int, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", PASS, str(ROOT), str(pods), str(nodes), NOW, str(budget)],
                         capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"the pass at budget {budget} failed ({out.returncode}): {out.stderr[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(placeholders: list[list[Any]], reference: list[list[Any]]) -> dict[str, int]:
    """How a pass's placeholders differ from the reference's: placeholders in one and not the other (a placeholder
    is its GPUs and its pods), and the GPUs asked beyond and below it."""
    mine, theirs = Counter(map(tuple, placeholders)), Counter(map(tuple, reference))
    return {"differing": sum(((mine - theirs) + (theirs - mine)).values()),
            "gpusAgainst": sum(p[0] for p in placeholders) - sum(p[0] for p in reference)}


def measure(groups: int, seed: int, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    pods_objects, node_objects = make_cluster(groups, args.pods, args.nodes, seed, kubectl=False)
    directory = work / f"g{groups}s{seed}"
    pods, nodes = write_cluster(directory, pods_objects, node_objects)
    del pods_objects, node_objects
    env = child_environment(work / "pycache")
    samples: dict[int, list[dict[str, Any]]] = {budget: [] for budget in args.budgets}
    try:
        for _ in range(args.runs):
            for budget in args.budgets:
                samples[budget].append(one_pass(pods, nodes, budget, env))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    reference = samples[args.budgets[0]][0]["placeholders"]
    rows = []
    for budget, runs in samples.items():
        if any(run["placeholders"] != runs[0]["placeholders"] for run in runs):
            raise SystemExit(f"{groups} groups, seed {seed}, budget {budget}: two runs decided differently")
        first = runs[0]
        rows.append({"groups": groups, "seed": seed, "budget": budget,
                     "wall": statistics.median(r["wall"] for r in runs), "cpu": statistics.median(r["cpu"] for r in runs),
                     "walls": [r["wall"] for r in runs], "placeholders": len(first["placeholders"]),
                     "gpus": sum(p[0] for p in first["placeholders"]), "heuristic": first["heuristic"],
                     "packedAboveBound": first["packedAboveBound"], **compare(first["placeholders"], reference)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[30, 300, 1239])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budgets", type=int, nargs="+", default=[200_000, 50_000, 20_000, 0],
                        help="search steps per group; the first is the one the others are compared with")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args()
    if any(b < 0 for b in args.budgets) or args.runs < 1:
        parser.error("budgets are whole numbers >= 0 and --runs at least 1")
    work = Path(tempfile.mkdtemp(prefix="rb-search-budget-"))
    rows: list[dict[str, Any]] = []
    try:
        print(f"| groups, seed | budget | pass, cold (CPU) | placeholders | GPUs | against {args.budgets[0]}: placeholders differing | GPUs | groups stopped at the budget |")
        print("|---|---|---|---|---|---|---|---|")
        for groups in args.groups:
            for seed in args.seeds:
                for r in measure(groups, seed, args, work):
                    rows.append(r)
                    print(f"| {groups}, {seed} | {r['budget']:,} | {r['wall']:.2f} s ({r['cpu']:.2f}) | {r['placeholders']:,} | "
                          f"{r['gpus']:,} | {r['differing']} | {r['gpusAgainst']:+d} | {r['heuristic']} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
