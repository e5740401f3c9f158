"""Shared fixtures: one real local Ray head for the whole test session."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def ray_head():
    """A real Ray head (raybridge's own private head: free ports, its own temp dir).

    Yields the dashboard URL; stopped (process group and all) at the end of the session.
    """
    from raybridge.launch.local import PrivateRayHead
    from tests.helpers import short_tmpdir

    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = short_tmpdir()
    head = PrivateRayHead(num_cpus=4)
    try:
        url = head.start()
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
    yield head
    head.stop()
