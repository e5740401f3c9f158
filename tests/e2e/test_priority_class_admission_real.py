"""A PriorityClass made by a test is the one the next pod is admitted with, on the session's real cluster.

Why this module exists: the API server's Priority admission plugin resolves a pod's priorityClassName from its
informer (kubernetes v1.34.1 plugin/pkg/admission/priority/admission.go, `admitPod` through `p.lister.Get`), so a
pod made right after its class can be refused ("no PriorityClass with name ... was found"; a CI run met it), and one
made right after its class was deleted and made again at another value can be admitted at the old value (the
adjuster's tests do that to change the placeholders' priority). testcluster/client.py `create_priority_class`
returns only once admission knows the class at its value; these tests make pods at once after it, each round.

What it deliberately does not do: check raybridge (the adjuster's tests rely on this helper).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.realtime  # the API server's informer delivers in real time

ROUNDS = 10


def _admitted_priority(admin: Any, class_name: str) -> int:
    """The priority a pod naming `class_name` is admitted with (a server-side dry run: every admission, nothing kept)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "admitted", "namespace": "default"},
           "spec": {"priorityClassName": class_name, "containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
    return int(admin.create_object(pod, dry_run=True)["spec"]["priority"])


def test_a_new_priority_class_admits_a_pod_made_at_once(real_admin: tuple[Any, str]) -> None:
    admin, _ = real_admin
    names = [f"fresh-{uuid.uuid4().hex[:8]}" for _ in range(ROUNDS)]
    try:
        for value, name in enumerate(names, start=1):
            admin.create_priority_class(name, value)
            assert _admitted_priority(admin, name) == value
    finally:
        for name in names:
            _delete_quietly(admin, name)


def test_a_priority_class_made_again_at_another_value_gives_the_next_pod_the_new_value(real_admin: tuple[Any, str]) -> None:
    admin, _ = real_admin
    name = f"remade-{uuid.uuid4().hex[:8]}"
    try:
        for value in range(-ROUNDS, 0):
            _delete_quietly(admin, name)
            admin.create_priority_class(name, value, preemptionPolicy="Never")
            assert _admitted_priority(admin, name) == value
    finally:
        _delete_quietly(admin, name)


def _delete_quietly(admin: Any, name: str) -> None:
    if admin.get_object("scheduling.k8s.io/v1", "PriorityClass", name) is not None:
        admin.delete_object("scheduling.k8s.io/v1", "PriorityClass", name)
