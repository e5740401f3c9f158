"""`explain NAME -f FILE`: why a job waits, from objects saved with kubectl, with no cluster at all.

The shipped example (`examples/cluster/queued.yaml`: what a cluster running the real KubeRay and
Kueue said while train-gpu waited behind finetune) is explained as the tour shows it, in words,
as data and as a picture. That reading files and reading the cluster say the same is shown
against the real cluster in test_explain.py and the simulated KAI one in test_explain_sim.py.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.helpers import EXAMPLES, cli_env, run_cli

QUEUED = str(EXAMPLES / "cluster" / "queued.yaml")
NODES = str(EXAMPLES / "cluster" / "nodes.json")
SVG = "{http://www.w3.org/2000/svg}"


def offline(*argv: str, tmp_path: Path):
    """The command with a kubeconfig that does not exist: nothing can be reached."""
    return run_cli(*argv, env=cli_env(KUBECONFIG=str(tmp_path / "no-config")))


def test_the_waiting_example_job_is_explained_from_its_files(tmp_path):
    out = offline("explain", "train-gpu", "-f", QUEUED, "-f", NODES, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        "RayJob team-a/train-gpu",
        "  deployment: Suspended; Ray job: not started",
        "  queue: LocalQueue team-a -> ClusterQueue gpu-cluster-queue",
    ]
    assert "insufficient unused quota for amd.com/gpu in flavor amd-mi300x, 8 more needed" in out.stdout
    assert "      amd.com/gpu: 16 of 24 quota (16 in use) -- waits for 8 in use to be freed (or borrowed)" in lines
    assert lines[-3:] == [
        "  it could fit: a flavor has enough quota for each pod set once quota is freed or borrowed",
        "  holding that quota now, largest first:",  # the job it waits behind, from the same file
        "    team-a/RayJob finetune (gpu-cluster-queue, priority 100): 16 amd.com/gpu",
    ]
    assert out.stderr == ""  # every object it needs is there, and no cluster is looked for
    # the job it waits behind, from the same file: admitted, its Ray cluster up
    admitted = offline("explain", "finetune", "-f", QUEUED, "-f", NODES, tmp_path=tmp_path)
    assert "  Kueue workload rayjob-finetune-75d38: admitted" in admitted.stdout.splitlines(), admitted.stdout


def test_the_example_as_data_and_as_a_picture(tmp_path):
    data = json.loads(offline("explain", "train-gpu", "-f", QUEUED, "-f", NODES, "-o", "json", tmp_path=tmp_path).stdout)
    gpu = {r["flavor"]: (r["requested"], r["nominalQuota"], r["used"], r["verdict"]) for r in data["kueue"]["flavors"]
           if r["podSet"] == "workers" and r["resource"] == "amd.com/gpu"}  # fmt: skip
    assert gpu == {"amd-mi300x": (16, 24, 16, "waits-for-quota"), "nvidia-h100": (16, 0, 0, "never-fits")}
    assert (data["namespace"], data["kueue"]["state"], data["warnings"]) == ("team-a", "pending", [])
    svg = offline("explain", "train-gpu", "-f", QUEUED, "-f", NODES, "-o", "svg", tmp_path=tmp_path).stdout
    shown = [el.text or "" for el in ET.fromstring(svg).iter(f"{SVG}text")]
    assert "16 + 16 = 32" in shown  # in use and what the job asks, stacked against the quota of 24
    assert "Why it waits" in shown and not [t for t in shown if "asks for, per pod set" in t]


def test_without_nodes_it_says_what_it_could_not_check(tmp_path):
    out = offline("explain", "train-gpu", "-f", QUEUED, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"warning: nodes are not in {QUEUED}: whether one pod fits the largest node is not checked" in out.stderr


def test_kinds_explain_does_not_read_are_left_out_with_a_note(tmp_path):
    extra = tmp_path / "more.yaml"
    extra.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "team-a"}}))
    out = offline("explain", "train-gpu", "-f", QUEUED, "-f", NODES, "-f", str(extra), tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "note: left out 1 Service: explain does not read them" in out.stderr


def _two_namespaces(tmp_path: Path) -> str:
    documents = [d for d in yaml.safe_load_all(Path(QUEUED).read_text()) if d and d["kind"] == "RayJob"]
    twin = json.loads(json.dumps(documents[0]))
    twin["metadata"]["namespace"] = "team-b"
    path = tmp_path / "twins.yaml"
    path.write_text(yaml.safe_dump_all([documents[0], twin]))
    return str(path)


def _not_objects(tmp_path: Path) -> str:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    return str(path)


def _unnamed(tmp_path: Path) -> str:
    path = tmp_path / "unnamed.yaml"
    path.write_text("kind: RayJob\nmetadata: {namespace: team-a}\n")
    return str(path)


# (case, argv after `explain`, with {q} for the example and {f} for a file the case writes, fragment of the one-line error)
BAD = [
    ("a cluster flag with files", ["train-gpu", "-f", "{q}", "--context", "prod"], None,
     "-f reads the objects from files and talks to no cluster: leave out --context"),
    ("no such file", ["train-gpu", "-f", "{q}.missing"], None, "does not exist"),
    ("items that are no objects", ["train-gpu", "-f", "{f}"], _not_objects, "an item is not a Kubernetes object (it needs a kind and metadata)"),
    ("an object without a name", ["train-gpu", "-f", "{f}"], _unnamed, "a RayJob has no metadata.name"),
    ("nothing by that name", ["nosuch", "-f", "{q}"], None, "no RayJob, RayCluster, PodGroup or Pod named 'nosuch' in namespace default of"),
    ("not in the namespace given", ["train-gpu", "-f", "{q}", "-n", "team-b"], None, "named 'train-gpu' in namespace team-b of"),
    ("the name in two namespaces", ["train-gpu", "-f", "{f}"], _two_namespaces, "'train-gpu' is in namespaces team-a, team-b of"),
]  # fmt: skip


@pytest.mark.parametrize("case,argv,make,fragment", BAD, ids=[row[0] for row in BAD])
def test_bad_input_is_one_line_and_exit_2(case, argv, make, fragment, tmp_path):
    written = make(tmp_path) if make else ""
    out = offline("explain", *[a.format(q=QUEUED, f=written) for a in argv], tmp_path=tmp_path)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1 and fragment in errors[0], out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr


def _edit(kind: str, change):
    """The example's objects with every object of `kind` changed by `change`."""

    def edited(items: list) -> list:
        for item in items:
            if item.get("kind") == kind:
                change(item)
        return items

    return edited


