"""Whether Ray can start on this machine, given the GPU vendor libraries installed.

Ray 2.56 and later import `amdsmi` inside `import ray` and catch only
ImportError. The amdsmi wheel raises KeyError at import where ROCm's
`libamd_smi.so` is absent, so with the wheel installed on a machine without
ROCm every Ray process (the driver, the head, every worker) dies at start.
raybridge checks for that combination before it imports or starts Ray and
says how to fix it, instead of failing with a traceback from inside Ray. It
lives with the GPU probes because it is about a vendor library, imported as
they import it (`scan.import_amdsmi`, with the output it prints silenced).

It only looks; it never changes the environment.
"""

from __future__ import annotations

import textwrap
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from typing import Optional

from raybridge.errors import InfraError
from raybridge.gpu.scan import import_amdsmi, quiet_output

#: The first Ray release that imports amdsmi inside `import ray`.
RAY_IMPORTS_AMDSMI_FROM = (2, 56)


def release_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def ray_import_problem() -> Optional[str]:
    """One sentence saying why Ray cannot start here, or None when it can."""
    try:
        ray_version = version("ray")
    except PackageNotFoundError:
        return None
    if release_tuple(ray_version) < RAY_IMPORTS_AMDSMI_FROM or find_spec("amdsmi") is None:
        return None
    try:
        with quiet_output():
            import_amdsmi()
    except ImportError:
        return None
    except Exception as exc:
        return (
            f"Ray {ray_version} imports the amdsmi package, which is installed but fails here "
            f"({type(exc).__name__}: {textwrap.shorten(str(exc), width=80, placeholder=' ...')}; ROCm's libamd_smi.so is missing), so no Ray process "
            "can start: install ROCm, or remove the package (`pip uninstall amdsmi`; it is the optional "
            "raybridge[amd] extra)"
        )
    return None


def ensure_ray_can_start() -> None:
    """InfraError, with the fix, when Ray would die at import on this machine."""
    problem = ray_import_problem()
    if problem:
        raise InfraError(problem)
