"""raybridge submit against `kubectl apply` of the same RayJob: the time to a ready Ray cluster, side by side.

On a cluster of the real programs (testcluster: kube-apiserver, KubeRay v1.6.1, Kueue v0.17.0, kwok nodes, a
Ray head of the stack's own), alternating, for the same trivial job in the same queue:
- `kubectl apply -f` of the RayJob `raybridge render` prints (rendered beforehand, not timed), then polled every
  0.1 s until KubeRay reports the cluster ready (a `dashboardURL` and `jobDeploymentStatus` Running);
- `raybridge submit` as a user runs it (a process of its own), until it prints that the Ray cluster is ready.
Each is timed from the start of its process. It prints each run, the medians, the difference (what raybridge
adds: its start, discovery, preflight) and the ratio. The target: at most 2 s added.

    python benchmarks/kube_submit_to_ready.py [--runs 7] [--pods 2000] [--ref COMMIT]

`--ref` also runs `raybridge submit` of that commit (a git worktree), alternating with this tree's, in the same run.

`--pods` adds that many running pods (kwok's, one CPU each, no GPU) before the runs, for a cluster that is not
empty: raybridge reads the cluster's pods to tell free GPUs from taken ones.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.builders import h100_node  # noqa: E402
from tests.cluster_state import make_cluster_queue, make_local_queue  # noqa: E402
from testcluster.client import ClusterClient  # noqa: E402
from testcluster.stack import Stack, StackOptions  # noqa: E402

READY_LINE = " is ready"
#: The most one submit (start to exit) or one render may take before the benchmark gives up on it.
SUBMIT_BOUND_SECONDS = 180


def kubectl_apply(kubeconfig: str, manifest: Path, client: ClusterClient, name: str, namespace: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "apply", "-f", str(manifest)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"kubectl apply failed: {done.stderr}")
    while True:
        status = (client.get_object("ray.io/v1", "RayJob", name, namespace) or {}).get("status") or {}
        if status.get("dashboardURL") and status.get("jobDeploymentStatus") in ("Waiting", "Running"):
            return time.perf_counter() - started
        if time.perf_counter() - started > 120:
            raise SystemExit(f"RayJob {name} not ready in 120 s: {status}")
        time.sleep(0.1)


def raybridge_submit(kubeconfig: str, name: str, namespace: str, queue: str, tree: Optional[Path] = None) -> float:
    """`raybridge submit` until it says the cluster is ready; `tree`: the raybridge of that source tree (--ref)."""
    env = {"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "-n", namespace, "--queue", queue, "--name", name, "--", "python", "-c", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=str(tree) if tree is not None else None,
    )  # fmt: skip
    assert proc.stderr is not None
    bound = threading.Timer(SUBMIT_BOUND_SECONDS, proc.kill)  # a submit that hangs ends the benchmark, not waits it out
    bound.start()
    ready = None
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if ready is None and READY_LINE in line:
                ready = time.perf_counter() - started
        code = proc.wait(timeout=10)
    finally:
        bound.cancel()
    if code != 0 or ready is None:
        raise SystemExit(f"raybridge submit failed (exit {code}):\n{''.join(lines)}")
    return ready


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pods", type=int, default=0)
    parser.add_argument("--ref", help="also time `raybridge submit` of this commit (a git worktree), alternating with this tree's")
    args = parser.parse_args()
    ref_tree = _worktree(args.ref) if args.ref else None
    try:
        return _run(args, ref_tree)
    finally:
        if ref_tree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref_tree)], capture_output=True, timeout=60)


def _worktree(ref: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix="bench-ref-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref], check=True, capture_output=True, timeout=120)
    return tree


def _run(args: argparse.Namespace, ref_tree: Optional[Path]) -> int:
    nodes = [h100_node(f"gpu-{i}") for i in range(8)]
    with Stack(StackOptions(nodes=nodes, start_ray_head=True, progress=lambda line: print(line, flush=True))) as stack:
        kubeconfig = str(stack.kubeconfig)
        client = ClusterClient(stack.kubeconfig)
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        client.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        make_cluster_queue(client, f"cq-{namespace}", gpus=64)
        make_local_queue(client, "lq", namespace, f"cq-{namespace}")
        for i in range(args.pods):
            client.create_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"filler-{i}", "namespace": namespace},
                                  "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m"}}}]}})  # fmt: skip
        samples: dict[str, list[float]] = {"kubectl apply": [], "raybridge submit": []}
        at_ref_key = f"raybridge submit at {args.ref}"
        if ref_tree is not None:
            samples[at_ref_key] = []
        work = Path(tempfile.mkdtemp(prefix="bench"))
        for run in range(args.runs + 1):  # the first of each is a warm-up
            name = f"k-{run}"
            manifest = work / f"{name}.yaml"
            rendered = subprocess.run([sys.executable, "-m", "raybridge", "render", "-n", namespace, "--queue", "lq", "--name", name,
                                       "--", "python", "-c", "1"], capture_output=True, text=True, env={"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin"},
                                      timeout=SUBMIT_BOUND_SECONDS)  # fmt: skip
            if rendered.returncode != 0:
                raise SystemExit(f"raybridge render failed: {rendered.stderr}")
            manifest.write_text(rendered.stdout)
            took_kubectl = kubectl_apply(kubeconfig, manifest, client, name, namespace)
            client.delete_object("ray.io/v1", "RayJob", name, namespace)
            took_raybridge = raybridge_submit(kubeconfig, f"r-{run}", namespace, "lq")
            took_ref = raybridge_submit(kubeconfig, f"o-{run}", namespace, "lq", ref_tree) if ref_tree is not None else None
            if run:
                samples["kubectl apply"].append(took_kubectl)
                samples["raybridge submit"].append(took_raybridge)
                if took_ref is not None:
                    samples[at_ref_key].append(took_ref)
            at_ref = f", at {args.ref} {took_ref:.2f} s" if took_ref is not None else ""
            print(f"run {run}{' (warm-up)' if not run else ''}: kubectl apply {took_kubectl:.2f} s, raybridge submit {took_raybridge:.2f} s{at_ref}", flush=True)
        client.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, value in medians.items():
        print(f"{name}: median {value:.2f} s (runs {', '.join(f'{v:.2f}' for v in samples[name])})")
    added = medians["raybridge submit"] - medians["kubectl apply"]
    if ref_tree is not None:
        print(f"this tree adds {added:.2f} s, {args.ref} {medians[at_ref_key] - medians['kubectl apply']:.2f} s")
    print(f"raybridge adds {added:.2f} s to a ready Ray cluster (target: at most 2 s); ratio {medians['raybridge submit'] / medians['kubectl apply']:.2f}")
    return 0 if added <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
