"""`explain NAME` as a user runs it, on the real cluster (testcluster): CLI in, words or JSON and exit status out.

The state is the real Kueue's (v0.17.0), not written by hand. In a namespace and under
cluster-scoped names of this module's own: ClusterQueue team-a-<id> (cohort gpu-<id>, flavors
a100-<id> with a borrowing limit of 0 and h100-<id> with one of 4, an admission check), a
Workload that holds 6 of its 8 h100 GPUs, ClusterQueue team-b-<id> in the cohort, which lends 2
h100 GPUs, and a RayJob asking for 2 x 5 GPUs that Kueue leaves pending with a message of its
own. The explanation's arithmetic is checked against that message: how many GPUs Kueue says are
missing in each flavor. The shared cluster's nodes are 8-GPU H100s: flavor h100 has nodes,
flavor a100 none.

The test stands in for one controller the cluster lacks: Kueue starts no ProvisioningRequest
controller where the cluster autoscaler's CRD is absent, so nothing would mark the admission
check Active (and the ClusterQueue would stay inactive). The test marks it Active, as that
controller does; the check's state on the Workload (Pending) is Kueue's own.

What this does not do (test_explain_sim.py, on the simulation, says why): the
ProvisioningRequest's answer and the queue position (the real cluster serves neither the
ProvisioningRequest CRD nor Kueue's visibility API), and KAI (not part of the real cluster).
The objects are tests/e2e/explain_scene.py's, put on the cluster by tests/e2e/conftest.py's
`explain_scene` (test_svg_pictures.py draws the same scene).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from tests.helpers import EXAMPLES, cli_env, run_cli
from tests.e2e.explain_scene import GPU, LQ, Scene, condition, workload_of


@pytest.fixture(scope="module")
def scene(explain_scene: Scene) -> Scene:
    """This module's scene on the real cluster (tests/e2e/conftest.py `explain_scene`)."""
    return explain_scene


def explain(scene: Scene, *args: str):
    return run_cli("explain", *args, "-n", scene.ns, env=cli_env(KUBECONFIG=scene.kubeconfig))


def kueue_message(scene: Scene) -> str:
    return condition(workload_of(scene.client, scene.ns, "train"), "QuotaReserved")["message"]


def test_kueue_text_gives_the_reason_and_the_arithmetic(scene):
    out = explain(scene, "train")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for fragment in [
        f"RayJob {scene.ns}/train",
        f"queue: LocalQueue {LQ} -> ClusterQueue {scene.cq_a} (cohort {scene.cohort})",
        f"QuotaReserved=False (Pending: {kueue_message(scene)})",
        f"admission check {scene.check}: Pending",
        f"pod set workers (2 pods), flavor {scene.h100} (candidate):",
        # 10 GPUs: h100 has 8 (6 in use), may borrow 4, and the cohort lends 2 (team-b's lending limit)
        f"{GPU}: 10 of 8 quota (6 in use), borrowing limit 4, the cohort can lend 2 more -- needs to borrow 2 from the cohort",
        f"{GPU}: 10 of 4 quota (0 in use), borrowing limit 0, the cohort can lend 0 more -- more than the whole quota",
        "it could fit: a flavor has enough quota for each pod set once quota is freed or borrowed",
    ]:
        assert fragment in text, (fragment, text)
    assert "position:" not in text  # no visibility API here: the position is unknown, not guessed
    assert out.stderr == "", out.stderr  # no warning: nothing was unreadable


def test_kueue_json_has_the_same_facts_as_fields_and_agrees_with_kueue_s_message(scene):
    out = explain(scene, "train", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["kind"], data["scheduler"]) == ("RayJob", "kueue")
    kueue = data["kueue"]
    assert (kueue["localQueue"], kueue["clusterQueue"], kueue["cohort"], kueue["state"], kueue["couldFit"]) == (LQ, scene.cq_a, scene.cohort, "pending", True)
    assert kueue["position"] is None
    # no ProvisioningRequest: the cluster serves none (and warns of nothing it could not read)
    assert kueue["admissionChecks"] == [{"name": scene.check, "state": "Pending", "message": "", "provisioningRequest": None,
                                         "provisioningState": None, "provisioningMessage": ""}]  # fmt: skip
    gpu_rows = {r["flavor"]: r for r in kueue["flavors"] if r["podSet"] == "workers" and r["resource"] == GPU}
    assert {f: (r["requested"], r["nominalQuota"], r["used"], r["potentialAvailable"], r["verdict"], r["largestNode"]) for f, r in gpu_rows.items()} == {
        scene.a100: (10, 4, 0, 4, "never-fits", 0), scene.h100: (10, 8, 6, 10, "needs-borrowing", 8),
    }  # fmt: skip
    # Kueue's own words for the same arithmetic: the most a100 could ever hold, and what h100 lacks now
    message = kueue_message(scene)
    a100, h100 = gpu_rows[scene.a100], gpu_rows[scene.h100]
    assert f"insufficient quota for {GPU} in flavor {scene.a100}, " in message and f"> maximum capacity ({a100['potentialAvailable']})" in message, message
    missing = re.search(rf"insufficient unused quota for {re.escape(GPU)} in flavor {scene.h100}, (\d+) more needed", message)
    assert missing is not None, message
    assert int(missing.group(1)) == h100["requested"] - (h100["potentialAvailable"] - h100["used"])
    assert kueue["requested"][GPU] == 10 and data["warnings"] == []
    as_yaml = yaml.safe_load(explain(scene, "train", "-o", "yaml").stdout)
    assert as_yaml["kueue"]["flavors"] == kueue["flavors"]


