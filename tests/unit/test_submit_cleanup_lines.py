"""What `submit`'s clean-up says of the RayJob it created: deleted, or kept, never both.

Why this module exists: the clean-up once said "kept RayJob ... (`raybridge delete` removes it)" after every
deleted RayJob that had no ResourceClaimTemplate (the kept line hung off the template's branch), so a plain
successful submit ended with two lines that contradict each other. Each row is one submit's end, with the
deletion and the template's deletion stood in for; the lines are what the user reads.

What it deliberately does not do: the deletion itself (delete_and_wait, test_kube_submit.py on the real cluster).
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from raybridge.jobs import kubernetes as backend
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

    monkeypatch.setattr(backend, "delete_and_wait", delete_rayjob)
    monkeypatch.setattr(backend, "delete_claim_template", lambda kube, name, namespace: done.append(name))
    submitted = backend._Submitted(kube=object(), rays=object(), name="job", namespace="ns",  # type: ignore[arg-type]
                                   options=SubmitOptions(keep=keep, progress=lines.append), created=True, claim_template=template)  # fmt: skip
    submitted.cleanup()
    assert done == deleted, case
    assert any(line.startswith("kept RayJob ns/job") for line in lines) is kept_said, lines
    assert not (any(line.startswith("deleted RayJob") for line in lines) and any(line.startswith("kept RayJob") for line in lines)), lines
