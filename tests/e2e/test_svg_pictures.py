"""`queues fairshare -o svg` and `explain -o svg` as a user runs them: valid SVG on stdout, input escaped, bad values exit 2.

The explain cases run against the scenes of test_explain.py (a RayJob the real Kueue leaves pending, on the
session's cluster: tests/e2e/conftest.py's `explain_scene`) and test_explain_sim.py (a KAI pod over its queue's fair
share, on a real API server of this module's own with KAI's CRDs: tests/e2e/explain_sim_scene.py's `scene_stack`
without Kueue), plus a PodGroup whose scheduling message carries markup and a terminal escape, as a hostile or
broken controller could write it. Each scene is set up for this module on its own.
What it does not do: the Kueue part of test_explain_sim.py's scene (queue positions, ProvisioningRequests), which
draws nothing of its own here.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Iterator

import pytest

from raybridge.queues.decision.queue_svg import fair_share_chart
from raybridge.core.svg import render
from raybridge.queues.fairshare import file_fair_share
from tests.e2e.explain_scene import Scene
from tests.e2e.explain_sim_scene import NOW, NS, Scene as KaiScene, scene_stack
from tests.helpers import EXAMPLES, cli_env, run_cli
from tests.pictures import check_bars, keep, rasterise

pytestmark = pytest.mark.xdist_group("svg-pictures")  # one KAI stack for the module's tests

SVG = "{http://www.w3.org/2000/svg}"
POOL_A = str(EXAMPLES / "queues" / "node-pool-a.yaml")
CAPACITY = "gpu=40,cpu=64000m,memory=512000M"
MESSAGE = '<script>alert(1)</script> & "quotes" \x1b[31m'


def texts(svg: str) -> list[str]:
    return [el.text or "" for el in ET.fromstring(svg).iter() if el.tag in (f"{SVG}text", f"{SVG}title")]


def test_fairshare_svg_is_the_chart_of_the_same_numbers_and_draws_its_bars():
    out = run_cli("queues", "fairshare", "--queues", POOL_A, "--capacity", CAPACITY, "-o", "svg")
    assert out.returncode == 0, out.stderr
    root = ET.fromstring(out.stdout)
    assert root.tag == f"{SVG}svg"
    assert {"department-a", "project-1", "project-2", "project-3"} <= set(texts(out.stdout))
    chart = fair_share_chart(file_fair_share(POOL_A, CAPACITY).result)
    assert out.stdout == render(chart)
    keep("fairshare-node-pool-a", out.stdout)
    assert check_bars(chart, rasterise(out.stdout)) >= 20


# (case, arguments, fragment of the one-line error)
BAD = [
    ("an output the command does not write", ["--queues", POOL_A, "--capacity", CAPACITY, "-o", "png"], "invalid choice: 'png'"),
    ("a capacity that is no quantity", ["--queues", POOL_A, "--capacity", "gpu=lots", "-o", "svg"], "gpu=lots"),
    ("a queue named <script>", ["--queues", "SCRIPT", "--capacity", "gpu=4", "-o", "svg"], "queue <script>: metadata.name must be a DNS-1123"),
]


@pytest.mark.parametrize("case,args,fragment", BAD, ids=[c[0] for c in BAD])
def test_fairshare_svg_bad_values_exit_2_and_write_nothing(tmp_path, case, args, fragment):
    script = tmp_path / "script.yaml"
    script.write_text('apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: "<script>"}\n'
                      "spec: {resources: {gpu: {quota: 2, limit: -1, overQuotaWeight: 1}}}\n")  # fmt: skip
    out = run_cli("queues", "fairshare", *[str(script) if a == "SCRIPT" else a for a in args])
    assert out.returncode == 2 and fragment in out.stderr, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def scene(explain_scene: Scene) -> Scene:
    """test_explain.py's scene on the real cluster, this module's own (tests/e2e/conftest.py `explain_scene`)."""
    return explain_scene


@pytest.fixture(scope="module")
def explain_sim_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KaiScene]:
    """test_explain_sim.py's KAI objects on a stack of this module's own (no Kueue: nothing here draws its part)."""
    with scene_stack(tmp_path_factory.mktemp("explain"), kueue=False) as scene:
        yield scene


@pytest.fixture(scope="module")
def cluster(explain_sim_cluster: KaiScene) -> KaiScene:
    return explain_sim_cluster


@pytest.fixture(scope="module")
def hostile_pod_group(cluster):
    cluster.client.create_object({
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg-hostile", "namespace": NS},
        "spec": {"minMember": 1, "queue": "team-b"},
        "status": {"phase": "Pending", "schedulingConditions": [
            {"type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True", "lastTransitionTime": NOW,
             "reasons": [{"reason": "OverLimit", "message": MESSAGE}]}]},
    })  # fmt: skip
    return "pg-hostile"


def explain_svg(cluster, name):
    return run_cli("explain", name, "-n", NS, "-o", "svg", env=cli_env(KUBECONFIG=cluster.kubeconfig))


def highlighted_labels(svg: str) -> list[str]:
    """Row labels drawn in bold (the highlighted path), in order."""
    rows = [g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "row"]
    return [t.text or "" for g in rows for t in g.iter(f"{SVG}text") if t.get("font-weight") == "bold"]


def test_explain_svg_of_a_kai_pod_highlights_its_queue_path(cluster):
    out = explain_svg(cluster, "notebook-0")
    assert out.returncode == 0, out.stderr
    keep("explain-kai-pod", out.stdout)
    shown = texts(out.stdout)
    assert highlighted_labels(out.stdout) == ["research", "team-a"]  # team-b is drawn, not highlighted
    assert "team-b" in shown and "Why it waits" in shown
    assert any("queue team-a is over its fair share of 4 GPUs: 6 allocated" in t for t in shown)
    assert rasterise(out.stdout)[:8] == b"\x89PNG\r\n\x1a\n"


def test_explain_svg_of_a_kueue_job_shows_its_cohort_path_and_flavors(scene):
    """On the real cluster: the RayJob the real Kueue leaves pending in test_explain.py's cohort."""
    out = run_cli("explain", "train", "-n", scene.ns, "-o", "svg", env=cli_env(KUBECONFIG=scene.kubeconfig))
    assert out.returncode == 0, out.stderr
    keep("explain-kueue-rayjob", out.stdout)
    # the path, and the pod set that does not fit in each flavor (the head fits: drawn, not highlighted)
    assert highlighted_labels(out.stdout) == [
        f"cohort {scene.cohort}", f"ClusterQueue {scene.cq_a}", f"flavor {scene.a100}, pod set workers", f"flavor {scene.h100}, pod set workers",
    ]  # fmt: skip
    shown = texts(out.stdout)
    assert any("borrows from the cohort" in t for t in shown)  # the row of the flavor it needs to borrow in
    assert any("QuotaReserved=False" in t for t in shown)  # Kueue's own reason under the picture
    assert not any("needs to borrow 2 from the cohort" in t for t in shown)  # the sentence the bars show is not repeated


def test_explain_svg_escapes_what_the_cluster_wrote(cluster, hostile_pod_group):
    out = explain_svg(cluster, hostile_pod_group)
    assert out.returncode == 0, out.stderr
    keep("explain-hostile", out.stdout)
    root = ET.fromstring(out.stdout)
    assert not [el for el in root.iter() if "script" in el.tag]
    assert "<script>" not in out.stdout and "\x1b" not in out.stdout
    words = " ".join(" ".join(texts(out.stdout)).split())  # the notes are wrapped to the picture's width
    assert '<script>alert(1)</script> & "quotes" \\x1b[31m' in words


def test_explain_svg_bad_name_exits_2(cluster):
    out = explain_svg(cluster, "no-such-job")
    assert out.returncode == 2 and "no RayJob, RayCluster, PodGroup or Pod named 'no-such-job'" in out.stderr
    assert out.stdout == ""
