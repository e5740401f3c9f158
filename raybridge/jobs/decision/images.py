"""Default container images: the Ray image that matches the Ray installed on this machine.

The Ray Job API client (this machine) and the cluster's Ray should be the same
release, so the default NVIDIA and CPU images are `rayproject/ray:<installed
Ray>-py3<minor>[-gpu]`, where the Python minor version is this interpreter's
when Ray publishes images for it, else 3.11. Ray publishes no ROCm images;
the AMD default is ROCm's `rocm/ray` and does not follow the installed Ray
(set `image` to pin one).

It reads the installed Ray version from package metadata (no `import ray`)
and nothing else.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Optional

#: Used when Ray is not installed here (rendering manifests on a machine without Ray).
FALLBACK_RAY_VERSION = "2.60.0"
#: Python versions `rayproject/ray` publishes images for.
RAY_IMAGE_PYTHONS = ((3, 10), (3, 11), (3, 12))
DEFAULT_IMAGE_PYTHON = (3, 11)
AMD_DEFAULT_IMAGE = "rocm/ray:latest"


@lru_cache(maxsize=1)
def installed_ray_version() -> str:
    """The version of the `ray` package installed here, or `FALLBACK_RAY_VERSION`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ray")
    except PackageNotFoundError:
        return FALLBACK_RAY_VERSION


def default_image(vendor: Optional[str], ray_version: Optional[str] = None, python: Optional[tuple[int, int]] = None) -> str:
    """The default image for a pod with this vendor's GPUs (None: no GPUs)."""
    if vendor == "amd":
        return AMD_DEFAULT_IMAGE
    version = ray_version or installed_ray_version()
    py = python or (sys.version_info.major, sys.version_info.minor)
    if py not in RAY_IMAGE_PYTHONS:
        py = DEFAULT_IMAGE_PYTHON
    tag = f"{version}-py{py[0]}{py[1]}"
    return f"rayproject/ray:{tag}-gpu" if vendor == "nvidia" else f"rayproject/ray:{tag}"
