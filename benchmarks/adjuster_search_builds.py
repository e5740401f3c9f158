"""The exact packing's searches interpreted against compiled, on the searches a cold controller pass makes.

For each group count, `adjuster_shared_cluster.py` generates a shared cluster (10,000 pending pods over that many
constraint sets, 2,000 nodes) and one cold controller pass (`decide`, nothing packed before) runs in this process,
interpreted, with every search recorded: bin completion's and branch and bound's arguments and what each returned
(GPUs, steps, whether it ran out, the packing). Then, as whole processes, alternately, `--runs` times each, every recorded search
is run again by the source as it is (`exact_search.py`, interpreted) and by the copy setup.py compiled
(`_exact_search_native`); each process asserts that every search returns what was recorded and prints the CPU
seconds the searches took. The table gives medians and the ratio interpreted / compiled.

    python benchmarks/adjuster_search_builds.py [--groups 30 300 1239] [--runs 3] [--json out.json]

Needs the compiled copy (an install with a C compiler: see CONTRIBUTING.md).
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from adjuster_plan_speed import NOW  # noqa: E402
from adjuster_shared_cluster import make_cluster  # noqa: E402

from raybridge.adjuster.decision import exact_search, packing, searches  # noqa: E402
from raybridge.adjuster.decision.demand import ClusterSnapshot  # noqa: E402
from raybridge.adjuster.decision.scale_adjuster import decide  # noqa: E402
from raybridge.adjuster.decision.settings import RunSettings  # noqa: E402

#: Run in a child: replay the recorded searches with one build; prints {"build", "searches", "cpu"}.
REPLAY = r"""
import json, pickle, sys, time
sys.path.insert(0, sys.argv[1])
build = sys.argv[3]
if build == "interpreted":
    sys.modules["raybridge.adjuster.decision._exact_search_native"] = None  # an import of it fails: the source runs
from raybridge.adjuster.decision import searches
assert searches.BUILD.kind == build, searches.BUILD
module = sys.modules[searches.NATIVE_MODULE] if build == "compiled" else searches.exact_search
calls = pickle.loads(open(sys.argv[2], "rb").read())
cpu = 0.0
for kind, args, kwargs, returned in calls:
    kwargs = dict(kwargs)
    started = time.process_time()
    if kind == "bin completion":
        search = module.BinCompletion(*args, **kwargs)
        got = []
        for target, *_ in returned:
            found = search.solve(target)
            got.append((target, found, search.steps, search.exhausted, search.aborted))
    else:
        target = kwargs.pop("target")
        search = module.BranchAndBound(*args, **kwargs)
        search.target = target
        search.run()
        got = (search.best, search.visited, search.aborted, search.best_placed, search.best_state)
    cpu += time.process_time() - started
    assert got == returned, f"{build}: a {kind} search returned other than recorded"
print(json.dumps({"build": build, "searches": len(calls), "cpu": cpu}))
"""


def record_searches(groups: int, pods: int, nodes: int, seed: int) -> list[tuple[str, tuple, dict, Any]]:
    """Every search one cold pass on the generated cluster makes: (kind, arguments, keywords, what it returned)."""
    pod_objects, node_objects = make_cluster(groups, pods, nodes, seed, kubectl=False)
    calls: list[tuple[str, tuple, dict, Any]] = []
    # Recorded by the source (a compiled class cannot be subclassed); both builds must then return the same.
    bin_completion, branch_and_bound, search_state = packing.BinCompletion, packing.BranchAndBound, packing.SearchState

    class RecordedBinCompletion(exact_search.BinCompletion):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.recorded: list[tuple] = []
            calls.append(("bin completion", args, kwargs, self.recorded))

        def solve(self, target: int) -> Any:
            found = super().solve(target)
            self.recorded.append((target, found, self.steps, self.exhausted, self.aborted))
            return found

    class RecordedBranchAndBound(exact_search.BranchAndBound):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.call = ["branch and bound", args, kwargs, None]

        def run(self) -> None:
            super().run()
            self.call[2] = {**self.call[2], "target": self.target}
            self.call[3] = (self.best, self.visited, self.aborted, self.best_placed, self.best_state)
            calls.append(tuple(self.call))  # type: ignore[arg-type]

    packing.BinCompletion, packing.BranchAndBound, packing.SearchState = RecordedBinCompletion, RecordedBranchAndBound, exact_search.SearchState
    packing._packings.clear()
    try:
        now = datetime.fromisoformat(NOW.replace("Z", "+00:00"))
        decide(ClusterSnapshot.read(pod_objects, node_objects, now), RunSettings())
    finally:
        packing.BinCompletion, packing.BranchAndBound, packing.SearchState = bin_completion, branch_and_bound, search_state
    return calls


def replay(recorded: Path, build: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", REPLAY, str(ROOT), str(recorded), build], capture_output=True, text=True,
                         timeout=3600, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(groups: int, pods: int, nodes: int, seed: int, runs: int, work: Path) -> dict[str, Any]:
    calls = record_searches(groups, pods, nodes, seed)
    recorded = work / f"searches-{groups}.pickle"
    recorded.write_bytes(pickle.dumps(calls))
    cpu: dict[str, list[float]] = {"interpreted": [], "compiled": []}
    for _ in range(runs):
        for build in cpu:
            cpu[build].append(replay(recorded, build)["cpu"])
    return {"groups": groups, "searches": len(calls), "bin completion": sum(c[0] == "bin completion" for c in calls), "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[30, 300, 1239])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every sample here")
    args = parser.parse_args()
    if searches.BUILD.kind != "compiled":
        print(f"the searches are not compiled in this install: {searches.BUILD.reason}", file=sys.stderr)
        return 2
    results = []
    print("| groups | searches (bin completion) | interpreted | compiled | ratio |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="raybridge-search-builds-") as work:
        for groups in args.groups:
            result = measure(groups, args.pods, args.nodes, args.seed, args.runs, Path(work))
            results.append(result)
            slow, fast = statistics.median(result["cpu"]["interpreted"]), statistics.median(result["cpu"]["compiled"])
            print(f"| {groups:,} | {result['searches']} ({result['bin completion']}) | {slow:.2f} s | {fast:.2f} s | "
                  f"{slow / fast if fast else float('nan'):.1f} |", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
