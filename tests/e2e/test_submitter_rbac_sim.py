"""The shipped RBAC with a token-protected Ray cluster: on kubesim, the simulated cluster.

Why simulated: every head pod of the real cluster (test_submitter_rbac.py) stands for the
session's shared Ray head, which has no token authentication, so there a call without the
token would succeed and the test could not fail. The simulated KubeRay puts a dashboard in
front of the head that refuses calls without the token of the cluster's Secret, as a Ray head
started with `RAY_AUTH_MODE=token` does: only there does a passing submit show that the shipped
`secrets get` rule (configs/rbac/submitter-token-auth.yaml, opt-in) gets raybridge the token it needs.

What this does not do: the rule's absence (exit 3, "cannot get resource secrets") and every
other rule are checked on the real cluster, in test_submitter_rbac.py.
"""

from __future__ import annotations


import pytest

from tests.e2e.test_submitter_rbac import RAY, _refusals, _submitter, token_spec


@pytest.fixture(scope="module")
def cluster(simulated_kube):
    return simulated_kube


def test_a_token_protected_cluster_works_under_the_shipped_rules(cluster, tmp_path):
    server = cluster[0]
    namespace, lq, cli = _submitter(server, tmp_path, token_auth=True)  # submitter.yaml and the opt-in submitter-token-auth.yaml
    out = cli("submit", str(token_spec(tmp_path)), "-n", namespace, "--queue", lq, "--timeout", "60")
    assert out.returncode == 0, out.stderr
    assert "behind the token" in out.stdout and _refusals(out.stderr) == [], out.stderr
    assert server.list_objects(RAY, "RayJob", namespace) == []
