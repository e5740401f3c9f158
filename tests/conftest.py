"""Shared fixtures: one real local Ray head for the whole test session.

The test API server and the release matrix (`kube_server`, `kube_api`, `release`,
`release_server`) come from kubesim/pytest_plugin.py, the check that no module leaks Ray state
from the top-level conftest.py; both apply to kubesim/tests as well.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def ray_head():
    """A real Ray head (raybridge's own private head: free ports, its own temp dir).

    Yields the dashboard URL; stopped (process group and all) at the end of the session.
    """
    from raybridge.jobs.private_head import PrivateRayHead
    from tests.helpers import short_tmpdir

    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = short_tmpdir()
    head = PrivateRayHead(num_cpus=4, token_auth=False)  # stands for a cluster reached by address, without a token
    try:
        head.start()
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
    yield head
    head.stop()
