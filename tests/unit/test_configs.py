"""The shipped configs/ must validate against the real CRD schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.schemas import schema_errors

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").rglob("*.yaml"))
DOCS = [(f"{p.parent.name}/{p.name}#{i}", doc) for p in CONFIGS for i, doc in enumerate(yaml.safe_load_all(p.read_text())) if doc]


def test_there_are_configs():
    assert len(DOCS) >= 5


@pytest.mark.parametrize("where,doc", DOCS, ids=[d[0] for d in DOCS])
def test_config_validates(where, doc):
    assert schema_errors(doc) == []
