"""How often the packer proves its GPU count optimal on groups of the sizes that occur.

Seeded random constraint groups of 40, 100, 200 and 300 pieces, mixed as the
groups in benchmarks/adjuster_plan_speed.py (60% `gpu-fraction` pods of common fractions, 40% `gpu-memory`
pods converted against an 80 GB GPU, 8% of all pods on two devices), packed
into 8-GPU nodes by `adjuster/decision/packing.pack` with its default limits. Reported per
size: the share of groups whose count is proven minimal ("exact"), the GPUs
above the lower bound summed over the groups, and the median and worst CPU
time per group (CPU, not wall time: the numbers hold on a busy machine).
It measures the packer alone: no pods, no JSON, no processes.

    python benchmarks/adjuster_packing_exactness.py [--groups 20] [--sizes 40,100,200,300] [--seed 1] [--markdown]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raybridge.adjuster.decision.packing import PackItem, pack  # noqa: E402

FRACTIONS = ["0.1", "0.125", "0.2", "0.25", "0.3", "0.33", "0.5", "0.6", "0.75"]
MEMORY_MIB = [2000, 4096, 10240, 20000, 40000]
GPU_MIB = 81559
NODE_GPUS = 8


def group(size: int, rng: random.Random) -> list[PackItem]:
    items = []
    for i in range(size):
        if rng.random() < 0.6:
            fraction = Fraction(rng.choice(FRACTIONS))
        else:
            fraction = Fraction(rng.choice(MEMORY_MIB), GPU_MIB)
        devices = 2 if rng.random() < 0.08 else 1
        items.append(PackItem(f"ns/p{i}", fraction, devices))
    return items


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--sizes", default="40,100,200,300")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (default: plain columns)")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rng = random.Random(f"{args.seed}-{size}")
        exact = above = 0
        times = []
        for _ in range(args.groups):
            items = group(size, rng)
            start = time.process_time()
            result = pack(items, NODE_GPUS)
            times.append(time.process_time() - start)
            exact += result.method == "exact"
            above += result.gpus - result.lower_bound
        rows.append((size, f"{exact}/{args.groups}", above, f"{statistics.median(times) * 1000:.0f} ms", f"{max(times) * 1000:.0f} ms"))
    header = ("pieces per group", "proven exact", "GPUs above the lower bound (sum)", "median CPU time", "worst CPU time")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(str(c) for c in row) + " |")
    else:
        for row in (header, *rows):
            print("  ".join(f"{str(c):>16}" for c in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
