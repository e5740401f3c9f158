"""A test whose CRDs are absent here skips, with the reason, and only that test.

Why: the suite must pass on a clone with nothing beside it. The CRDs of the
releases the test cluster builds come from the Go module cache, the others from
`../shared/crds` (or `$RAYBRIDGE_SHARED_DIR/crds`); where a source is absent,
testcluster/crd_schemas.py raises `CrdsAbsent` and testcluster/crds_skip.py turns
it into a skip with the reason, whether a fixture or the test body asked. Without
that, hundreds of tests fail or error far from the cause. A lone clone on a machine that has built
the test cluster skips only the releases read from beside the clone.
Each check runs a small pytest of its own in a subprocess, with the sources
pointed at empty directories, and reads what it reported from its JUnit XML.
What this deliberately does not do: run the real suite without the folder (a
clean clone does that), or check which of the real tests need the CRDs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from testcluster import crd_schemas as schemas

REPO = Path(__file__).resolve().parents[2]

SAMPLE = '''
import pytest

from testcluster import crd_schemas as schemas


@pytest.fixture
def newest_crds():
    return schemas.crds()


@pytest.fixture(params=schemas.RELEASES)
def release_crds(request):
    return schemas.release_crds(request.param)


def test_fixture(newest_crds):
    pass


def test_release_fixture(release_crds):
    pass


def test_schema_in_the_body():
    schemas.schema_errors({"apiVersion": "ray.io/v1", "kind": "RayJob"})


def test_raised_while_handling_it():
    try:
        schemas.crds()
    except schemas.CrdsAbsent:
        raise RuntimeError("no schema")


def test_no_crds_needed():
    assert "kuberay-newest" in schemas.RELEASES


def test_failure():
    assert 1 == 2


@pytest.fixture
def broken():
    raise KeyError("not about the CRDs")


def test_broken_fixture(broken):
    pass


def test_crds_absent_raised_by_hand():
    raise schemas.CrdsAbsent("raised here")


def test_every_reader_of_the_folder_raises_crds_absent():
    """No function that reads the CRD folder quietly serves fewer kinds without it."""
    for read in (
        schemas.crds,
        lambda: schemas.release_files("kueue-v0.13.10"),
        lambda: schemas.release_files("kueue-v0.15.8"),
        lambda: schemas.release_crds("kueue-v0.13.10"),
        lambda: schemas.is_crd_kind("ray.io/v1", "RayJob"),
        lambda: schemas.schema_errors({"apiVersion": "ray.io/v1", "kind": "RayJob"}),
        lambda: schemas.release_schema_errors({"apiVersion": "ray.io/v1", "kind": "RayJob"}, "kuberay-v1.3.2"),
    ):
        with pytest.raises(schemas.CrdsAbsent, match="Go module cache|RAYBRIDGE_SHARED_DIR"):
            read()
    with pytest.raises(ValueError):  # an unknown release is still a mistake of its own
        schemas.release_files("kueue-v0.1.0")
'''


def run_sample(tmp_path: Path, shared: Path, module_cache: Path) -> dict[str, tuple[str, str]]:
    """test name -> (outcome, message) of SAMPLE run with RAYBRIDGE_SHARED_DIR=shared and GOMODCACHE=module_cache."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(SAMPLE))
    report = tmp_path / "report.xml"
    env = {**os.environ, "RAYBRIDGE_SHARED_DIR": str(shared), "GOMODCACHE": str(module_cache), "PYTHONPATH": str(REPO)}
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "testcluster.crds_skip",
        "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), f"--junitxml={report}", str(tmp_path / "test_sample.py"),
    ]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert report.exists(), done.stdout + done.stderr
    outcomes: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        found = [child for child in case if child.tag in ("skipped", "failure", "error")]
        outcome = found[0].tag if found else "passed"
        message = found[0].get("message", "") if found else ""
        # A failing fixture and a failing teardown both report as an error; the first one found decides.
        outcomes[case.get("name", "")] = (outcome, message)
    return outcomes


def served_module_cache() -> Path:
    """This machine's Go module cache, where it holds every module the CRDs are read from; else the test skips."""
    from testcluster.sources import module_cache

    for release in schemas.MODULE_RELEASES:
        try:
            schemas.release_files(release)
        except schemas.CrdsAbsent as absent:
            pytest.skip(str(absent))
    return module_cache()


def test_without_either_source_each_test_that_needs_the_crds_skips_with_the_reason(tmp_path: Path) -> None:
    outcomes = run_sample(tmp_path, tmp_path / "empty", tmp_path / "empty-module-cache")
    skipped = [
        "test_fixture", "test_schema_in_the_body", "test_raised_while_handling_it",
        "test_crds_absent_raised_by_hand",
        *(f"test_release_fixture[{release}]" for release in schemas.RELEASES),
    ]
    for name in skipped:
        outcome, message = outcomes[name]
        assert outcome == "skipped", (name, outcomes[name])
        if name in {f"test_release_fixture[{release}]" for release in schemas.SHARED_RELEASES}:
            # the first source it reads says: its own (beside the clone) or the other project's newest (the module cache)
            assert "needs ../shared/crds" in message or "CRDs from the Go module cache" in message, (name, message)
        elif name != "test_crds_absent_raised_by_hand":
            assert "CRDs from the Go module cache: the Go module cache (" in message, (name, message)
            assert "empty-module-cache) lacks " in message and "python -m testcluster build" in message, (name, message)
    for name in ("test_no_crds_needed", "test_every_reader_of_the_folder_raises_crds_absent"):
        assert outcomes[name][0] == "passed", (name, outcomes[name])
    assert outcomes["test_failure"][0] == "failure", outcomes["test_failure"]  # other failures are not hidden
    assert outcomes["test_broken_fixture"][0] == "error", outcomes["test_broken_fixture"]
    assert len(outcomes) == len(skipped) + 4, sorted(outcomes)


def test_a_lone_clone_where_the_test_cluster_was_built_skips_only_the_releases_read_from_beside_it(tmp_path: Path) -> None:
    """Nothing beside the clone, the Go module cache filled by the test cluster's build: the CRDs of the releases the
    test cluster builds are read from there, and only the releases the module proxy does not serve skip."""
    outcomes = run_sample(tmp_path, tmp_path / "empty", served_module_cache())
    for name in ("test_fixture", "test_schema_in_the_body", "test_no_crds_needed"):
        assert outcomes[name][0] == "passed", (name, outcomes[name])
    for release in schemas.RELEASES:
        outcome, message = outcomes[f"test_release_fixture[{release}]"]
        if release in schemas.SHARED_RELEASES:
            assert outcome == "skipped" and "needs ../shared/crds" in message, (release, outcome, message)
        else:
            assert outcome == "passed", (release, outcome, message)
    assert outcomes["test_crds_absent_raised_by_hand"][0] == "skipped"  # a source is absent: the skip is believed


def test_with_every_source_present_nothing_is_skipped_for_it(tmp_path: Path) -> None:
    """A CrdsAbsent while every source is there (never raised by crd_schemas.py itself) is a failure, not a skip.

    The folder beside the clone is empty here: the tests that need its releases' CRDs fail or error (as they did
    before the skip existed).
    """
    shared = tmp_path / "shared"
    (shared / "crds").mkdir(parents=True)
    outcomes = run_sample(tmp_path, shared, served_module_cache())
    assert outcomes["test_crds_absent_raised_by_hand"][0] == "failure", outcomes["test_crds_absent_raised_by_hand"]
    assert not any(outcome == "skipped" for outcome, _ in outcomes.values()), outcomes
