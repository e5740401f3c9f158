"""The submit flow against a real cluster (KubeRay and Kueue installed), opt-in.

Set RAYBRIDGE_E2E_KUBECONFIG to a kubeconfig, and optionally
RAYBRIDGE_E2E_NAMESPACE (default "default"), RAYBRIDGE_E2E_QUEUE (a LocalQueue
there) and RAYBRIDGE_E2E_GPUS (GPUs to ask for, default 0). Skipped otherwise.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from tests.helpers import EXAMPLES, cli_env, run_cli

KUBECONFIG = os.environ.get("RAYBRIDGE_E2E_KUBECONFIG")
NAMESPACE = os.environ.get("RAYBRIDGE_E2E_NAMESPACE", "default")
QUEUE = os.environ.get("RAYBRIDGE_E2E_QUEUE")
GPUS = os.environ.get("RAYBRIDGE_E2E_GPUS", "0")

pytestmark = [
    pytest.mark.realcluster,
    pytest.mark.skipif(not KUBECONFIG, reason="RAYBRIDGE_E2E_KUBECONFIG is not set"),
]


def real(*args: str, timeout: float = 1800):
    env = cli_env(KUBECONFIG=KUBECONFIG or "", HOME=os.environ.get("HOME", "/root"))
    return run_cli(*args, env=env, timeout=timeout)


def queue_flags() -> list[str]:
    return ["--queue", QUEUE] if QUEUE else []


def test_discover_reads_the_nodes():
    out = real("discover", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["source"] == "kubernetes"


def test_submit_end_to_end_and_clean_up():
    name = f"rb-e2e-{uuid.uuid4().hex[:6]}"
    out = real("submit", str(EXAMPLES / "hello.yaml"), "-n", NAMESPACE, "--name", name, "--gpus", GPUS, *queue_flags())
    assert out.returncode == 0, out.stderr
    assert "sum of squares: 285" in out.stdout
    listed = json.loads(real("list", "-n", NAMESPACE, "-o", "json").stdout)
    assert name not in {row["name"] for row in listed}


def test_timeout_leaves_nothing_behind():
    name = f"rb-e2e-{uuid.uuid4().hex[:6]}"
    out = real("submit", "-n", NAMESPACE, "--name", name, "--timeout", "1", *queue_flags(), "--", "python", "-c", "1")
    assert out.returncode in (0, 3), out.stderr
    listed = json.loads(real("list", "-n", NAMESPACE, "-o", "json").stdout)
    assert name not in {row["name"] for row in listed}
