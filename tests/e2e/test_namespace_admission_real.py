"""A namespace made by a test takes a pod at once, on the session's real cluster (Kueue's pod integration on).

Why this module exists: Kueue's pod webhook reads the pod's namespace from its manager's cache (kueue v0.17.0
pkg/controller/jobs/pod/pod_webhook.go `Default`, through `w.client.Get`), so a pod made right after its namespace can
be refused with `admission webhook "mpod.kb.io" denied the request: Namespace "<name>" not found` (a whole run here met
it). testcluster/client.py `create_namespace` returns only once a pod in the namespace passes admission; these tests
make pods at once after it, each round.

What it deliberately does not do: check raybridge (tests that make pods in a namespace of their own rely on this helper).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.realtime  # Kueue's cache is filled by its watch, in real time

ROUNDS = 10


def test_a_new_namespace_takes_a_pod_made_at_once(real_admin: tuple[Any, str]) -> None:
    admin, _ = real_admin
    names = [f"fresh-ns-{uuid.uuid4().hex[:8]}" for _ in range(ROUNDS)]
    try:
        for name in names:
            admin.create_namespace(name)
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "at-once", "namespace": name},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
            assert admin.create_object(pod)["metadata"]["namespace"] == name
    finally:
        for name in names:
            if admin.get_object("v1", "Namespace", name) is not None:
                admin.delete_object("v1", "Namespace", name)