def test_status_of_the_pending_job_says_where_it_stands_and_points_to_explain(scene):
    explained = explain(scene, "train")
    status = run_cli("status", "train", "-n", scene.ns, env=cli_env(KUBECONFIG=scene.kubeconfig))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    # where it stands, as explain opens; then where to read why, not the per-flavor arithmetic again
    assert lines[:-1] == explained.stdout.splitlines()[: len(lines) - 1]
    assert lines[-1] == f"  why, per pod set and flavor against the quota: raybridge explain train -n {scene.ns}"
    assert f"QuotaReserved=False (Pending: {kueue_message(scene)})" in status.stdout
    assert "asks for, per pod set and flavor" in explained.stdout and "asks for" not in status.stdout
    as_json = json.loads(run_cli("status", "train", "-n", scene.ns, "-o", "json", env=cli_env(KUBECONFIG=scene.kubeconfig)).stdout)
    assert as_json["queueState"] == "pending" and as_json["explanation"] == lines


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl on PATH")
def test_explain_from_kubectl_s_output_says_what_explain_on_the_cluster_says(scene, tmp_path):
    """The objects as a user saves them with kubectl, read back with -f and no cluster: the same text and facts."""
    env = cli_env(KUBECONFIG=scene.kubeconfig)
    saved = []
    for what, where in [("rayjobs,workloads.kueue.x-k8s.io,localqueues.kueue.x-k8s.io", ["-n", scene.ns]),
                        ("clusterqueues.kueue.x-k8s.io,cohorts.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io,nodes", [])]:  # fmt: skip
        out = subprocess.run(["kubectl", "get", what, *where, "-o", "yaml"], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        path = tmp_path / f"{len(saved)}.yaml"
        path.write_text(out.stdout)
        saved += ["-f", str(path)]
    offline = {"KUBECONFIG": str(tmp_path / "none")}  # no cluster at all
    live = explain(scene, "train")
    from_files = run_cli("explain", "train", *saved, env=cli_env(**offline))
    assert from_files.returncode == 0, from_files.stderr
    assert from_files.stdout == live.stdout
    live_data = json.loads(explain(scene, "train", "-o", "json").stdout)
    file_data = json.loads(run_cli("explain", "train", *saved, "-o", "json", env=cli_env(**offline)).stdout)
    # the one difference: the cluster serves no ProvisioningRequests (so there are none), the files do not say
    assert live_data["warnings"] == [] and [w.split(" are not in ")[0] for w in file_data["warnings"]] == ["ProvisioningRequests"]
    assert {**file_data, "warnings": []} == live_data
    # -n is found from the files when NAME is in one namespace of them
    assert run_cli("explain", "train", *saved, env=cli_env(**offline)).stdout == explain(scene, "train").stdout


# (case, NAME, fragment of the one-line error); the cluster serves no KAI PodGroups, so a PodGroup is not found either
BAD_NAMES = [
    ("nothing by that name", "no-such-job", "no RayJob, RayCluster, PodGroup or Pod named 'no-such-job' in namespace {ns}"),
    ("a pod of another scheduler", "plain", "pod {ns}/plain is scheduled by default-scheduler, not kai-scheduler"),
]


@pytest.mark.parametrize("case,name,fragment", BAD_NAMES, ids=[r[0] for r in BAD_NAMES])
def test_bad_name_exits_2_with_one_line(scene, case, name, fragment):
    out = explain(scene, name)
    assert out.returncode == 2 and fragment.format(ns=scene.ns) in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_unreachable_cluster_exits_3(tmp_path):
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    out = run_cli("explain", "train", "--request-timeout", "2", env=cli_env(KUBECONFIG=str(config)))
    assert out.returncode == 3 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr, out.stderr


# --- the generated configs ------------------------------------------------------------------------
NODES = str(EXAMPLES / "cluster" / "nodes.json")


def test_submit_dry_run_accepts_the_generated_priority_classes():
    out = run_cli("queues", "generate", "--nodes", NODES, "-o", "json")
    assert out.returncode == 0, out.stderr
    classes = [o["metadata"]["name"] for o in json.loads(out.stdout)["items"] if o["kind"] == "WorkloadPriorityClass"]
    assert "interactive-preemptible" in classes
    dry = run_cli(
        "submit", "--backend", "kubernetes", "--nodes", NODES, "--queue", "team-1", "--entrypoint", "python x.py",
        "--dry-run", "--priority-class", "interactive-preemptible", "-o", "json",
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert '"kueue.x-k8s.io/priority-class": "interactive-preemptible"' in dry.stdout


def test_explain_names_who_holds_the_quota_a_pending_job_waits_for(scene):
    """Issue 40, point 8: the holder's Workload reserves 6 of the ClusterQueue's GPUs; `explain` of the pending job
    names it with what it holds (Kueue's own `status.admission`), in words and as data."""
    out = explain(scene, "train")
    assert out.returncode == 0, out.stderr
    assert "  holding that quota now, largest first:\n" in out.stdout, out.stdout
    assert f"    {scene.ns}/Workload holder ({scene.cq_a}): 6 {GPU}" in out.stdout, out.stdout
    data = json.loads(explain(scene, "train", "-o", "json").stdout)
    assert f"{scene.ns}/Workload holder ({scene.cq_a}): 6 {GPU}" in data["kueue"]["heldBy"], data["kueue"]
