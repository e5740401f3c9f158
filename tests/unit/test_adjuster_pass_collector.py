"""A pass reads its snapshot and decides with Python's cyclic garbage collector held off, and gives it back after.

Why: the informers hold every pod and node as parsed JSON; at 10,000 pending pods and 2,000 nodes a full collection
set off by a pass's allocations walks 680,000 objects and added 0.4 to 0.7 s to a 1.1 s decision every other pass
(docs/benchmarks.md). And a pass that fails must not leave the process without its collector.
"""

from __future__ import annotations

import gc
from contextlib import nullcontext
from typing import Any, Iterator

import pytest

from raybridge.adjuster import controller as controller_module
from raybridge.adjuster.controller import Controller, collector_paused
from tests.adjuster_world import run_settings
from tests.builders import gpu_node
from tests.unit.controller_pass import DECISION_OF_MODE, Decided, cache_holding, pass_to_the_decision


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.parametrize(
    ("enabled_before", "raises", "enabled_after"),
    [(True, False, True), (True, True, True), (False, False, False), (False, True, False)],
    ids=["on-stays-on", "on-after-an-error", "off-stays-off", "off-after-an-error"],
)
def test_the_collector_is_off_inside_and_as_it_was_after(enabled_before: bool, raises: bool, enabled_after: bool) -> None:
    (gc.enable if enabled_before else gc.disable)()
    inside = []
    with pytest.raises(Decided) if raises else nullcontext():
        with collector_paused():
            inside.append(gc.isenabled())
            if raises:
                raise Decided
    assert inside == [False] and gc.isenabled() is enabled_after


@pytest.mark.parametrize("mode", ["placeholder", "provisioning-request"])
def test_a_pass_decides_with_the_collector_off_and_fails_with_it_on(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def decision(*_: Any, **__: Any) -> Any:
        seen.append(gc.isenabled())
        raise Decided

    monkeypatch.setattr(controller_module, DECISION_OF_MODE[mode], decision)
    controller = Controller(run_settings(), kube=None)  # type: ignore[arg-type] - the pass stops before any API call
    pass_to_the_decision(controller, mode, cache_holding(), cache_holding(gpu_node("a")))
    assert seen == [False] and gc.isenabled()
