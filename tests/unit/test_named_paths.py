"""Every raybridge path and dotted name the code's docstrings and comments point to exists.

A module moves, and the sentences that send a reader to it stay behind: the paths
(`adjuster/decision/demand.py`, `raybridge/kube/client.py`) and the backticked dotted names
(`raybridge.queues.explain.explain`) written in raybridge's own modules are checked against
the tree. Paths into other projects (Ray's `python/ray/...`, KAI's `pkg/...`) are not ours to check.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "raybridge"
OUR_DIRS = tuple(sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()))
PATH = re.compile(r"(?<![\w./-])((?:raybridge/)?(?:" + "|".join(OUR_DIRS) + r")/(?:[a-z_]+/)*[a-z_]+\.py)\b")
DOTTED = re.compile(r"`(raybridge(?:\.[A-Za-z_]\w*)+)`")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attribute in parts[i:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_the_paths_and_names_our_modules_point_to_exist():
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(PACKAGE.parent)
        for named in sorted(set(PATH.findall(text))):
            if not (PACKAGE.parent / named).exists() and not (PACKAGE / named).exists():
                missing.append(f"{where}: {named}")
        for dotted in sorted(set(DOTTED.findall(text))):
            if not _resolves(dotted):
                missing.append(f"{where}: {dotted}")
    assert not missing, "\n".join(missing)


def test_a_path_that_moved_is_found():
    """The check itself: a path and a name that do not exist are caught."""
    assert PATH.findall("see `queues/decision/kueue_workload.py` and adjuster/decision/kai_policy.py") == [
        "queues/decision/kueue_workload.py", "adjuster/decision/kai_policy.py"]
    assert not (PACKAGE / "queues/decision/kueue_workload.py").exists()
    assert not _resolves("raybridge.queues.explain.no_such_function") and _resolves("raybridge.queues.explain.explain")
