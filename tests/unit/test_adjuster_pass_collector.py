"""A pass reads its snapshot and decides with Python's cyclic garbage collector held off, and gives it back after.

Why: the informers hold every pod and node as parsed JSON; at 10,000 pending pods and 2,000 nodes a full collection
set off by a pass's allocations walks 680,000 objects and added 0.4 to 0.7 s to a 1.1 s decision every other pass
(docs/benchmarks.md). And a pass that fails must not leave the process without its collector.
"""

from __future__ import annotations

import gc
import threading
from contextlib import nullcontext
from typing import Any, Iterator

import pytest

from raybridge.adjuster import controller as controller_module
from raybridge.adjuster.controller import Controller, collector_paused
from raybridge.kube.informer import Informer
from tests.adjuster_world import run_settings
from tests.builders import gpu_node


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def _informer(*objects: dict[str, Any]) -> Informer:
    informer = Informer("objects", lambda **_: None, request_timeout=1.0, stop=threading.Event(), changed=threading.Event())
    for obj in objects:
        informer._apply("ADDED", obj)
    return informer


class _Decided(Exception):
    """Raised by the stand-in decision once it has looked at the collector: the rest of the pass is not the point."""


@pytest.mark.parametrize(
    ("enabled_before", "raises", "enabled_after"),
    [(True, False, True), (True, True, True), (False, False, False), (False, True, False)],
    ids=["on-stays-on", "on-after-an-error", "off-stays-off", "off-after-an-error"],
)
def test_the_collector_is_off_inside_and_as_it_was_after(enabled_before: bool, raises: bool, enabled_after: bool) -> None:
    (gc.enable if enabled_before else gc.disable)()
    inside = []
    with pytest.raises(_Decided) if raises else nullcontext():
        with collector_paused():
            inside.append(gc.isenabled())
            if raises:
                raise _Decided
    assert inside == [False] and gc.isenabled() is enabled_after


@pytest.mark.parametrize("mode", ["placeholder", "provisioning-request"])
def test_a_pass_decides_with_the_collector_off_and_fails_with_it_on(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def decision(*_: Any, **__: Any) -> Any:
        seen.append(gc.isenabled())
        raise _Decided

    monkeypatch.setattr(controller_module, "decide" if mode == "placeholder" else "decide_requests", decision)
    controller = Controller(run_settings(), kube=None)  # type: ignore[arg-type] - the pass stops before any API call
    pods, nodes = _informer(), _informer(gpu_node("a"))
    with pytest.raises(_Decided):
        if mode == "placeholder":
            controller.reconcile_once(pods, nodes, scaler=None)  # type: ignore[arg-type]
        else:
            controller.reconcile_requests_once(pods, nodes, _informer(), _informer(), scaler=None)  # type: ignore[arg-type]
    assert seen == [False] and gc.isenabled()
