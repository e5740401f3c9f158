"""The orphan bound's renewals refused for a while, on the session's real cluster (KubeRay v1.6.1, Kueue v0.17.0).

Why this module exists: every renewal is a RayJob update, which admission (Kueue's webhook, with
`failurePolicy: Fail`, or any policy) may refuse. While it does, raybridge must say once when the
RayJob will fail if no renewal gets through, try again every few seconds, say when one does, and the
job must run on to its end. A ValidatingAdmissionPolicy scoped to the test's namespace stands in for a
webhook that is down: the real API server refuses every RayJob update there, as it would with the
webhook unreachable, without touching the other tests' namespaces.

What it deliberately does not do: wait out a refusal longer than the bound (the job then fails at its
deadline, as test_release_matrix.py's orphan test shows for a dead raybridge).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.cluster_state import fresh_queue, leftovers
from tests.waits import wait_for
from tests.e2e.test_kube_eviction import Cli

POLICY_API = "admissionregistration.k8s.io/v1"


def refuse_rayjob_updates(server: Any, namespace: str) -> list[tuple[str, str]]:
    """A policy refusing every update of a RayJob's spec in `namespace` (status writes pass); what to delete after."""
    name = f"refuse-rayjob-updates-{namespace}"
    server.create_object({
        "apiVersion": POLICY_API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": ["ray.io"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["rayjobs"]}]},
            "validations": [{"expression": "object.spec == oldObject.spec", "message": "admission is down (test)"}],
        },
    })  # fmt: skip
    server.create_object({
        "apiVersion": POLICY_API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}},
    })  # fmt: skip
    return [("ValidatingAdmissionPolicyBinding", name), ("ValidatingAdmissionPolicy", name)]


@pytest.mark.realtime  # renewals come every 10 s for a 60 s bound; the refusal is held for longer than that
def test_renewals_refused_for_a_while_are_said_retried_and_the_job_runs_to_its_end(real_admin):
    server = real_admin[0]
    namespace, lq, _ = fresh_queue(server)
    run = Cli(real_admin, "submit", "-n", namespace, "--queue", lq, "--name", "refused", "--orphan-timeout", "60",
              "--", "python", "-c", "import time; print('started', flush=True); time.sleep(45); print('finished', flush=True)")  # fmt: skip
    policy: list[tuple[str, str]] = []
    try:
        run.wait_for("started")
        policy = refuse_rayjob_updates(server, namespace)
        run.wait_for("could not renew the orphan bound", where="stderr", timeout=60)
        refused_at = time.monotonic()
        time.sleep(12)  # more than a renewal interval (10 s): several tries at 5 s, all refused
        for kind, name in policy:
            server.delete_object(POLICY_API, kind, name)
        policy = []
        run.wait_for("is renewed again", where="stderr", timeout=30)
        renewed_after = time.monotonic() - refused_at
        code = run.finish(timeout=120)
    finally:
        for kind, name in policy:
            server.delete_object(POLICY_API, kind, name)
        run.kill_if_running()
    assert code == 0, run.stderr
    assert run.stdout.rstrip().endswith("finished"), run.stdout
    [warning] = [line for line in run.stderr.splitlines() if "could not renew" in line]
    assert "admission is down (test)" in warning, warning
    assert "unless a renewal gets through (trying every 5s)" in warning and "the RayJob fails in about " in warning, warning
    assert run.stderr.count("is renewed again") == 1, run.stderr
    assert renewed_after < 12 + 5 + 10, renewed_after  # the next try after the policy went, not the next interval
    assert f"deleted RayJob {namespace}/refused" in run.stderr
    wait_for(lambda: leftovers(server, namespace) == {}, timeout=60, what="nothing left")
