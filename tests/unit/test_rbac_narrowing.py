"""The submitter's RBAC (configs/rbac/) grants the two broad reads only as narrowly as Kubernetes allows, and says why.

Why this module exists: the opt-in token rule let the submitter read every Secret of its namespace; it now
names the one Secret a token job's `authSecret` names, and that name must be the one the file tells the user
to make and put in the spec. The port-forward to pods cannot be narrowed by name (KubeRay names head pods per
cluster, RBAC matches exact names only): it stays namespaced, `get`/`create` only, and the file says why.

What it does not do: apply the rules (tests/e2e/test_submitter_rbac.py on the real cluster).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from raybridge.jobs.decision.spec import build_spec
from tests.helpers import ROOT

RBAC_DIR = ROOT / "configs" / "rbac"
TOKEN_FILE = RBAC_DIR / "submitter-token-auth.yaml"
SUBMITTER_FILE = RBAC_DIR / "submitter.yaml"


def _rules(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(kind, rule) of every Role and ClusterRole in the file."""
    return [(doc["kind"], rule) for doc in yaml.safe_load_all(path.read_text()) if doc and doc["kind"] in ("Role", "ClusterRole")
            for rule in doc.get("rules") or []]  # fmt: skip


def _granting(resource: str) -> list[tuple[Path, str, dict[str, Any]]]:
    return [(path, kind, rule) for path in sorted(RBAC_DIR.glob("*.yaml")) for kind, rule in _rules(path) if resource in rule["resources"]]


def test_secrets_are_read_by_name_only_one_get_in_one_namespace() -> None:
    granted = _granting("secrets")
    assert [(path.name, kind) for path, kind, _ in granted] == [("submitter-token-auth.yaml", "Role")]
    rule = granted[0][2]
    assert rule["verbs"] == ["get"] and len(rule.get("resourceNames") or []) == 1, rule  # before: every Secret of the namespace


def test_the_granted_secret_is_the_one_the_file_tells_the_user_to_make_and_name() -> None:
    name = _granting("secrets")[0][2]["resourceNames"][0]
    text = TOKEN_FILE.read_text()
    assert f"kubectl create secret generic {name} " in text and f"authSecret: {name}" in text
    spec = build_spec({"entrypoint": "python x.py", "authSecret": name})
    assert spec.resolved_auth_mode == "token"  # authSecret alone turns token authentication on


def test_the_port_forward_is_namespaced_get_and_create_only_and_the_file_says_why_it_is_not_narrower() -> None:
    granted = _granting("pods/portforward")
    assert [(path.name, kind) for path, kind, _ in granted] == [("submitter.yaml", "Role")]
    assert set(granted[0][2]["verbs"]) <= {"get", "create"}
    said = " ".join(line.strip("# ") for line in SUBMITTER_FILE.read_text().splitlines() if line.lstrip().startswith("#"))
    assert re.search(r"Why not narrower: .*resourceNames.*exact name only", said), "the file must say why the rule is not narrowed"
