"""Input whose cost grew without bound (time or memory) is answered in time and memory proportional to its size.

A node claiming a billion GPUs, a 738-byte billion-laughs YAML, `/dev/zero` and a FIFO given as a
file, a GPU memory label of 1e999999: each used to take tens of seconds, gigabytes or for ever.
Each row runs the command under a wall-clock bound far above what it needs now (the rows took
25 s to for ever before) and an address-space limit, and checks the answer.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest

from raybridge.jobs.decision.sizing import even_splits
from raybridge.core.documents import MAX_YAML_CHARS
from tests.e2e.hostile_files import NODES, billion_laughs, many_nodes_file, nodes_file, text_file
from tests.helpers import ROOT, cli_env

#: Far above what any row needs (well under a second each), far below what they took before.
BOUND_SECONDS = 20
MEMORY_BYTES = 2 * 1024**3


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def run_bounded(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raybridge", *args], capture_output=True, text=True, timeout=BOUND_SECONDS,
        env=cli_env(), cwd=str(ROOT), preexec_fn=_limited,
    )  # fmt: skip


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


def _one_node_with(gpus: str) -> Callable[[dict], None]:
    def change(node: dict) -> None:
        node["status"]["allocatable"] = {"cpu": "96", "memory": "1500Gi", "nvidia.com/gpu": gpus}
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        node["metadata"]["labels"] = {}

    return change


# (case, command line for a temp dir, exit status, a fragment of stderr)
CASES = [
    ("billion laughs YAML spec", lambda t: ["plan", text_file(t, "s.yaml", billion_laughs()), "--nodes", str(NODES)], 2, "add more than 1,000,000 values"),
    ("/dev/zero as the node list", lambda t: ["discover", "--nodes", "/dev/zero"], 2, "not a regular file"),
    ("a FIFO as the spec", lambda t: ["plan", _fifo(t), "--nodes", str(NODES)], 2, "not a regular file"),
    ("/dev/zero as the kubeconfig", lambda t: ["list", "--kubeconfig", "/dev/zero"], 2, "not a regular file"),
    ("a FIFO as the kubeconfig", lambda t: ["submit", "--dry-run", "--kubeconfig", _fifo(t), "--", "python", "x.py"], 2, "not a regular file"),
    # YAML costs up to 400 bytes of memory a byte (the pure-Python loader: 800, and 15 us): past MAX_YAML_CHARS it is
    # refused before it is parsed, its JSON twin read (it took minutes and gigabytes before)
    ("a YAML node list longer than raybridge parses as YAML",
     lambda t: ["discover", "--nodes", many_nodes_file(t, "n.yaml", MAX_YAML_CHARS)], 2, "more than raybridge reads as YAML"),
    ("the same node list as JSON", lambda t: ["discover", "--nodes", many_nodes_file(t, "n.json", MAX_YAML_CHARS)], 0, ""),
    ("a GPU memory label of 1e999999",
     lambda t: ["discover", "--nodes", nodes_file(t, "n.json", lambda n: n["metadata"]["labels"].__setitem__("nvidia.com/gpu.memory", "1e999999"))], 0, ""),
]


@pytest.mark.parametrize("case, argv, status, fragment", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_costs_a_bounded_time_and_memory(tmp_path: Path, case: str, argv: Callable[[Path], list[str]], status: int, fragment: str) -> None:
    out = run_bounded(*argv(tmp_path))
    assert out.returncode == status and fragment in out.stderr, (case, out.stderr[-500:])


def _even_splits_in_a_thread(total: int, per_node: int, cap: int) -> list[str]:
    result: list[list[str]] = []
    worker = threading.Thread(target=lambda: result.append(even_splits(total, per_node, cap)), daemon=True)
    worker.start()
    worker.join(BOUND_SECONDS)
    assert result, f"even_splits({total}) did not finish within {BOUND_SECONDS}s"
    return result[0]


def test_the_even_split_advice_for_a_node_with_a_billion_gpus_is_found_by_divisors_not_a_count_down() -> None:
    prime = 1_000_000_007
    assert _even_splits_in_a_thread(prime, prime, prime) == [f"1 x {prime} = {prime}", f"{prime} x 1 = {prime}"]
    assert _even_splits_in_a_thread(12, 8, 16) == ["2 x 6 = 12", "3 x 4 = 12", "1 x 8 = 8", "2 x 8 = 16"]
