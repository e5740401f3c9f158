"""A cold `raybridge submit examples/hello.yaml` against a plain `python main.py` that calls `ray.init()`.

Both start Ray from nothing on this machine and run the same program
(`examples/hello/main.py`): raybridge through a private head and the Job API,
the script through an in-process `ray.init()`. Each is run as a whole process,
alternating, `--runs` times; the best time of each and the ratio are printed.
Between runs it waits until the last run's Ray processes are gone (raybridge
returns before its private head has wound down), so neither side pays for
the other's teardown.
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


def processes_under(path: str) -> list[int]:
    """Pids whose command line names `path` (a run's Ray processes all carry their temp dir)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if path.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def settle(tmp: str, limit: float = 60.0) -> None:
    """Wait until the last run's Ray processes are gone, so no run pays for another's teardown."""
    deadline = time.monotonic() + limit
    while processes_under(tmp) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)


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
                settle(tmp)  # raybridge returns before its head is down: wait for that here, not in the next run
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, values in samples.items():
        print(f"{name:28s} best {min(values):.2f}s  (median {sorted(values)[len(values) // 2]:.2f}s, {len(values)} runs)")
    ratio = min(samples["raybridge submit"]) / min(samples["python main.py (ray.init)"])
    print(f"ratio raybridge/ray.init, best of {args.runs}: {ratio:.2f} (target <= 1.30)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
