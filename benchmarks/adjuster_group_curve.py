"""`adjuster plan` and one controller pass as the number of constraint groups grows, this tree beside a git ref.

For each group count (3 to 2,000 by default) `benchmarks/adjuster_shared_cluster.py` writes a shared cluster as
`kubectl get -o json` prints it: 10,000 pending pods over that many distinct constraint sets, 2,000 nodes. Then,
as whole processes, alternately, `--runs` times each:

* `python -c "json.load(pods); json.load(nodes)"` with the cyclic GC off (as `adjuster plan` runs), the load the
  ratio is taken against;
* `python -m raybridge adjuster plan --pods ... --nodes ... -o json` of this tree, and of `--ref` (a temporary
  `git worktree`) where one is given; both must print the same plan.

and, in one process per tree, one controller pass (the snapshot read and `decide`: the plan and the reconcile, no
API call) on the same objects with no placeholder yet: cold (nothing packed before in the process; the controller's
first pass) and again on the same state (what a pass costs when no group changed: each group's packing and
placement is kept between passes, and each pod's view where the tree keeps them, `adjuster/kept_views.py`), best
of `--pass-runs`. It prints a table of medians (wall and CPU time of the children) and the ratio plan / load;
`--json` writes every sample. Both sides get bytecode caches as in `adjuster_plan_speed.py`.

    python benchmarks/adjuster_group_curve.py [--groups 3 10 30 100 300 1000 2000] [--ref COMMIT] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from adjuster_plan_speed import NOW, child_environment, timed  # noqa: E402
from adjuster_shared_cluster import make_cluster, write_cluster  # noqa: E402

#: Run in the tree under test (its own raybridge first on sys.path): one pass, cold and again; prints JSON.
PASS = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
from datetime import datetime, timezone
from raybridge.adjuster.decision.demand import ClusterSnapshot
from raybridge.adjuster.decision.scale_adjuster import decide
from raybridge.adjuster.decision.settings import RunSettings
import raybridge.adjuster.decision.packing as packing
try:  # the pods' views kept from pass to pass, as the controller keeps them
    from raybridge.adjuster.kept_views import KeptPodViews
except ImportError:  # a tree from before the controller kept them
    KeptPodViews = None
pods = json.load(open(sys.argv[2]))["items"]
nodes = json.load(open(sys.argv[3]))["items"]
now = datetime.fromisoformat(sys.argv[4].replace("Z", "+00:00"))
gc.disable()
cold, again = [], []
for _ in range(int(sys.argv[5])):
    getattr(packing, "_packings", {}).clear()
    read = {} if KeptPodViews is None else {"pod_views": KeptPodViews().pods}
    for into in (cold, again):
        started, cpu = time.perf_counter(), time.process_time()
        snapshot = ClusterSnapshot.read(pods, nodes, now, **read)
        result = decide(snapshot, RunSettings())
        into.append((time.perf_counter() - started, time.process_time() - cpu))
print(json.dumps({"cold": min(cold), "again": min(again), "create": len(result.decision.create),
                  "gpus": sum(p.placeholder.gpus for p in result.decision.create)}))
"""


def pass_times(tree: Path, pods: Path, nodes: Path, runs: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", PASS, str(tree), str(pods), str(nodes), NOW, str(runs)],
                         capture_output=True, text=True, timeout=3600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def plan_command(tree: Path, pods: Path, nodes: Path) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); sys.argv[0] = 'raybridge'; "
            "import runpy; runpy.run_module('raybridge', run_name='__main__', alter_sys=True)",
            "adjuster", "plan", "--pods", str(pods), "--nodes", str(nodes), "--now", NOW, "-o", "json"]


def measure(groups: int, args: argparse.Namespace, ref_tree: Optional[Path], work: Path) -> dict[str, Any]:
    pods_objects, node_objects = make_cluster(groups, args.pods, args.nodes, args.seed, kubectl=True)
    directory = work / f"g{groups}"
    pods, nodes = write_cluster(directory, pods_objects, node_objects)
    del pods_objects, node_objects
    try:
        trees = {"this tree": ROOT, **({args.ref: ref_tree} if ref_tree is not None else {})}
        commands = {"load, GC off": [sys.executable, "-c", f"import json, gc; gc.disable(); json.load(open({str(pods)!r})); json.load(open({str(nodes)!r}))"]}
        commands.update({f"adjuster plan ({name})": plan_command(tree, pods, nodes) for name, tree in trees.items()})
        env = child_environment(work / "pycache")
        plans = {}
        for name, tree in trees.items():
            plans[name] = subprocess.run(plan_command(tree, pods, nodes), capture_output=True, text=True, env=env, check=True, timeout=3600).stdout
        if len(set(plans.values())) != 1:
            raise SystemExit(f"{groups} groups: the trees print different plans")
        plan = json.loads(plans["this tree"])
        wall: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                w, c = timed(command, env)
                wall[name].append(w)
                cpu[name].append(c)
        passes = {name: pass_times(tree, pods, nodes, args.pass_runs) for name, tree in trees.items()}
        return {"groups": groups, "plannedGroups": len(plan["groups"]), "placeholders": len(plan["placeholders"]),
                "megabytes": (pods.stat().st_size + nodes.stat().st_size) / 1e6, "wall": wall, "cpu": cpu, "pass": passes}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[3, 10, 30, 100, 300, 1000, 2000])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pass-runs", type=int, default=2)
    parser.add_argument("--ref", help="a git ref to run beside this tree (a temporary worktree)")
    parser.add_argument("--json", type=Path, help="write every sample here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rb-group-curve-"))
    ref_tree = work / "ref" if args.ref else None
    if ref_tree is not None:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(ref_tree), args.ref], check=True, capture_output=True, timeout=120)
    results = []
    try:
        print("| groups (planned) | placeholders | load, GC off | adjuster plan | ratio (wall, CPU) | pass, cold | pass again |")
        print("|---|---|---|---|---|---|---|")
        for groups in args.groups:
            r = measure(groups, args, ref_tree, work)
            results.append(r)
            med = {name: (statistics.median(r["wall"][name]), statistics.median(r["cpu"][name])) for name in r["wall"]}
            load = med["load, GC off"]
            for name, (w, c) in med.items():
                if not name.startswith("adjuster plan"):
                    continue
                tree = name[len("adjuster plan ("):-1]
                p = r["pass"][tree]
                print(f"| {groups} ({r['plannedGroups']}) | {r['placeholders']} | {load[0]:.2f} s | {tree}: {w:.2f} s | "
                      f"{w / load[0]:.2f}, {c / load[1]:.2f} | {p['cold'][0]:.2f} s ({p['cold'][1]:.2f} CPU) | {p['again'][0]:.2f} s |", flush=True)
    finally:
        if ref_tree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref_tree)], capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
