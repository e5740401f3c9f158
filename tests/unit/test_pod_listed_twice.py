"""A pod listed twice counts once: `adjuster plan` (both policies) and `discover` share one rule
(core/pod_identity.py): the same namespace and name, or the same uid."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.adjuster.decision.plan import plan_placeholders
from raybridge.core.pod_identity import first_listings
from tests.unit.adjuster_objects import NOW, pod

REPO = Path(__file__).resolve().parents[2]


def _with_uid(p: dict[str, Any], uid: str) -> dict[str, Any]:
    p = json.loads(json.dumps(p))
    p["metadata"]["uid"] = uid
    return p


A, B = pod("a", "0.6"), pod("b", "0.6")

ROWS = [
    # (case, listed, names kept, repeats said)
    ("the same pod twice", [A, A], ["a"], 1),
    ("the same name in two namespaces", [A, pod("a", "0.6", namespace="other")], ["a", "a"], 0),
    ("the same name, another uid (a stale copy)", [_with_uid(A, "1"), _with_uid(A, "2")], ["a"], 1),
    ("another name, the same uid", [_with_uid(A, "1"), _with_uid(B, "1")], ["a"], 1),
    ("no name and no uid: cannot be matched", [{"metadata": {}}, {"metadata": {}}], [None, None], 0),
    ("not an object: passed on for the caller", ["x", "x"], [None, None], 0),
    ("three listings, in order", [B, A, B, A, B], ["b", "a"], 3),
]


@pytest.mark.parametrize("case,listed,names,repeats", ROWS, ids=[r[0] for r in ROWS])
def test_first_listings(case: str, listed: list[Any], names: list[Any], repeats: int) -> None:
    kept, said = first_listings(listed)
    assert [p.get("metadata", {}).get("name") if isinstance(p, dict) else None for p in kept] == names
    assert len(said) == repeats and all("counted once" in s for s in said)


@pytest.mark.parametrize("policy", ["exact", "kai"])
def test_a_pod_listed_twice_is_planned_once_with_a_warning(policy: str) -> None:
    settings = AdjusterSettings(node_gpus=8, policy=policy)
    once = plan_placeholders([A, B], None, settings, NOW)
    twice = plan_placeholders([A, B, A], None, settings, NOW)
    assert twice.total_gpus == once.total_gpus
    assert sorted(p for ph in twice.placeholders for p in ph.pods) == sorted(p for ph in once.placeholders for p in ph.pods)
    assert [w for w in twice.warnings if "listed more than once" in w] == ["pod team/a is listed more than once: counted once"]


def test_the_cli_plans_a_pod_listed_twice_once(tmp_path: Path) -> None:
    """Three 0.6 pods need three GPUs; the third being the first listed again, two do."""
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [A, B, A]}))
    proc = subprocess.run([sys.executable, "-m", "raybridge", "adjuster", "plan", "--pods", str(pods), "--node-gpus", "8",
                           "--now", NOW.isoformat().replace("+00:00", "Z"), "-o", "json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["totalGpus"] == 2
    assert "pod team/a is listed more than once: counted once" in proc.stderr
