"""The Ray probe against a real single-node Ray cluster started (and stopped) by this module."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import warnings
from typing import Iterator

import pytest

from raybridge.core.consts import VENDORS
from raybridge.gpu import probe_ray_cluster
from raybridge.gpu.ray_probe import _group_notes, node_names

ray = pytest.importorskip("ray")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A new local Ray head for this module (never another one on this machine); yields its GCS address."""
    if ray.is_initialized():
        pytest.skip("another Ray connection is already open in this process")
    saved = dict(os.environ)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # A new local cluster from `ray.init()` turns token auth on by default in Ray 2.52+: it sets
    # RAY_AUTH_MODE=token in this process's environment (inherited by every later subprocess of the test
    # session) and writes ~/.ray/auth_token. Say "disabled" so this module leaves neither behind.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp_dir = tempfile.mkdtemp(prefix="rbprobe-")  # short: Ray's socket paths must fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
            _temp_dir=temp_dir,
        )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **env},
    )


@pytest.mark.fresh_head
def test_probe_reuses_the_open_connection(cluster: str) -> None:
    inventory = probe_ray_cluster(timeout=60)

    assert ray.is_initialized()  # not ours to shut down
    assert ray.get(ray.remote(lambda: 41 + 1).remote()) == 42
    assert inventory.source == "ray"
    (node,) = inventory.nodes
    assert node.name == socket.gethostname()
    assert (node.vendor, node.gpus, node.eligible) == (None, 0, True)
    # Each vendor says why it found nothing, attributed to the node.
    assert {n.split(": ")[1] for n in inventory.notes} == set(VENDORS)
    assert all(n.startswith(f"{node.name}: ") for n in inventory.notes)


@pytest.mark.fresh_head
def test_probe_from_a_new_process_connects_prints_only_json_and_disconnects(cluster: str) -> None:
    result = _python(
        """
        import json, ray
        from raybridge.gpu import probe_ray_cluster
        inventory = probe_ray_cluster(ADDRESS, timeout=60)
        assert not ray.is_initialized(), "the probe left its own connection open"
        print(json.dumps(inventory.to_dict()))
        """.replace("ADDRESS", repr(cluster))
    )

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)  # stdout is exactly one JSON document
    assert document["source"] == "ray"
    assert [(n["name"], n["gpus"]) for n in document["nodes"]] == [(socket.gethostname(), 0)]
    assert all(n["Alive"] for n in ray.nodes())  # the cluster outlived the other driver


@pytest.mark.fresh_head
def test_a_node_that_does_not_answer_in_time_is_reported_not_raised(cluster: str) -> None:
    inventory = probe_ray_cluster(timeout=0)

    (node,) = inventory.nodes
    assert (node.vendor, node.gpus, node.eligible) == (None, 0, False)
    assert node.reasons == ("did not answer the GPU probe within 0s",)
    assert inventory.notes == (f"{node.name}: did not answer the GPU probe within 0s",)
    assert ray.is_initialized()


def test_the_scan_ships_by_value_to_nodes_without_raybridge() -> None:
    """What the probe sends must run where `import raybridge` fails (a stock Ray image)."""
    from ray import cloudpickle

    from raybridge.gpu.ray_probe import _scan_module_by_value
    from raybridge.gpu.scan import scan_node

    with _scan_module_by_value():
        payload = cloudpickle.dumps(scan_node)
    assert "raybridge.gpu.scan" not in cloudpickle.list_registry_pickle_by_value()

    result = _python(
        """
        import json, sys
        sys.modules["raybridge"] = None  # any import of raybridge now fails
        from ray import cloudpickle
        scan = cloudpickle.loads(sys.stdin.buffer.read())()
        print(json.dumps(scan))
        """.replace("sys.stdin.buffer.read()", repr(payload))
    )

    assert result.returncode == 0, result.stderr
    scan = json.loads(result.stdout)
    assert scan["hostname"] == socket.gethostname()
    assert {s["vendor"] for s in scan["scans"]} == set(VENDORS)


# --- naming and notes, no cluster needed ----------------------------------------------------------


def test_node_names_prefer_hostname_and_disambiguate() -> None:
    nodes = [
        {"NodeID": "aaaaaaaa1111", "NodeManagerHostname": "raycluster-head-x7", "NodeManagerAddress": "10.0.0.1"},
        {"NodeID": "bbbbbbbb2222", "NodeManagerHostname": "box", "NodeManagerAddress": "10.0.0.2"},
        {"NodeID": "cccccccc3333", "NodeManagerHostname": "box", "NodeManagerAddress": "10.0.0.2"},
        {"NodeID": "dddddddd4444", "NodeManagerHostname": "", "NodeManagerAddress": "10.0.0.4"},
    ]
    assert node_names(nodes) == {
        "aaaaaaaa1111": "raycluster-head-x7",
        "bbbbbbbb2222": "box (bbbbbbbb)",
        "cccccccc3333": "box (cccccccc)",
        "dddddddd4444": "10.0.0.4",
    }


def test_notes_are_grouped_by_text() -> None:
    notes = {
        "a": ["amd: amdsmi not installed", "nvidia: NVIDIA driver not loaded"],
        "b": ["amd: amdsmi not installed"],
        "c": ["amd: amdsmi not installed", "nvidia: NVIDIA driver not loaded"],
        "d": ["amd: amdsmi not installed"],
        "e": ["amd: amdsmi not installed", "nvidia: NVIDIA driver not loaded", "x"],
        "f": ["amd: amdsmi not installed", "nvidia: NVIDIA driver not loaded"],
    }
    assert _group_notes(notes, total=6) == [
        "amd: amdsmi not installed (all 6 nodes)",
        "nvidia: NVIDIA driver not loaded (4 nodes: a, c, e, ...)",
        "e: x",
    ]
