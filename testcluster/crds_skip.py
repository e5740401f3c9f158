"""A test that asks for the CRDs skips, with the reason, where the CRD folder beside the clone is absent.

testcluster/crd_schemas.py raises `CrdsAbsent` when a test (its setup or its body) asks for a CRD and the
folder is not there: a clone with nothing beside it runs what it can and skips the rest, and never
errors for it. Only that one condition skips; any other error, and every error while the folder is
present, is reported as it is. The repository's top-level conftest.py registers the two hooks here
for every tree; they import nothing more of testcluster until a test has imported
testcluster.crd_schemas (where none has, nothing can raise `CrdsAbsent`), so a run of pure unit tests
loads neither the rest of testcluster nor the kubernetes package through them.
"""

from __future__ import annotations

import sys
from typing import Iterator, Optional

import pytest


def crds_absent_in(error: BaseException) -> Optional[BaseException]:
    """The CrdsAbsent that `error` is, or was raised from or while handling (groups included)."""
    if "testcluster.crd_schemas" not in sys.modules:
        return None
    from testcluster.crd_schemas import CrdsAbsent

    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, CrdsAbsent):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend((current.__cause__, current.__context__))
    return None


def skip_if_crds_absent(error: BaseException) -> None:
    """Skip the running test, with the reason, where `error` comes of CrdsAbsent and the CRD folder is absent."""
    absent = crds_absent_in(error)
    if absent is not None:
        from testcluster.crd_schemas import crds_present

        if not crds_present():
            pytest.skip(str(absent))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A fixture that needs the CRDs (a stack's, a test's own) skips its test where they are absent."""
    try:
        return (yield)
    except Exception as exc:
        skip_if_crds_absent(exc)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test body that needs the CRDs (a stack it starts, a schema it checks) skips where they are absent."""
    try:
        return (yield)
    except Exception as exc:
        skip_if_crds_absent(exc)
        raise
