"""Work measured in Python steps, not seconds: how a function's cost grows with its input.

`steps(call)` counts the Python lines executed (in every frame, generator expressions and
callees included) while `call()` runs. The count depends on the code and the input only, not
on the machine or its load, so a test can compare sizes without timing anything: a linear
step costs about 4 times the steps on 4 times the input, a quadratic one about 16 times.
Work done inside C functions (sorted, sum over a list) is not counted; those are at most
n log n in what these tests drive.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, Callable, Optional


def steps(call: Callable[[], Any]) -> int:
    count = 0

    def on_line(frame: FrameType, event: str, arg: Any) -> Optional[Callable[..., Any]]:
        nonlocal count
        if event == "line":
            count += 1
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Optional[Callable[..., Any]]:
        return on_line

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count


def growth(make_input: Callable[[int], Any], run: Callable[[Any], Any], small: int, factor: int = 4) -> float:
    """steps(run(input of small * factor)) / steps(run(input of small)); inputs are built outside the count."""
    little, big = make_input(small), make_input(small * factor)
    return steps(lambda: run(big)) / steps(lambda: run(little))
