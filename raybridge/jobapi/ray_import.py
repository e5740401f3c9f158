"""The Ray release installed here, read from package metadata without importing Ray.

What the default images and a RayCluster's `rayVersion` follow. Whether Ray can start here
at all (the amdsmi wheel without ROCm) is `raybridge.gpu.ray_start`'s question. It only
looks; it never changes the environment.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

#: The Ray release the default images follow where Ray is not installed here (rendering manifests without Ray).
FALLBACK_RAY_VERSION = "2.60.0"


def installed_ray_version() -> str:
    """The version of the `ray` package installed here (package metadata, no `import ray`), or `FALLBACK_RAY_VERSION`."""
    try:
        return version("ray")
    except PackageNotFoundError:
        return FALLBACK_RAY_VERSION


def local_python() -> tuple[int, int]:
    """This interpreter's Python release, (major, minor): the default images follow it where Ray publishes one."""
    import sys

    return sys.version_info.major, sys.version_info.minor
