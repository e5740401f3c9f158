"""Which build of the exact packing's searches runs: the compiled one where it was built from this very source.

`exact_search.py` is the searches' only source. Where the install compiled it (setup.py, with mypyc), the compiled
copy `_exact_search_native` carries the SHA-256 of the source it was built from; it is taken only when that is the
digest of the `exact_search.py` beside it, so an edited source always runs as written until the next install builds
it again. Both visit the same states and count the same steps (`tests/unit/test_adjuster_exact_search.py` runs
every case on both); the compiled one is three to five times as fast.

What this deliberately does not do: build anything, fail, or read the machine. No compiled copy, or an older one,
means the source, with the reason in `BUILD`; the one file it reads is the package's own source, as an import does.
An install with `RAYBRIDGE_BUILD_PURE=1` set has no compiled copy.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from raybridge.adjuster.decision import exact_search

NATIVE_MODULE = "raybridge.adjuster.decision._exact_search_native"


@dataclass(frozen=True)
class SearchBuild:
    """The build the searches run as: `compiled` or `interpreted`, and why."""

    kind: str
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} ({self.reason})"


def choose(source: ModuleType = exact_search, native_name: str = NATIVE_MODULE) -> tuple[ModuleType, SearchBuild]:
    """The module to run the searches from, and the build it is."""
    try:
        native = importlib.import_module(native_name)
    except ImportError:
        return source, SearchBuild("interpreted", "no compiled copy: the install had no C compiler or no mypy")
    try:
        digest = hashlib.sha256(Path(source.__file__ or "").read_bytes()).hexdigest()
    except OSError as error:
        return source, SearchBuild("interpreted", f"cannot read {source.__name__}'s source to compare ({error.strerror})")
    if getattr(native, "BUILT_FROM_SHA256", None) != digest:
        return source, SearchBuild("interpreted", "the compiled copy was built from another exact_search.py: install raybridge again to rebuild it")
    return native, SearchBuild("compiled", "mypyc, built from this exact_search.py")


_chosen, BUILD = choose()
BinCompletion = _chosen.BinCompletion
BranchAndBound = _chosen.BranchAndBound
SearchState = _chosen.SearchState

__all__ = ["BUILD", "BinCompletion", "BranchAndBound", "SearchBuild", "SearchState", "choose"]
