"""`check` against the session's real cluster (testcluster: kube-apiserver, KubeRay v1.6.1, Kueue v0.17.0).

Why this module exists: `check` is what a user runs before the first submit; each row must say what the
real programs serve (API versions, the RayJob CRD's fields, the operators' releases from their Deployments),
and a missing queue or priority class must be named as `submit` would name it. A broken API server is
tested with every other command in test_unreachable.py; a user who may not read the operator's Deployment
in test_submitter_rbac.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.cluster_state import fresh_queue
from tests.helpers import cli_env, run_cli


def check(admin: tuple[Any, str], *args: str) -> Any:
    return run_cli("check", *args, env=cli_env(KUBECONFIG=admin[1]), timeout=120)


def test_check_shows_the_releases_and_the_bound_and_exits_0_when_nothing_is_missing(real_admin):
    namespace, lq, cq = fresh_queue(real_admin[0])
    out = check(real_admin, "-n", namespace, "--queue", lq)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "DETAIL"]
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{3,}", line, maxsplit=2) for line in lines[1:])}
    assert rows["API server"][1].endswith("(Kubernetes v1.34.4)")
    assert rows["namespace"] == ["ok", namespace]
    assert rows["KubeRay API"] == ["ok", "ray.io v1, v1alpha1"]
    assert rows["RayJob CRD"] == ["ok", "knows preRunningDeadlineSeconds, authOptions"]
    assert rows["KubeRay operator"] == ["ok", "v1.6.1 (Deployment kuberay-system/kuberay-operator)"]
    assert rows["Kueue API"] == ["ok", "kueue.x-k8s.io v1beta2, v1beta1"]
    assert rows["Kueue controller"] == ["ok", "v0.17.0 (Deployment kueue-system/kueue-controller-manager)"]
    assert rows["queue"] == ["ok", f"LocalQueue {lq} -> ClusterQueue {cq}"]
    assert rows["orphan bound"][1] == (
        "raybridge gone: the RayJob fails within 30m; evicted after that: the readmitted RayJob fails within 30m "
        "of its new start (preRunningDeadlineSeconds)"
    )
    assert out.stderr == ""


def test_check_names_what_is_missing_as_submit_would_and_exits_1(real_admin):
    namespace, lq, _ = fresh_queue(real_admin[0])
    out = check(real_admin, "-n", namespace, "--queue", "no-such-queue", "--priority-class", "no-such-class", "--orphan-timeout", "600", "-o", "json")
    assert out.returncode == 1, out.stderr
    found = json.loads(out.stdout)
    assert found["ready"] is False and found["namespace"] == namespace
    missing = {row["check"]: row["detail"] for row in found["checks"] if row["status"] == "missing"}
    assert set(missing) == {"queue", "priority class"}, missing
    assert missing["queue"] == f"LocalQueue no-such-queue does not exist in namespace {namespace} (LocalQueues there: {lq})"
    assert missing["priority class"].startswith("WorkloadPriorityClass no-such-class does not exist (classes: "), missing
    assert "fails within 10m" in next(r["detail"] for r in found["checks"] if r["check"] == "orphan bound")


def test_check_of_a_namespace_that_does_not_exist(real_admin):
    out = check(real_admin, "-n", "no-such-namespace")
    assert out.returncode == 1, out.stderr
    rows = [re.split(r"\s{3,}", line, maxsplit=2) for line in out.stdout.splitlines()[1:]]
    assert [row for row in rows if row[1] == "missing"] == [["namespace", "missing", "no-such-namespace does not exist"]], out.stdout


def test_check_reads_the_namespace_queue_and_priority_class_a_spec_names(real_admin, tmp_path):
    namespace, lq, cq = fresh_queue(real_admin[0])
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: j\nnamespace: {namespace}\nqueue: {lq}\npriorityClass: no-such-class\nentrypoint: python x.py\n")
    out = check(real_admin, str(spec), "-o", "json")
    assert out.returncode == 1, out.stderr
    found = json.loads(out.stdout)
    assert found["namespace"] == namespace
    rows = {row["check"]: row for row in found["checks"]}
    assert rows["priority class"]["status"] == "missing", rows
    assert rows["queue"] == {"check": "queue", "status": "ok", "detail": f"LocalQueue {lq} -> ClusterQueue {cq}"}, rows
    flags_win = check(real_admin, str(spec), "-n", "no-such-namespace", "-o", "json")
    assert flags_win.returncode == 1 and json.loads(flags_win.stdout)["namespace"] == "no-such-namespace", flags_win.stdout
