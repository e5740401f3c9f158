"""Where an upstream program's source is on this machine, and its YAML read: what every component of the stack reads
its manifests, CRDs and default configuration from.

Why it exists: each component (kwok's stages, Kueue's and KAI's CRDs, Karpenter's) reads files of its own
release's Go module; one home for finding that module and reading its YAML keeps the components from reaching
into each other. It downloads a module through the Go module proxy when the cache lacks it, and does nothing else.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from testcluster.processes import StartError

__all__ = ["module_dir", "yaml_documents"]


def module_dir(module_at_version: str, wrapper: Path) -> Path:
    """Where the Go module cache holds `module version`'s source (downloaded if missing)."""
    module, version = module_at_version.split()
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"], cwd=wrapper, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if out.returncode != 0:
        raise StartError(f"go mod download {module}@{version} failed: {out.stderr.strip() or out.stdout.strip()}")
    return Path(json.loads(out.stdout)["Dir"])


def yaml_documents(path: Path) -> list[dict]:
    """The non-empty documents of a YAML file."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
