"""Every file in examples/ run as the README shows it, against the configs shipped beside it.

Offline commands run for real. The cluster example (`submit examples/train-gpu.yaml`) runs end to
end on a real cluster of its own (testcluster: the real API server, scheduler, Kueue and KubeRay)
set up as a user would: the example's nodes, the example's namespace and
`configs/kueue/gpu-queues.yaml` applied. Kueue admits it through the shipped queues, KubeRay builds
its Ray cluster on the AMD nodes, and its entrypoint runs on the local Ray head the head pod stands for.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

import pytest
import yaml

from tests.waits import wait_for
from tests.helpers import EXAMPLES, ROOT, cli_env, run_cli, run_cli_fresh
from testcluster.pytest_plugin import own_cluster
from testcluster.stack import StackOptions

NODES = "examples/cluster/nodes.json"
PODS = "examples/cluster/pods.json"
#: What a real kube-apiserver (testcluster, tests/e2e/test_dra_real.py's nodes) answered to
#: `kubectl get nodes,resourceslices,deviceclasses -o json`: two nodes of eight H100s as DRA devices, one of A100s
#: through the device plugin.
DRA = "examples/cluster/dra.json"

# (what it shows, command line as the README gives it)
OFFLINE_ROWS = [
    ("plan the GPU example", ["plan", "examples/train-gpu.yaml", "--nodes", NODES, "-o", "json"]),
    ("render the GPU example", ["render", "examples/train-gpu.yaml", "--nodes", NODES]),
    ("render the small example", ["render", "examples/hello.yaml", "--nodes", NODES]),
    ("dry run of the GPU example on the example nodes", ["submit", "examples/train-gpu.yaml", "--dry-run", "--nodes", NODES]),
    ("discover the example nodes", ["discover", "--nodes", NODES, "--pods", PODS]),
    ("adjuster plan on the example", ["adjuster", "plan", "--pods", PODS, "--nodes", NODES, "-o", "json"]),
    ("fair share of the example queues", ["queues", "fairshare", "--queues", "examples/queues/node-pool-a.yaml", "--capacity", "gpu=40,cpu=64000m,memory=512000M"]),
    ("generate configs from the example nodes", ["queues", "generate", "--nodes", NODES]),
    ("explain the waiting job from saved objects", ["explain", "train-gpu", "-f", "examples/cluster/queued.yaml", "-f", NODES, "-o", "svg"]),
    ("discover a DRA cluster", ["discover", "--nodes", DRA]),
    ("render a DRA job", ["render", "--gpus", "16", "--nodes", DRA, "--", "python", "train.py"]),
    ("generate configs for a DRA cluster", ["queues", "generate", "--nodes", DRA]),
]


@pytest.mark.parametrize("case,argv", OFFLINE_ROWS, ids=[r[0] for r in OFFLINE_ROWS])
def test_offline_examples_run(case: str, argv: list[str]) -> None:
    out = run_cli(*argv)
    assert out.returncode == 0, out.stderr
    assert out.stdout and "Traceback" not in out.stderr


@pytest.mark.parametrize("case,argv", OFFLINE_ROWS, ids=[r[0] for r in OFFLINE_ROWS])
def test_offline_examples_run_the_same_in_a_fresh_interpreter(case: str, argv: list[str]) -> None:
    """Each offline example in a fresh interpreter, as a user's shell starts it, on every run of the suite (not only
    with RAYBRIDGE_TEST_FRESH_CLI=1): `run_cli` forks most calls from a zygote that has imported raybridge already
    (tests/cli_zygote.py), which could hide a failure at import or start-up, or a difference from a real start.
    The zygote's runs must say exactly what the fresh one says."""
    fresh = run_cli_fresh(*argv)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout and "Traceback" not in fresh.stderr
    # twice: a call in an environment this process has seen before is the zygote's (tests/helpers.py `run_cli`), unless
    # RAYBRIDGE_TEST_FRESH_CLI=1 makes every call fresh
    for forked in (run_cli(*argv), run_cli(*argv)):
        assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_the_gpu_example_previews_offline_without_a_warning() -> None:
    """The shipped GPU example shows good practice (a pinned image): no command of the tour warns about it, and a
    dry run given the example nodes shows what would be created there, without --backend."""
    for argv in [r[1] for r in OFFLINE_ROWS if "examples/train-gpu.yaml" in r[1]]:
        out = run_cli(*argv)
        assert out.returncode == 0 and "warning:" not in out.stderr, (argv, out.stderr)
    dry = run_cli("submit", "examples/train-gpu.yaml", "--dry-run", "--nodes", NODES, "-o", "json")
    preview = json.loads(dry.stdout)
    assert (preview["backend"], preview["backendReason"]) == ("kubernetes", "--nodes describes a cluster")
    assert (preview["plan"]["gpuVendor"], preview["plan"]["replicas"], preview["plan"]["gpusPerReplica"]) == ("amd", 2, 8)
    assert [o["kind"] for o in preview["objects"]] == ["RayJob"] and preview["objects"][0]["metadata"]["namespace"] == "team-a"
    assert "would upload working dir " in dry.stderr and "ignored by the local backend" not in dry.stderr


def test_every_example_file_is_run_by_a_test() -> None:
    used = {word for _, argv in OFFLINE_ROWS for word in argv} | {"examples/train-gpu.yaml"}  # train-gpu: also on the cluster below
    shipped = {str(p.relative_to(ROOT)) for p in EXAMPLES.rglob("*") if p.is_file() and p.suffix in (".yaml", ".json")}
    assert shipped <= used, sorted(shipped - used)


