"""`deleted RayJob` means its Kueue Workload is gone too: the wait covers a Workload that outlives its owner.

On the real Kueue (v0.17.0, tests/e2e/test_examples.py) a Workload of a RayJob was seen after
the RayJob itself had gone: Kueue's job reconciler, reading a stale RayJob from its cache, can
create a new Workload between the collector's deletion of the first and of the owner. Here the
wait itself, one row per case, with the Workload lookup played by a script of answers.
"""

from __future__ import annotations

from typing import Any, Iterator, Union

import pytest

import raybridge.kube.kueue as kueue
from raybridge.errors import ClusterUnreachable
from raybridge.kube.calls import PermissionDenied

OWNER = {"kind": "RayJob", "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1"}}
WORKLOAD = {"kind": "Workload", "metadata": {"name": "rayjob-train-1"}}

# (case, answers of successive lookups (a dict: a Workload left, None: none, an exception: raised), wait, expected)
ROWS: list[tuple[str, list[Union[dict, None, Exception]], float, bool]] = [
    ("none left at once", [None], 5.0, True),
    ("left twice, then gone", [WORKLOAD, WORKLOAD, None], 5.0, True),
    ("still there when the wait ends", [WORKLOAD] * 1000, 0.5, False),
    ("the user may not list Workloads: cannot tell", [PermissionDenied("listing Kueue Workloads: forbidden")], 5.0, True),
    ("the API server stops answering", [WORKLOAD, ClusterUnreachable("timed out")], 5.0, False),
]


@pytest.mark.parametrize("case,answers,wait,expected", ROWS, ids=[r[0] for r in ROWS])
def test_wait_workload_gone(monkeypatch: pytest.MonkeyPatch, case: str, answers: list, wait: float, expected: bool) -> None:
    script: Iterator[Any] = iter(answers)
    asked: list[str] = []

    def find_workload(kube: Any, namespace: str, owner: dict[str, Any]) -> Any:
        asked.append(owner["metadata"]["uid"])
        answer = next(script)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(kueue, "find_workload", find_workload)
    if wait > 1:  # rows that end before their wait need no pause between lookups
        monkeypatch.setattr(kueue.time, "sleep", lambda seconds: None)
    assert kueue.wait_workload_gone(object(), "team-a", OWNER, wait) is expected
    assert asked and set(asked) == {"u-1"}


def test_an_owner_without_uid_is_not_looked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kueue, "find_workload", lambda *a: pytest.fail("looked up"))
    assert kueue.wait_workload_gone(object(), "team-a", {"metadata": {"name": "train"}}, 5.0) is True
