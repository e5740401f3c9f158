"""KAI's quota message in an ignored pod's reason: shortened at a word, never mid-word."""

from __future__ import annotations

import pytest

from raybridge.adjuster.decision.demand import quota_block_reason
from raybridge.kai.pod_group import QUOTA_MESSAGE_MARKERS
from raybridge.core.views import read_pod

MARKER = QUOTA_MESSAGE_MARKERS[0]
WORDY = f"{MARKER} " + " ".join(f"queue-team-{i:03d}" for i in range(40))  # far over 200 characters


def _pod(message: str) -> dict:
    return {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}}


# (case, message, what the quoted part must be)
ROWS = [
    ("short: whole", f"{MARKER} on queue a", f"{MARKER} on queue a"),
    ("long: cut after the last whole word within 200", WORDY, WORDY[: WORDY.rfind(" ", 0, 201)] + " ..."),
    ("one long word: whole", MARKER + "x" * 300, MARKER + "x" * 300),
]


@pytest.mark.parametrize("case,message,quoted", ROWS, ids=[r[0] for r in ROWS])
def test_the_quota_message_is_never_cut_mid_word(case, message, quoted):
    reason = quota_block_reason(read_pod(_pod(message)), {})
    assert reason == f"its queue is out of quota, not out of nodes (KAI: {quoted})"
    words = set(message.split())
    assert all(word in words or word == "..." for word in quoted.split())
