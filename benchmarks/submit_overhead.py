"""raybridge submit --backend local vs `ray job submit`, against the same running head.

Both are run as whole processes, alternating, for the same trivial job; the
script prints each median and the ratio raybridge/ray. The target is a ratio
of at most 1.20.

    python benchmarks/submit_overhead.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raybridge.jobs.private_head import PrivateRayHead  # noqa: E402

ENTRYPOINT = ["python", "--version"]  # needs no shell quoting: `ray job submit` joins argv unquoted


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if result.returncode != 0 or "Python" not in result.stdout:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="rbb", dir="/tmp")
    os.environ["TMPDIR"] = tmp
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "KUBECONFIG")}
    env["HOME"] = tmp  # no kubeconfig: nothing but the local path is measured
    ray_cli = str(Path(sys.executable).with_name("ray"))
    head = PrivateRayHead(num_cpus=2)  # token authentication on, as every private head: no other user gets in
    head.start()
    # Both clients read the token as Ray's client does for any cluster with token authentication
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(head.token_path)})
    try:
        url = head.dashboard_url
        commands = {
            "ray job submit": [ray_cli, "job", "submit", "--address", url, "--", *ENTRYPOINT],
            "raybridge submit": [sys.executable, "-m", "raybridge", "submit", "--backend", "local", "--address", url, "--", *ENTRYPOINT],
        }
        for command in commands.values():  # warm-up: page cache, first-import costs
            timed(command, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                samples[name].append(timed(command, env))
    finally:
        head.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, values in samples.items():
        print(f"{name:18s} median {medians[name]:.2f}s  (min {min(values):.2f}s, max {max(values):.2f}s, {len(values)} runs)")
    ratio = medians["raybridge submit"] / medians["ray job submit"]
    print(f"ratio raybridge/ray: {ratio:.2f} (target <= 1.20)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
