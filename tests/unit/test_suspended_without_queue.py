"""A RayJob Kueue suspended although it names no queue (jobs/creation.py `refuse_if_suspended_without_queue`): refused
with the reason that holds, whether the namespace has no LocalQueue named `default` or Kueue had not yet seen one."""

from __future__ import annotations

from typing import Any

import pytest

from raybridge.errors import BadInput
from raybridge.jobs import creation

SUSPENDED = {"metadata": {"labels": {}}, "spec": {"suspend": True}}


@pytest.mark.parametrize(
    "case, stored, queues, said",
    [
        ("queued: nothing to refuse", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq"}}, "spec": {"suspend": True}}, [], None),
        ("not suspended: Kueue does not manage it", {"metadata": {}, "spec": {"suspend": False}}, [], None),
        ("no LocalQueue named default", SUSPENDED, ["other"], "team has no LocalQueue named 'default'"),
        ("a default LocalQueue Kueue had not seen", SUSPENDED, ["default", "other"], "had not yet seen LocalQueue 'default' in team"),
    ],
)
def test_a_suspended_job_without_a_queue_is_refused_with_the_reason_that_holds(monkeypatch: pytest.MonkeyPatch, case: str,
                                                                                 stored: dict[str, Any], queues: list[str], said: Any) -> None:  # fmt: skip
    monkeypatch.setattr(creation, "list_local_queue_names", lambda kube, namespace: queues)
    if said is None:
        creation.refuse_if_suspended_without_queue(object(), stored, "team", "job")  # type: ignore[arg-type]
        return
    with pytest.raises(BadInput, match=said):
        creation.refuse_if_suspended_without_queue(object(), stored, "team", "job")  # type: ignore[arg-type]
