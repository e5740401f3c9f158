"""The shipped configs/ must validate against the real CRD schemas (and core objects against Kubernetes')."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.schemas import is_crd_kind, schema_errors
from tests.unit.k8s_schemas import K8S_VERSIONS, k8s_schema_errors

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").rglob("*.yaml"))
DOCS = [(f"{p.parent.name}/{p.name}#{i}", doc) for p in CONFIGS for i, doc in enumerate(yaml.safe_load_all(p.read_text())) if doc]


def test_there_are_configs():
    assert len(DOCS) >= 5


@pytest.mark.parametrize("where,doc", DOCS, ids=[d[0] for d in DOCS])
def test_config_validates(where, doc):
    if is_crd_kind(doc.get("apiVersion", ""), doc.get("kind", "")):
        assert schema_errors(doc) == []
    else:
        assert doc.get("apiVersion") == "v1" and doc.get("kind") == "Namespace", f"{where}: unexpected {doc.get('kind')}"
        for version in K8S_VERSIONS:
            assert k8s_schema_errors(doc, version) == [], version
