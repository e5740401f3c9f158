"""Default images follow the Ray installed here, so the Job API client and the cluster match."""

from __future__ import annotations

import sys
from importlib.metadata import version

import pytest

from raybridge.jobapi.ray_import import FALLBACK_RAY_VERSION, installed_ray_version, local_python
from raybridge.jobs.decision.images import default_image, unpinned_image_warning

ROWS = [
    # vendor, ray version, python, expected
    ("nvidia", "2.60.0", (3, 11), "rayproject/ray:2.60.0-py311-gpu"),
    ("nvidia", "2.52.1", (3, 12), "rayproject/ray:2.52.1-py312-gpu"),
    (None, "2.60.0", (3, 10), "rayproject/ray:2.60.0-py310"),
    (None, "2.60.0", (3, 13), "rayproject/ray:2.60.0-py311"),  # no py313 images: the default Python
    ("amd", "2.60.0", (3, 11), "rocm/ray:latest"),
]


@pytest.mark.parametrize("vendor, ray_version, python, expected", ROWS)
def test_default_image(vendor, ray_version, python, expected) -> None:
    assert default_image(vendor, ray_version, python) == expected


def test_the_installed_ray_version_is_the_default() -> None:
    assert installed_ray_version() == version("ray") != FALLBACK_RAY_VERSION or version("ray") == FALLBACK_RAY_VERSION
    python = local_python()
    assert default_image("nvidia", installed_ray_version(), python).startswith(f"rayproject/ray:{version('ray')}-py3")
    assert python == sys.version_info[:2]


@pytest.mark.parametrize(
    "spec_image, image, warned",
    [
        (None, "rocm/ray:latest", True),  # left on the AMD default
        ("rocm/ray:latest", "rocm/ray:latest", False),  # asked for by name: the user's choice
        (None, "rayproject/ray:2.60.0-py311-gpu", False),  # a Ray release
        ("rocm/ray:6.3", "rocm/ray:6.3", False),  # pinned
    ],
)
def test_the_unpinned_amd_default_is_warned_of_once_by_one_rule(spec_image, image, warned) -> None:
    warning = unpinned_image_warning(spec_image, image, "2.60.0")
    assert (warning is not None) is warned
    if warning:
        assert "rocm/ray:latest" in warning and "2.60.0" in warning and "--image" in warning
