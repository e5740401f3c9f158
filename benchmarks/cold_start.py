"""A cold `raybridge submit examples/hello.yaml` against a plain `python main.py` that calls `ray.init()`.

Both start Ray from nothing on this machine and run the same program
(`examples/hello/main.py`): raybridge through a private head and the Job API,
the script through an in-process `ray.init()`. Each is run as a whole process,
alternating, `--runs` times; the best time of each and the ratio are printed.
The target is a ratio of at most 1.30.

    python benchmarks/cold_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], env: dict[str, str], cwd: Path, expect: str) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(cwd))
    elapsed = time.perf_counter() - start
    if result.returncode != 0 or expect not in result.stdout:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-800:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="rbc", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "KUBECONFIG")}
    env.update(TMPDIR=tmp, HOME=tmp, RAY_USAGE_STATS_ENABLED="0")  # no kubeconfig, no ~/.ray token: the local path only
    commands = {
        "python main.py (ray.init)": ([sys.executable, "main.py"], ROOT / "examples" / "hello"),
        "raybridge submit": ([sys.executable, "-m", "raybridge", "submit", "examples/hello.yaml"], ROOT),
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for _ in range(args.runs):
            for name, (command, cwd) in commands.items():
                samples[name].append(timed(command, env, cwd, "sum of squares: 285"))
                time.sleep(2)  # let the last run's processes finish winding down
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, values in samples.items():
        print(f"{name:28s} best {min(values):.2f}s  (median {sorted(values)[len(values) // 2]:.2f}s, {len(values)} runs)")
    ratio = min(samples["raybridge submit"]) / min(samples["python main.py (ray.init)"])
    print(f"ratio raybridge/ray.init, best of {args.runs}: {ratio:.2f} (target <= 1.30)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
