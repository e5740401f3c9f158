"""The official leader election logs every renewal; the adjuster keeps the lines that change (kube/lease.py)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from raybridge.kube.lease import ELECTION_LOGGER, TransitionsOnly, quiet_renewals


class MemoryLock:
    """A Lease held in memory, shaped as the official LeaseLock's interface (get, create, update)."""

    def __init__(self, identity: str) -> None:
        self.name, self.namespace, self.identity = "adjuster", "ns", identity
        self.record: Any = None

    def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        if self.record is None:
            return False, type("E", (), {"body": '{"code": 404}', "reason": "NotFound"})()
        return True, self.record

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        self.record = election_record
        return True

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        self.record = updated_record
        return True


@pytest.fixture
def clean_logger() -> Any:
    logger = logging.getLogger(ELECTION_LOGGER)
    saved = list(logger.filters)
    logger.filters.clear()
    yield logger
    logger.filters[:] = saved


def _renew_for(seconds: float) -> None:
    from kubernetes.leaderelection import electionconfig, leaderelection

    done = threading.Event()
    config = electionconfig.Config(MemoryLock("me"), 3, 2, 1, lambda: done.wait(seconds), lambda: None)
    config.retry_period = 0.02  # the module refuses less than a second when built; a renewal every 20 ms here
    runner = threading.Thread(target=leaderelection.LeaderElection(config).run, daemon=True)
    runner.start()
    time.sleep(seconds)


@pytest.mark.realtime
def test_a_leader_renewing_for_a_while_logs_the_acquisition_once(clean_logger: logging.Logger, caplog: pytest.LogCaptureFixture) -> None:
    quiet_renewals()
    with caplog.at_level(logging.INFO, logger=ELECTION_LOGGER):
        _renew_for(0.6)  # some 30 renewals at 0.02 s
    said = [r.getMessage() for r in caplog.records]
    assert said.count("leader me has successfully acquired lease") == 1, said  # the renewal line, once
    assert len(said) == len(set(said)) <= 6, said  # the start's few transitions, each once


@pytest.mark.realtime
def test_without_the_filter_every_renewal_is_a_line(clean_logger: logging.Logger, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=ELECTION_LOGGER):
        _renew_for(0.6)
    assert len([r for r in caplog.records if "successfully acquired" in r.getMessage()]) > 5  # what the filter is for


def test_the_filter_lets_changes_through() -> None:
    f = TransitionsOnly()
    lines = ["a acquired", "a acquired", "switched to b", "yet to finish", "yet to finish", "a acquired"]
    kept = [text for text in lines if f.filter(logging.LogRecord("x", logging.INFO, "", 0, text, None, None))]
    assert kept == ["a acquired", "switched to b", "yet to finish", "a acquired"]


def test_it_is_installed_once(clean_logger: logging.Logger) -> None:
    quiet_renewals()
    quiet_renewals()
    assert sum(isinstance(f, TransitionsOnly) for f in clean_logger.filters) == 1