def test_the_adjuster_example_plans_placeholders() -> None:
    out = run_cli("adjuster", "plan", "--pods", PODS, "--nodes", NODES, "-o", "json")
    plan = json.loads(out.stdout)
    assert plan["totalGpus"] > 0 and plan["placeholders"], out.stdout


# --- the cluster example against the shipped Kueue configs ----------------------------------------


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


#: The tests on the shipped cluster run on one worker (`--dist loadgroup`), so it starts once.
ON_THE_SHIPPED_CLUSTER = pytest.mark.xdist_group("examples-shipped-cluster")


#: The kubeconfig docs/testing.md's steps by hand write and use.
BY_HAND_KUBECONFIG = "~/.kube/testcluster"


def by_hand_steps() -> list[str]:
    """The commands of docs/testing.md's "By hand" block, comments dropped."""
    text = (ROOT / "docs" / "testing.md").read_text()
    block = text.split("## By hand", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.strip().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def shipped_cluster(ray_head: Any) -> Iterator[Any]:
    """A real cluster of the example's nodes (what `testcluster up` starts), set up by docs/testing.md's steps by hand
    as written, with a real kubectl: the example's namespace and the shipped queues."""
    nodes = json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())["items"]
    options = StackOptions(nodes=nodes, ray_dashboard=urlparse(ray_head.dashboard_url).netloc)
    with own_cluster(options) as stack:
        for step in by_hand_steps():
            if step.startswith("kubectl "):
                argv = [str(stack.kubeconfig) if word == BY_HAND_KUBECONFIG else word for word in shlex.split(step)]
                done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=str(ROOT))
                assert done.returncode == 0, f"docs/testing.md's step `{step}` failed: {done.stderr}"
        yield stack


def test_the_steps_by_hand_start_the_cluster_and_submit_the_gpu_example() -> None:
    """What the fixture above runs is the whole block: up, kubectl, and the submit the test below makes."""
    steps = by_hand_steps()
    assert steps[0] == f"python -m testcluster up --kubeconfig {BY_HAND_KUBECONFIG}", steps
    assert steps[-1] == f"KUBECONFIG={BY_HAND_KUBECONFIG} python -m raybridge submit examples/train-gpu.yaml", steps
    assert all(step.startswith("kubectl ") for step in steps[1:-1]), steps


def _client(stack: Any) -> Any:
    from testcluster.client import ClusterClient

    return ClusterClient(stack.kubeconfig)


@ON_THE_SHIPPED_CLUSTER
def test_the_gpu_example_runs_end_to_end_through_the_shipped_queues(shipped_cluster: Any) -> None:
    out = run_cli("submit", "examples/train-gpu.yaml", env=cli_env(KUBECONFIG=str(shipped_cluster.kubeconfig)), timeout=240)
    assert out.returncode == 0, out.stderr
    assert "created RayJob team-a/train-gpu in queue team-a" in out.stderr, out.stderr
    assert "admitted by team-a" in out.stderr and "port-forwarding 127.0.0.1:" in out.stderr
    assert "sum of squares: 285" in out.stdout
    assert "allocated: NUM_GPUS=16 NUM_REPLICAS=2" in out.stdout  # two 8-GPU MI300X workers, as `plan` says
    assert "deleted RayJob team-a/train-gpu" in out.stderr
    client = _client(shipped_cluster)
    try:
        assert client.list_objects("ray.io/v1", "RayJob", "team-a") == []
        assert client.list_objects("kueue.x-k8s.io/v1beta2", "Workload", "team-a") == []
    finally:
        client.close()


@ON_THE_SHIPPED_CLUSTER
def test_the_gpu_example_workload_asks_the_amd_flavor_for_16_gpus(shipped_cluster: Any) -> None:
    """What Kueue admitted: the workers' pod set in the MI300X flavor with 16 amd.com/gpu (kept with --no-wait)."""
    kubeconfig = str(shipped_cluster.kubeconfig)
    out = run_cli("submit", "examples/train-gpu.yaml", "--name", "train-gpu-kept", "--no-wait", env=cli_env(KUBECONFIG=kubeconfig), timeout=240)
    assert out.returncode == 0, out.stderr
    client = _client(shipped_cluster)
    try:
        rayjob = client.get_object("ray.io/v1", "RayJob", "train-gpu-kept", "team-a")
        assert rayjob is not None and rayjob["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "train"
        selector = f"kueue.x-k8s.io/job-uid={rayjob['metadata']['uid']}"
        # --no-wait returns once the RayJob exists: Kueue admits it after
        workloads = wait_for(lambda: [w for w in client.list_objects("kueue.x-k8s.io/v1beta2", "Workload", "team-a", label_selector=selector)
                                      if (w.get("status") or {}).get("admission")], timeout=60, what="Kueue to admit the job")  # fmt: skip
        assert len(workloads) == 1, workloads
        assignments = {a["name"]: a for a in workloads[0]["status"]["admission"]["podSetAssignments"]}
        assert assignments["workers"]["resourceUsage"]["amd.com/gpu"] == "16"
        assert assignments["workers"]["flavors"]["amd.com/gpu"] == "amd-mi300x"
    finally:
        client.close()
    assert run_cli("delete", "train-gpu-kept", "-n", "team-a", env=cli_env(KUBECONFIG=kubeconfig)).returncode == 0


def test_the_dra_example_claims_its_gpus_as_dra_devices() -> None:
    out = run_cli("render", "--gpus", "16", "--nodes", DRA, "-o", "json", "--", "python", "train.py")
    objects = json.loads(out.stdout)["items"]
    assert [o["kind"] for o in objects] == ["ResourceClaimTemplate", "RayJob"], out.stderr
    assert objects[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {"deviceClassName": "gpu.nvidia.com", "count": 8}
    assert "8 nvidia GPUs on 1 node left out (plugin-a100)" in out.stderr
