"""Input that used to end in `internal error` (exit 1) is refused with exit 2 and a message naming what is wrong.

Quantities that overflow Decimal, integers over Python's 4,300-digit bound, JSON and YAML nested
thousands of levels deep, node labels given as a string, NaN and infinite numbers, a queue
hierarchy 1,000 levels deep, counts of GPUs and replicas no Kubernetes field holds, labels that
are lists: each row runs the command a user would and checks the exit status and the message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.e2e.hostile_files import NODES, kai_pod_files, nodes_file, queues_file, set_allocatable, text_file
from tests.helpers import run_cli

Case = Callable[[Path], list[str]]

# (case, the command line for a temp dir, expected exit status, a fragment of the message)
CASES: list[tuple[str, Case, int, str]] = [
    ("memoryPerGpu that overflows Decimal",
     lambda t: ["plan", text_file(t, "s.yaml", "entrypoint: x\ngpus: 1\nmemoryPerGpu: 1e99999999\n"), "--nodes", str(NODES)], 2, "memoryPerGpu"),
    ("memoryPerGpu of 1e50 bytes",
     lambda t: ["plan", text_file(t, "s.yaml", "entrypoint: x\ngpus: 1\nmemoryPerGpu: 1e50\n"), "--nodes", str(NODES)], 2, "memoryPerGpu"),
    ("an integer of 5,000 digits in the spec",
     lambda t: ["plan", text_file(t, "s.yaml", "entrypoint: x\ngpus: " + "9" * 5000 + "\n"), "--nodes", str(NODES)], 2, "4300 digits"),
    ("an integer of 5,000 digits in a JSON node list",
     lambda t: ["discover", "--nodes", text_file(t, "n.json", '{"kind": "List", "items": [], "x": ' + "9" * 5000 + "}")], 2, "4300 digits"),
    ("JSON nested 200,000 deep",
     lambda t: ["discover", "--nodes", text_file(t, "n.json", "[" * 200_000 + "]" * 200_000)], 2, "nested more than"),
    # one space a level: 2,800 levels stay within the 4 MiB raybridge reads as YAML (and beyond libyaml's own bound)
    ("YAML nested 2,800 deep",
     lambda t: ["plan", text_file(t, "s.yaml", "a:\n" + "".join(" " * i + "- \n" for i in range(1, 2800))), "--nodes", str(NODES)], 2, "nested more than"),
    ("node labels given as a string",
     lambda t: ["queues", "generate", "--nodes", nodes_file(t, "n.json", lambda n: n["metadata"].__setitem__("labels", "a=b"))], 0, ""),
    ("NaN allocatable",
     lambda t: ["queues", "generate", "--nodes", nodes_file(t, "n.json", set_allocatable("cpu", float("nan")))], 2, "not finite"),
    ("infinite allocatable",
     lambda t: ["discover", "--nodes", nodes_file(t, "n.json", set_allocatable("memory", float("inf")))], 2, "not finite"),
    ("a queue hierarchy 1,000 deep",
     lambda t: ["queues", "fairshare", "--capacity", "gpu=8", "--queues",
                queues_file(t, "q.yaml", [{"name": f"q{i}", "quota": 0, "parent": f"q{i - 1}" if i else None} for i in range(1000)])], 0, ""),
    ("a node list item whose kind is a mapping",
     lambda t: ["discover", "--nodes", text_file(t, "n.yaml", "kind: List\nitems:\n- kind: {a: 1}\n  metadata: {name: x}\n")], 2, "a kind that is a dict"),
    ("a pod list item whose kind is a list",
     lambda t: ["adjuster", "plan", "--pods", text_file(t, "p.yaml", "kind: List\nitems:\n- kind: [Pod]\n  metadata: {name: x}\n")], 2, "a kind that is a list"),
    ("a kubeconfig whose contexts is a number, named by --kubeconfig",
     lambda t: ["render", "examples/hello.yaml", "--kubeconfig", text_file(t, "kc", "apiVersion: v1\nclusters: []\ncontexts: 5\nusers: []\n")], 2, "cannot be loaded"),
    ("a kubeconfig whose contexts is a number, with --nodes: offline, the kubeconfig unread",
     lambda t: ["render", "examples/hello.yaml", "--nodes", str(NODES), "--kubeconfig", text_file(t, "kc", "contexts: 5\n")], 0, ""),
    ("PyYAML's !!timestamp on a text that is none",
     lambda t: ["plan", text_file(t, "s.yaml", "name: !!timestamp x\nentrypoint: x\n"), "--nodes", str(NODES)], 2, "line 1, column 7: 'x' is not a valid timestamp"),
    ("PyYAML's !!bool on a text that is none",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\ngpus: !!bool x\n"), "--nodes", str(NODES)], 2, "line 2, column 7: 'x' is not a valid bool"),
    ("PyYAML's !!int on an empty text (found by the property suite)",
     lambda t: ["plan", text_file(t, "s.yaml", "0: !!int\n"), "--nodes", str(NODES)], 2, "'' is not a valid int"),
    ("cpusPerGpu of 1e-31: a 0m request",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\ngpus: 1\ngpuVendor: amd\ncpusPerGpu: 1e-31\n"), "--nodes", str(NODES)], 2, "below 1m"),
    ("memoryPerGpu of 1e-30: a 0 request",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\ngpus: 1\ngpuVendor: amd\nmemoryPerGpu: '1e-30'\n"), "--nodes", str(NODES)], 2, "below 1 byte"),
    ("a GPU memory label of a Unicode digit",
     lambda t: ["discover", "--nodes", nodes_file(t, "n.json", lambda n: n["metadata"]["labels"].__setitem__("amd.com/gpu.vram", "²"))], 0, ""),
    ("memoryPerGpu of 1.0e-31, a YAML float: read as its text is",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\ngpus: 1\ngpuVendor: amd\nmemoryPerGpu: 1.0e-31\n"), "--nodes", str(NODES)], 2, "memoryPerGpu: quantity out of range"),
    ("cpu of 1.0e-31 for the head, a YAML float",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\nhead: {cpu: 1.0e-31}\n"), "--nodes", str(NODES)], 2, "head.cpu: quantity out of range"),
    ("gpus of 10^40 with render --no-ray",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\ngpus: 10000000000000000000000000000000000000000\n"), "--no-ray", "--nodes", str(NODES)], 2, "gpus: "),
    ("--gpus-per-replica 1e40 for a plain job",
     lambda t: ["render", "--entrypoint", "x", "--no-ray", "--kind", "job", "--gpus-per-replica", "1e40", "--nodes", str(NODES)], 2, "gpusPerReplica: "),
    ("memoryPerGpu of 1Ei on 16 GPUs: a request above 2^63-1 bytes",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\nray: false\ngpus: 16\ngpuVendor: nvidia\nmemoryPerGpu: 1Ei\n"),
                "--nodes", str(NODES)], 2, "above 2^63-1"),
    ("cpusPerGpu of 1e300 on one GPU: a request above 2^63-1 cores",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\nray: false\ngpus: 1\ngpuVendor: nvidia\ncpusPerGpu: 1.0e+300\n"),
                "--nodes", str(NODES)], 2, "above 2^63-1"),
    ("replicas of 10^40 for a service: a Deployment holds an int32",
     lambda t: ["render", "--entrypoint", "x", "--no-ray", "--kind", "service", "--replicas", "10000000000000000000000000000000000000000", "--nodes", str(NODES)], 2, "replicas: "),
    ("maxRunSeconds beyond Kueue's int32: Kueue would drop the limit",
     lambda t: ["render", text_file(t, "s.yaml", "entrypoint: x\nmaxRunSeconds: 2147483648\n"), "--queue", "q", "--nodes", str(NODES)], 2, "maxRunSeconds: "),
    ("a KAI pod whose queue label is a list",
     lambda t: ["explain", "p", "-f", kai_pod_files(t, ["a"]), "-f", str(NODES)], 0, ""),
    ("a KAI pod whose queue label is a mapping, as JSON",
     lambda t: ["explain", "pg", "-f", kai_pod_files(t, {"a": 1}), "-f", str(NODES), "-o", "json"], 0, ""),
]


@pytest.mark.parametrize("case, argv, status, fragment", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_refused_or_read_never_an_internal_error(tmp_path: Path, case: str, argv: Case, status: int, fragment: str) -> None:
    out = run_cli(*argv(tmp_path), timeout=120)
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr, (case, out.stderr[-500:])
    assert out.returncode == status, (case, out.stderr[-500:])
    assert fragment in out.stderr, (case, out.stderr[-500:])
