"""Every file in examples/ run as the README shows it, against the configs shipped beside it.

Offline commands run for real. The cluster example (`submit examples/train-gpu.yaml --queue team-a`)
runs against the test API server set up as a user would: the example's nodes, the example's
namespace and `configs/kueue/gpu-queues.yaml` applied, the simulated Kueue admitting. No KubeRay
runs, so the submission stops at its `--timeout` (exit 3) once Kueue has admitted it; what is
checked is that raybridge's checks before creating anything (LocalQueue, WorkloadPriorityClass,
quota) pass and that Kueue admits the job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.helpers import EXAMPLES, ROOT, cli_env, run_cli
from kubesim.controllers import FakeKueue
from kubesim.fixtures import wait_for
from kubesim.server import KubeApiServer
from kubesim.sim_kueue import kueue_api_version

NODES = "examples/cluster/nodes.json"
PODS = "examples/cluster/pods.json"

# (what it shows, command line as the README gives it)
OFFLINE_ROWS = [
    ("plan the GPU example", ["plan", "examples/train-gpu.yaml", "--nodes", NODES, "-o", "json"]),
    ("render the GPU example", ["render", "examples/train-gpu.yaml", "--nodes", NODES]),
    ("render the small example", ["render", "examples/hello.yaml", "--nodes", NODES]),
    ("discover the example nodes", ["discover", "--nodes", NODES, "--pods", PODS]),
    ("adjuster plan on the example", ["adjuster", "plan", "--pods", PODS, "--nodes", NODES, "-o", "json"]),
    ("fair share of the example queues", ["queues", "fairshare", "--queues", "examples/queues/node-pool-a.yaml", "--capacity", "gpu=40,cpu=64000m,memory=512000M"]),
    ("generate configs from the example nodes", ["queues", "generate", "--nodes", NODES]),
]


@pytest.mark.parametrize("case,argv", OFFLINE_ROWS, ids=[r[0] for r in OFFLINE_ROWS])
def test_offline_examples_run(case: str, argv: list[str]) -> None:
    out = run_cli(*argv)
    assert out.returncode == 0, out.stderr
    assert out.stdout and "Traceback" not in out.stderr


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


@pytest.fixture(scope="module")
def shipped_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeApiServer, str]]:
    """The example's nodes, the example's namespace, configs/kueue/gpu-queues.yaml, the simulated Kueue (newest)."""
    server = KubeApiServer().start()
    kueue = FakeKueue(server).start()
    try:
        for node in json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())["items"]:
            created = server.create_object(node)
            server.update_status({**created, "status": node["status"]})
        documents = load_documents(ROOT / "configs" / "kueue" / "gpu-queues.yaml")
        for namespace in {d["metadata"]["namespace"] for d in documents if d["kind"] == "LocalQueue"}:  # as the config's header says
            server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for doc in documents:
            server.create_object(doc)
        yield server, str(server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config"))
    finally:
        kueue.stop()
        server.stop()


def test_the_gpu_example_is_admitted_through_the_shipped_queues(shipped_cluster: tuple[KubeApiServer, str]) -> None:
    server, kubeconfig = shipped_cluster
    out = run_cli("submit", "examples/train-gpu.yaml", "--queue", "team-a", "--timeout", "5", "--keep",
                  env=cli_env(KUBECONFIG=kubeconfig), timeout=120)  # fmt: skip
    assert out.returncode == 3, out.stderr  # accepted; never ready only because no KubeRay runs here
    assert "created RayJob team-a/train-gpu in queue team-a" in out.stderr, out.stderr
    rayjob = server.get_object("ray.io/v1", "RayJob", "train-gpu", "team-a")
    assert rayjob is not None and rayjob["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "train"
    api = kueue_api_version(server)

    def admitted() -> Any:
        for wl in server.list_objects(api, "Workload", "team-a", label_selector=f"kueue.x-k8s.io/job-uid={rayjob['metadata']['uid']}"):
            if any(c["type"] == "Admitted" and c["status"] == "True" for c in (wl.get("status") or {}).get("conditions") or []):
                return wl
        return None

    workload = wait_for(admitted, timeout=10, what="Kueue to admit the example")
    usage = {a["name"]: a["resourceUsage"] for a in workload["status"]["admission"]["podSetAssignments"]}
    assert usage["workers"]["amd.com/gpu"] == "16"
