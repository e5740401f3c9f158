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

from tests.e2e.test_submitter_rbac import RAY, TOKEN_SECRET, _refusals, _submitter, token_spec


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


def test_the_shipped_token_rule_reads_the_named_secret_alone(cluster, tmp_path):
    """Narrowed to the Secret `authSecret` names: a token job whose cluster gets a Secret of its own (authMode: token
    alone) is refused with exit 3 naming the read, and so is one naming a Secret the namespace's owner has not made."""
    server = cluster[0]
    namespace, lq, cli = _submitter(server, tmp_path, token_auth=True)
    own = cli("submit", str(token_spec(tmp_path, secret=None)), "-n", namespace, "--queue", lq, "--timeout", "60")
    assert own.returncode == 3, own.stderr
    assert 'cannot get resource "secrets"' in own.stderr and "Traceback" not in own.stderr, own.stderr
    server.delete_object("v1", "Secret", TOKEN_SECRET, namespace)
    missing = cli("submit", str(token_spec(tmp_path)), "-n", namespace, "--queue", lq, "--timeout", "60")
    assert missing.returncode == 2, missing.stderr
    assert f"authSecret: Secret {namespace}/{TOKEN_SECRET} does not exist or holds no auth_token" in missing.stderr
    assert server.list_objects(RAY, "RayJob", namespace) == []  # refused before anything was made
