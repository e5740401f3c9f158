"""Input that was read silently into a wrong answer is refused, or read as the cluster reads it.

KAI's gpu-fraction parser (Go's strconv.ParseFloat) refuses "0.5\\n", " 0.5" and non-ASCII digits
and takes hex floats and '_' between digits (core/go_number.py);
`queues fairshare` refuses quotas below -1, negative or astronomically large weights (they made
fair shares negative or left every GPU unassigned) and a capacity that is not a finite number
(it printed `Infinity`, which is not JSON); a node with negative allocatable adds no negative
amount to generated quotas. What a command prints for input that holds what no number or name
should (a Queue term of "nan", a node name with U+FFFE) is still JSON or YAML its readers parse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from raybridge.core.views import read_pod
from raybridge.kai.queue import pod_amounts
from tests.e2e.hostile_files import NODES, kai_pod_files, nodes_file, queues_file, set_allocatable
from tests.helpers import run_cli

# (case, gpu-fraction annotation, GPUs KAI counts)
FRACTIONS = [
    ("a plain fraction", "0.5", 0.5),
    ("a trailing newline", "0.5\n", 0.0),
    ("a leading space", " 0.5", 0.0),
    ("Arabic-Indic digits", "\u0660.\u0665", 0.0),
    ("full-width digits", "\uff10.\uff15", 0.0),
    # Go's ParseFloat takes '_' between digits in base 10 too (src/strconv/atof.go readFloat, atoi.go
    # underscoreOK; atof_test.go: "1_23.50_0_0e+1_2" is 1.235e+14), so KAI counts these:
    ("an underscore between digits", "0.2_5", 0.25),
    ("a hex float", "0x1p-2", 0.25),
    ("an underscore after a point", "0._25", 0.0),
]


@pytest.mark.parametrize("case, annotation, gpus", FRACTIONS, ids=[f[0] for f in FRACTIONS])
def test_a_gpu_fraction_is_read_as_kai_reads_it(case: str, annotation: str, gpus: float) -> None:
    pod = {"metadata": {"annotations": {"gpu-fraction": annotation}}, "spec": {"containers": [{"resources": {}}]}}
    assert pod_amounts(read_pod(pod)).gpu == gpus, case


# (case, queues, capacity, fragment of the refusal)
REFUSED_FAIRSHARE = [
    ("a quota of -5", [{"name": "a", "quota": -5}, {"name": "b"}], "gpu=10", "quota must be -1 or at least 0"),
    ("a negative weight", [{"name": "a", "weight": -1e308}, {"name": "b"}], "gpu=10", "overQuotaWeight"),
    ("two weights of 1e308", [{"name": "a", "weight": 1e308}, {"name": "b", "weight": 1e308}], "gpu=10", "out of range"),
    ("a capacity of 1e400 GPUs", [{"name": "a"}], "gpu=1e400", "--capacity"),
    ("a capacity of 2^63-1 GPUs: float64 is not exact there", [{"name": "a", "quota": 40}], "gpu=9223372036854775807", "at most 2^53 devices"),
]


@pytest.mark.parametrize("case, queues, capacity, fragment", REFUSED_FAIRSHARE, ids=[r[0] for r in REFUSED_FAIRSHARE])
def test_fairshare_refuses_what_would_make_its_answer_wrong(tmp_path: Path, case: str, queues: list[dict], capacity: str, fragment: str) -> None:
    out = run_cli("queues", "fairshare", "--queues", queues_file(tmp_path, "q.yaml", queues), "--capacity", capacity, "-o", "json")
    assert out.returncode == 2, (case, out.stdout[-300:], out.stderr)
    assert fragment in out.stderr and "Infinity" not in out.stdout, case


@pytest.mark.parametrize("flags", [[], ["--kai"]], ids=["kueue", "kai"])
def test_negative_allocatable_adds_no_negative_quota(tmp_path: Path, flags: list[str]) -> None:
    clean = run_cli("queues", "generate", "--nodes", str(NODES), *flags, "-o", "json")
    negative = run_cli("queues", "generate", "--nodes", nodes_file(tmp_path, "n.json", set_allocatable("memory", "-9000Gi")), *flags, "-o", "json")
    assert clean.returncode == negative.returncode == 0, negative.stderr
    assert "-9000Gi" in negative.stderr and "counted as 0" in negative.stderr
    assert _negative_amounts(json.loads(negative.stdout)) == []


def _negative_amounts(value: object) -> list[object]:
    """Every negative number or quantity string in the objects, but KAI's `-1` (no limit)."""
    found: list[object] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and item < -1:
            found.append(item)
        elif isinstance(item, str) and item[:1] == "-" and item[1:2].isdigit():
            found.append(item)
    return found


def _strict_json(text: str) -> Any:
    """JSON as the standard defines it: NaN and Infinity are no JSON numbers (Python's json takes them by default)."""
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def _yaml_documents(text: str) -> Any:
    return list(yaml.safe_load_all(text))


def _node_named(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda node: node["metadata"].__setitem__("name", name)


# (case, the command line for a temp dir, the reader its output must satisfy)
PARSEABLE = [
    ("explain -o json of a Queue whose terms are the texts nan, inf and 1e400",
     lambda t: ["explain", "p", "-f", kai_pod_files(t, gpu_terms={"quota": "nan", "limit": "inf", "overQuotaWeight": "1e400"}),
                "-f", str(NODES), "-o", "json"], _strict_json),
    ("explain -o json of a Queue whose quota is the text Infinity",
     lambda t: ["explain", "pg", "-f", kai_pod_files(t, gpu_terms={"quota": "Infinity"}), "-f", str(NODES), "-o", "json"], _strict_json),
    ("queues generate -o yaml of a node named with U+FFFE",
     lambda t: ["queues", "generate", "--nodes", nodes_file(t, "n.json", _node_named("node\ufffe")), "-o", "yaml"], _yaml_documents),
    ("queues generate --kai -o yaml of a node named with U+FFFF",
     lambda t: ["queues", "generate", "--kai", "--nodes", nodes_file(t, "n.json", _node_named("node\uffff")), "-o", "yaml"], _yaml_documents),
]


@pytest.mark.parametrize("case, argv, parse", PARSEABLE, ids=[p[0] for p in PARSEABLE])
def test_what_is_printed_parses_whatever_the_input_held(tmp_path: Path, case: str, argv: Callable[[Path], list[str]],
                                                        parse: Callable[[str], Any]) -> None:
    out = run_cli(*argv(tmp_path))
    assert out.returncode == 0, (case, out.stderr[-500:])
    parse(out.stdout)
