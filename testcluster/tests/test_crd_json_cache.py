"""The CRD files' JSON copies (testcluster/sources.py `yaml_documents`): the same documents as the YAML, a file changed
since is read again, each call's objects are its own, and a copy folder that is not this user's alone is not used.

Why: the copies spare each stack's start and each test process's first schema check seconds of YAML parsing; a
stale or planted copy would make a stack install, or the offline schema checks judge against, the wrong CRD.
What this deliberately does not do: time anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from testcluster import sources

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: queues.example.com}
spec:
  group: example.com
  names: {kind: Queue, plural: queues}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {weight: {type: integer}}}}}}
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("RAYBRIDGE_TESTCLUSTER_CACHE", str(tmp_path / "cache"))
    sources._json_cache.cache_clear()
    yield tmp_path / "cache" / "crd-json"
    sources._json_cache.cache_clear()


def test_the_copy_holds_the_documents_of_the_yaml_and_is_read_the_second_time(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "queue.yaml"
    source.write_text(CRD)
    first = sources.yaml_documents(source)
    assert first == list(yaml.safe_load_all(CRD))
    (copy_path,) = cache.glob("*.json")
    assert copy_path.stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    copy_path.write_text('[{"read": "from the copy"}]')  # what the second read returns shows where it read
    assert sources.yaml_documents(source) == [{"read": "from the copy"}]


def test_a_file_changed_since_is_read_again(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "queue.yaml"
    source.write_text(CRD)
    sources.yaml_documents(source)
    source.write_text(CRD.replace("weight", "weights"))
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    assert "weights" in str(sources.yaml_documents(source))


def test_a_copy_folder_others_may_write_to_is_not_used(tmp_path: Path, cache: Path) -> None:
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    source = tmp_path / "queue.yaml"
    source.write_text(CRD)
    assert sources._json_cache() is None
    assert sources.yaml_documents(source) == list(yaml.safe_load_all(CRD))
    assert list(cache.iterdir()) == []


def test_each_call_gets_objects_of_its_own(tmp_path: Path, cache: Path) -> None:
    # a stack edits the CRDs it installs (Kueue's conversion webhook): the next stack must read the file as it is
    source = tmp_path / "queue.yaml"
    source.write_text(CRD)
    for _ in range(2):  # the parse, then the copy
        first = sources.yaml_documents(source)
        first[0]["spec"]["conversion"] = {"strategy": "Webhook"}
        assert "conversion" not in sources.yaml_documents(source)[0]["spec"]


def test_empty_documents_are_left_out(tmp_path: Path, cache: Path) -> None:
    source = tmp_path / "queue.yaml"
    source.write_text("---\n" + CRD + "---\n# nothing\n")
    assert sources.yaml_documents(source) == [yaml.safe_load(CRD)]
    assert sources.yaml_documents(source) == [yaml.safe_load(CRD)]
