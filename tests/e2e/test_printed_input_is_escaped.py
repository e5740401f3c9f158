"""What is read from input and printed can add no line, no YAML document and no terminal command.

A node list whose node names hold a line break and a YAML document, an escape sequence or a
Unicode line separator: `queues generate` prints them escaped in its comment lines (the output
holds exactly the objects of a clean node list), `discover` prints them escaped in its table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from raybridge.core.printable import one_line
from tests.helpers import EXAMPLES, run_cli

INJECTED = (
    "evil\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwn}\n"
    "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
    "subjects: [{kind: Group, name: 'system:authenticated'}]\n#"
)
HOSTILE_NAMES = [INJECTED, "red\x1b[31m\x1b]0;title\x07", "a\u2028b\u2029c\x85d\re", "rtl\u202eevil"]


def _nodes_file(tmp_path: Path, names: list[str]) -> str:
    document = json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())
    for item, name in zip(document["items"], names):
        item["metadata"]["name"] = name
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.parametrize("flags", [[], ["--kai"]], ids=["kueue", "kai"])
def test_queues_generate_prints_hostile_node_names_escaped_in_its_comments(tmp_path: Path, flags: list[str]) -> None:
    clean = run_cli("queues", "generate", "--nodes", str(EXAMPLES / "cluster" / "nodes.json"), *flags)
    hostile = run_cli("queues", "generate", "--nodes", _nodes_file(tmp_path, HOSTILE_NAMES), *flags)
    assert clean.returncode == hostile.returncode == 0, hostile.stderr
    kinds = [doc["kind"] for doc in yaml.safe_load_all(hostile.stdout) if doc]
    assert kinds == [doc["kind"] for doc in yaml.safe_load_all(clean.stdout) if doc]
    header = hostile.stdout.split("\n")[: hostile.stdout.count("\n# ") + 1]
    assert all(line.startswith("# ") for line in header), header
    assert one_line(INJECTED) in hostile.stdout
    assert not set("\x1b\x07\r\x85\u2028\u2029\u202e") & set(hostile.stdout)


def test_discover_prints_hostile_node_names_escaped_in_its_table(tmp_path: Path) -> None:
    out = run_cli("discover", "--nodes", _nodes_file(tmp_path, HOSTILE_NAMES))
    assert out.returncode == 0, out.stderr
    assert not set("\x1b\x07\r\x85\u2028\u2029\u202e") & set(out.stdout + out.stderr)
    assert "ClusterRoleBinding" not in "".join(line.split()[0] for line in out.stdout.splitlines())  # never a row of its own
    assert one_line(INJECTED) in out.stdout


# (case, text read, printed)
ESCAPES = [
    ("plain text stays as it is", "node-1 é 漢字", "node-1 é 漢字"),
    ("line feed", "a\nb", "a\\nb"),
    ("carriage return and tab", "a\rb\tc", "a\\rb\\tc"),
    ("escape sequence", "\x1b[2J", "\\x1b[2J"),
    ("next line (YAML line break)", "a\x85b", "a\\x85b"),
    ("line and paragraph separators", "a\u2028b\u2029c", "a\\u2028b\\u2029c"),
    ("bidi override", "a\u202eb", "a\\u202eb"),
    ("no-break space is printable", "a\u00a0b", "a\u00a0b"),
    ("lone surrogate", "a\ud800b", "a\\ud800b"),
    ("noncharacters, which YAML forbids even in a comment", "a\ufffeb\uffffc", "a\\ufffeb\\uffffc"),
    ("a code point Unicode assigns nothing", "a\U000e0080b", "a\\U000e0080b"),
    ("private use is printable", "a\ue000b", "a\ue000b"),
]


@pytest.mark.parametrize("case, text, printed", ESCAPES, ids=[c[0] for c in ESCAPES])
def test_one_line_escapes_what_could_end_a_line_or_reach_the_terminal(case: str, text: str, printed: str) -> None:
    assert one_line(text) == printed, case


FORGED = "\nerror: forged"


def _forged_lines(text: str) -> list[str]:
    """Lines of raybridge's output that the input wrote: the forged line at the start of a line."""
    return [line for line in text.splitlines() if line.startswith("error: forged")]


def _working_dir(tmp_path: Path) -> str:
    folder = tmp_path / "wd"
    folder.mkdir()
    (folder / "main.py").write_text("print(1)\n")
    (folder / f"key{FORGED}.pem").write_text("k")  # left out as a secret, and named in the report
    return str(folder)


# (case, command line for a temp dir): each prints a value read from input inside a line of its own
INJECTION_SITES = [
    ("a file name in the upload report", lambda t: ["submit", "--dry-run", "--working-dir", _working_dir(t), "--", "python", "main.py"]),
    ("an unknown spec key", lambda t: ["render", _text(t, "s.yaml", f'entrypoint: x\n"foo{FORGED.encode("unicode_escape").decode()}": 1\n'), "--nodes", str(EXAMPLES / "cluster" / "nodes.json")]),
    ("a queue name", lambda t: ["render", str(EXAMPLES / "hello.yaml"), "--queue", f"team{FORGED}", "--nodes", str(EXAMPLES / "cluster" / "nodes.json")]),
    ("a --capacity key", lambda t: ["queues", "fairshare", "--queues", str(EXAMPLES / "queues" / "node-pool-a.yaml"), "--capacity", f"gpu{FORGED}=1"]),
    ("a --demand key", lambda t: ["queues", "fairshare", "--queues", str(EXAMPLES / "queues" / "node-pool-a.yaml"), "--capacity", "gpu=8",
                                  "--demand", _text(t, "d.json", json.dumps({"project-1": {f"gpu{FORGED}": 1}}))]),
    ("a cordoned node's name in queues generate's notes", lambda t: ["queues", "generate", "--nodes", _cordoned_node(t)]),
]


def _text(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _cordoned_node(tmp_path: Path) -> str:
    document = json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())
    document["items"][0]["metadata"]["name"] = f"gpu{FORGED}"
    document["items"][0].setdefault("spec", {})["unschedulable"] = True
    return _text(tmp_path, "nodes.json", json.dumps(document))


@pytest.mark.parametrize("case, argv", INJECTION_SITES, ids=[c[0] for c in INJECTION_SITES])
def test_a_line_break_read_from_input_forges_no_line(tmp_path: Path, case: str, argv) -> None:
    out = run_cli(*argv(tmp_path))
    assert "Traceback" not in out.stderr, out.stderr
    assert _forged_lines(out.stdout + "\n" + out.stderr) == [], (case, out.stderr)
    assert "\\nerror: forged" in out.stdout + out.stderr, (case, out.stderr)  # said, escaped
