"""Every name a package re-exports resolves: the lazy maps point at modules that exist."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["raybridge", "raybridge.adjuster", "raybridge.jobs", "raybridge.queues", "raybridge.gpu", "raybridge.kube",
            "raybridge.jobapi", "raybridge.core", "raybridge.cli"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_export_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = []
    for name in getattr(module, "__all__", []):
        try:
            getattr(module, name)
        except (AttributeError, ImportError) as exc:
            missing.append(f"{name}: {exc}")
    assert not missing, missing
