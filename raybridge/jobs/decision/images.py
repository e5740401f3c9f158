"""Default container images: the Ray image that matches the Ray installed on this machine.

The Ray Job API client (this machine) and the cluster's Ray should be the same
release, so the default NVIDIA and CPU images are `rayproject/ray:<installed
Ray>-py3<minor>[-gpu]`, where the Python minor version is this interpreter's
when Ray publishes images for it, else 3.11. Ray publishes no ROCm images;
the AMD default is ROCm's `rocm/ray` and does not follow the installed Ray
(set `image` to pin one).

Pure: the installed Ray version and this interpreter's Python are handed in by the
caller (`raybridge.jobapi.ray_import.installed_ray_version` and `local_python`).
"""

from __future__ import annotations

from typing import Optional

#: A Python release as (major, minor).
PythonVersion = tuple[int, int]
#: Python versions `rayproject/ray` publishes images for.
RAY_IMAGE_PYTHONS = ((3, 10), (3, 11), (3, 12))
DEFAULT_IMAGE_PYTHON = (3, 11)
AMD_DEFAULT_IMAGE = "rocm/ray:latest"


def default_image(vendor: Optional[str], ray_version: str, python: PythonVersion) -> str:
    """The default image for a pod with this vendor's GPUs (None: no GPUs), Ray `ray_version` and the local `python`."""
    if vendor == "amd":
        return AMD_DEFAULT_IMAGE
    version = ray_version
    py = python
    if py not in RAY_IMAGE_PYTHONS:
        py = DEFAULT_IMAGE_PYTHON
    tag = f"{version}-py{py[0]}{py[1]}"
    return f"rayproject/ray:{tag}-gpu" if vendor == "nvidia" else f"rayproject/ray:{tag}"


def unpinned_image_warning(spec_image: Optional[str], image: str, ray_version: str) -> Optional[str]:
    """The warning for a job left on the AMD default (a moving ROCm tag, not a Ray release), or None."""
    if spec_image or image != AMD_DEFAULT_IMAGE:
        return None
    return (
        f"image {AMD_DEFAULT_IMAGE} is the AMD default: Ray publishes no ROCm image, and this tag moves and need not run "
        f"the Ray installed here ({ray_version}); pin one with `image:` in the spec or --image"
    )