def _set(path: tuple, value):
    def change(item: dict) -> None:
        target = item
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


# (case, edit of the example's objects, what the explanation still says) -- fields of the wrong type in a user's
# files read as absent: the explanation goes on with what is left, never an internal error
MALFORMED = [
    ("a resource group that is text", _edit("ClusterQueue", _set(("spec", "resourceGroups"), ["gpu"])),
     "  asks for:"),
    ("a flavor entry that is text", _edit("ClusterQueue", _set(("spec", "resourceGroups", 0, "flavors"), ["amd-mi300x"])),
     "  asks for:"),
    ("a flavor's resources that are text", _edit("ClusterQueue", _set(("spec", "resourceGroups", 0, "flavors", 0, "resources"), "gpu")),
     "RayJob team-a/train-gpu"),
    ("a ClusterQueue spec that is a list", _edit("ClusterQueue", _set(("spec",), [])), "RayJob team-a/train-gpu"),
    ("a ResourceFlavor spec that is text", _edit("ResourceFlavor", _set(("spec",), "x")), "RayJob team-a/train-gpu"),
    ("a Workload status that is text", _edit("Workload", _set(("status",), "pending")), "RayJob team-a/train-gpu"),
    ("RayJob labels that are a list", _edit("RayJob", _set(("metadata", "labels"), ["kueue.x-k8s.io/queue-name"])),
     "Kueue workload rayjob-train-gpu-cc481: pending"),
    ("a LocalQueue's ClusterQueue that is a list", _edit("LocalQueue", _set(("spec", "clusterQueue"), ["gpu-cluster-queue"])),
     "Kueue workload rayjob-train-gpu-cc481: pending"),
]


@pytest.mark.parametrize("case,edit,says", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_objects_in_the_files_read_as_absent(case, edit, says, tmp_path):
    items = [doc for doc in yaml.safe_load_all(Path(QUEUED).read_text()) if doc]  # a YAML stream, as kubectl prints it
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": edit(items)}))
    out = offline("explain", "train-gpu", "-f", str(bad), "-f", NODES, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr
    assert says in out.stdout, out.stdout
