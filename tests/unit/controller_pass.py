"""A controller pass in a unit test, without an API server: caches that never list, and a pass stopped at its decision.

Why this module exists: the tests of what a pass reads (its collector, its kept views, the nodes it read) and of the
informer's own cache need an `Informer` holding given objects, as its watch would have brought them, and some need a
pass of either mode run up to its decision and no further. What it deliberately does not do: start an informer, act,
or reach the API (the pass stops before any call).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from raybridge.adjuster.controller import Controller
from raybridge.kube.informer import Informer

#: The controller's decision each mode calls (patched with a stand-in that raises `Decided`).
DECISION_OF_MODE = {"placeholder": "decide", "provisioning-request": "decide_requests"}


def cache_holding(*objects: dict[str, Any], kind: str = "objects") -> Informer:
    """An informer, never started, holding `objects` as its watch would have brought them."""
    informer = Informer(kind, lambda **_: None, request_timeout=1.0, stop=threading.Event(), changed=threading.Event())
    for obj in objects:
        informer._apply("ADDED", obj)  # what the watch thread does with an event
    return informer


class Decided(Exception):
    """Raised by a test's stand-in decision once it has seen what it looks at: the rest of the pass is not the point."""


def pass_to_the_decision(controller: Controller, mode: str, pods: Informer, nodes: Informer) -> None:
    """One pass of `mode` on these caches, up to the stand-in decision (which must raise `Decided`)."""
    with pytest.raises(Decided):
        if mode == "placeholder":
            controller.reconcile_once(pods, nodes, scaler=None)  # type: ignore[arg-type]
        else:
            controller.reconcile_requests_once(pods, nodes, cache_holding(), cache_holding(), scaler=None)  # type: ignore[arg-type]
