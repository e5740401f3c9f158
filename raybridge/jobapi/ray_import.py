"""Whether Ray can be imported on this machine, given the vendor libraries installed.

Ray 2.56 and later import `amdsmi` inside `import ray` and catch only
ImportError. The amdsmi wheel raises KeyError at import where ROCm's
`libamd_smi.so` is absent, so with the wheel installed on a machine without
ROCm every Ray process (the driver, the head, every worker) dies at start.
raybridge checks for that combination before it imports or starts Ray and
says how to fix it, instead of failing with a traceback from inside Ray.

It only looks; it never changes the environment.
"""

from __future__ import annotations

import textwrap
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from typing import Optional

#: The first Ray release that imports amdsmi inside `import ray`.
RAY_IMPORTS_AMDSMI_FROM = (2, 56)
#: The Ray release the default images follow where Ray is not installed here (rendering manifests without Ray).
FALLBACK_RAY_VERSION = "2.60.0"


def installed_ray_version() -> str:
    """The version of the `ray` package installed here (package metadata, no `import ray`), or `FALLBACK_RAY_VERSION`."""
    try:
        return version("ray")
    except PackageNotFoundError:
        return FALLBACK_RAY_VERSION


def _release(text: str) -> tuple[int, ...]:
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
    if _release(ray_version) < RAY_IMPORTS_AMDSMI_FROM or find_spec("amdsmi") is None:
        return None
    from raybridge.gpu.scan import import_amdsmi, quiet_output

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
