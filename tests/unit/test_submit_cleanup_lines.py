"""What `submit`'s clean-up says of the RayJob it created: deleted, or kept, never both.

Why this module exists: the clean-up once said "kept RayJob ... (`raybridge delete` removes it)" after every
deleted RayJob that had no ResourceClaimTemplate (the kept line hung off the template's branch), so a plain
successful submit ended with two lines that contradict each other. Each row is one submit's end, with the
deletion and the template's deletion stood in for; the lines are what the user reads.

What it deliberately does not do: the deletion itself (delete_and_wait, test_kube_submit.py on the real cluster).
The same undo serves `create_cluster` and `submit --no-wait` (jobs/creation.py `CreatedWorkload`).
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.jobs import creation, kubernetes as backend
from raybridge.jobs.creation import CreatedWorkload
from raybridge.jobs.options import SubmitOptions

# (case, --keep, the ResourceClaimTemplate made (None: none), what was deleted, a "kept RayJob" line said)
ROWS = [
    ("deleted, no claim template", False, None, ["RayJob"], False),
    ("deleted with its claim template", False, "claims", ["RayJob", "claims"], False),
    ("kept, no claim template", True, None, [], True),
    ("kept with its claim template (owned by the RayJob)", True, "claims", [], True),
]


@pytest.mark.parametrize("case, keep, template, deleted, kept_said", ROWS, ids=[r[0] for r in ROWS])
def test_the_clean_up_says_deleted_or_kept_never_both(
    monkeypatch: pytest.MonkeyPatch, case: str, keep: bool, template: Optional[str], deleted: list[str], kept_said: bool
) -> None:
    lines: list[str] = []
    done: list[str] = []

    def delete_rayjob(kube: Any, rays: Any, kind: str, name: str, namespace: str, progress: Any, wait: float = 30.0) -> bool:
        done.append(kind)
        progress(f"deleted {kind} {namespace}/{name}")
        return True

    monkeypatch.setattr(creation, "delete_and_wait", delete_rayjob)
    monkeypatch.setattr(creation, "delete_claim_template", lambda kube, name, namespace: done.append(name))
    record = CreatedWorkload(kube=object(), rays=object(), kind="RayJob", name="job", namespace="ns",  # type: ignore[arg-type]
                             claim_template=template, stored={"kind": "RayJob"})  # fmt: skip
    submitted = backend._Submitted(record, options=SubmitOptions(keep=keep, progress=lines.append))
    submitted.cleanup()
    assert done == deleted, case
    assert any(line.startswith("kept RayJob ns/job") for line in lines) is kept_said, lines
    assert not (any(line.startswith("deleted RayJob") for line in lines) and any(line.startswith("kept RayJob") for line in lines)), lines


# (case, the workload stored, the claim template made, --keep, what undo deletes)
UNDO_ROWS = [
    ("the workload's create failed: its claim template goes, kept or not", False, "claims", True, ["claims"]),
    ("nothing made yet", False, None, False, []),
    ("made, not kept: both go", True, "claims", False, ["RayCluster", "claims"]),
    ("made and kept: the workload holds its template", True, "claims", True, []),
]


@pytest.mark.parametrize("case, stored, template, keep, deleted", UNDO_ROWS, ids=[r[0] for r in UNDO_ROWS])
def test_undo_deletes_what_a_failure_left(monkeypatch: pytest.MonkeyPatch, case: str, stored: bool, template: Optional[str],
                                          keep: bool, deleted: list[str]) -> None:  # fmt: skip
    done: list[str] = []
    monkeypatch.setattr(creation, "delete_and_wait", lambda kube, rays, kind, *rest, **kw: done.append(kind))
    monkeypatch.setattr(creation, "delete_claim_template", lambda kube, name, namespace: done.append(name))
    record = CreatedWorkload(kube=object(), rays=object(), kind="RayCluster", name="c", namespace="ns",  # type: ignore[arg-type]
                             claim_template=template, stored={"kind": "RayCluster"} if stored else None)  # fmt: skip
    record.undo(keep, lambda line: None)
    assert done == deleted, case
