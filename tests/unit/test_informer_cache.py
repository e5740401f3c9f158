"""What an Informer's cache holds after the answer to our own write meets what its watch brought (raybridge/kube/informer.py).

A create's answer comes back after the request's round trip; meanwhile the watch may bring the object bound, run and
finished. The cache must keep the watch's later copy: a placeholder held pending there kept its pods waiting (no new
placeholder, no deletion) until the provision timeout, on the real API server under load.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest

from raybridge.kube.informer import Informer


def _pod(uid: str, version: Optional[str], phase: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rb-placeholder-0", "namespace": "raybridge-adjuster"}
    if uid:
        meta["uid"] = uid
    if version is not None:
        meta["resourceVersion"] = version
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": phase}}


def _informer() -> Informer:
    return Informer("pods", lambda **_: None, request_timeout=1.0, stop=threading.Event(), changed=threading.Event())


CASES = [
    # (case, what the watch brought (uid, version, phase) or None, what we wrote, the phase the cache holds)
    ("nothing cached: the write's answer goes in", None, ("a", "100", "Pending"), "Pending"),
    ("the watch brought it later: the watch's copy stays", ("a", "105", "Succeeded"), ("a", "100", "Pending"), "Succeeded"),
    ("the same version: the watch's copy stays", ("a", "100", "Running"), ("a", "100", "Pending"), "Running"),
    ("our write is later (a patch): it goes in", ("a", "100", "Pending"), ("a", "105", "Running"), "Running"),
    ("a longer version is later, whatever its digits", ("a", "99", "Pending"), ("a", "100", "Running"), "Running"),
    ("a shorter version is earlier, whatever its digits", ("a", "100", "Succeeded"), ("a", "99", "Pending"), "Succeeded"),
    ("another object of the same name (new uid): the write goes in", ("old", "500", "Succeeded"), ("a", "100", "Pending"), "Pending"),
    ("versions that are not integers: the watch's copy stays", ("a", "x7", "Succeeded"), ("a", "x9", "Pending"), "Succeeded"),
    ("a leading zero is not a well-formed version: the watch's copy stays", ("a", "100", "Succeeded"), ("a", "0101", "Pending"), "Succeeded"),
    ("no version on the cached copy: the watch's copy stays", ("a", None, "Succeeded"), ("a", "100", "Pending"), "Succeeded"),
    ("our manifest (no uid: the create met AlreadyExists): the watch's copy stays", ("a", "100", "Succeeded"), ("", None, "Pending"), "Succeeded"),
    ("our manifest with nothing cached: it goes in", None, ("", None, "Pending"), "Pending"),
]


@pytest.mark.parametrize("case,watched,written,held", CASES, ids=[c[0] for c in CASES])
def test_the_answer_to_our_write_never_replaces_a_later_copy_from_the_watch(case: str, watched: Any, written: Any, held: str) -> None:
    informer = _informer()
    if watched is not None:
        informer._apply("MODIFIED", _pod(*watched))  # what the watch thread does with an event
    informer.put(_pod(*written))
    (cached,) = informer.snapshot()
    assert cached["status"]["phase"] == held


def test_the_watch_still_replaces_what_we_wrote() -> None:
    informer = _informer()
    informer.put(_pod("a", "100", "Pending"))
    informer._apply("MODIFIED", _pod("a", "103", "Succeeded"))
    (cached,) = informer.snapshot()
    assert cached["status"]["phase"] == "Succeeded"


def test_forgetting_the_object_we_deleted_leaves_another_of_its_name_and_no_late_event_brings_ours_back() -> None:
    informer = _informer()
    informer._apply("ADDED", _pod("new", "120", "Pending"))  # made since, under the name of the one we deleted
    informer.forget("raybridge-adjuster/rb-placeholder-0", "old")
    informer._apply("MODIFIED", _pod("old", "110", "Succeeded"))  # a late event of the one we deleted
    assert [p["metadata"]["uid"] for p in informer.snapshot()] == ["new"]
    informer.forget("raybridge-adjuster/rb-placeholder-0", "new")
    assert informer.snapshot() == []
