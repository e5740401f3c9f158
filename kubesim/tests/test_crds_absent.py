"""A clone with no CRD folder beside it skips the tests that need the CRDs, and only those.

Why: the suite must pass on a clone with nothing beside it. Where `../shared/crds`
(or `$RAYBRIDGE_SHARED_DIR/crds`) is absent, kubesim/schemas.py raises `CrdsAbsent`
and kubesim/pytest_plugin.py turns it into a skip with the reason, whether a
fixture or the test body asked. Without that, the server starts without the
KubeRay and Kueue kinds and hundreds of tests fail or error far from the cause.
Each check runs a small pytest of its own in a subprocess, with the folder
pointed at an empty directory, and reads what it reported from its JUnit XML.
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

from kubesim import schemas

REPO = Path(__file__).resolve().parents[2]

SAMPLE = '''
import pytest

from kubesim import schemas
from kubesim.server import KubeApiServer


def test_fixture(kube_server):
    pass


def test_release_fixture(release_server):
    pass


def test_server_in_the_body():
    with KubeApiServer():
        pass


def test_schema_in_the_body():
    schemas.schema_errors({"apiVersion": "ray.io/v1", "kind": "RayJob"})


def test_raised_while_handling_it():
    try:
        schemas.crds()
    except schemas.CrdsAbsent:
        raise RuntimeError("no server")


def test_no_crds_needed():
    with KubeApiServer(crds=[]) as server:
        assert server.get_object("v1", "Namespace", "default") is not None


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
        schemas.releases,
        lambda: schemas.release_dir("kueue-v0.13.10"),
        lambda: schemas.release_crds("kueue-v0.13.10"),
        lambda: schemas.is_crd_kind("ray.io/v1", "RayJob"),
        lambda: schemas.schema_errors({"apiVersion": "ray.io/v1", "kind": "RayJob"}),
        lambda: schemas.release_schema_errors({"apiVersion": "ray.io/v1", "kind": "RayJob"}, "kuberay-v1.3.2"),
    ):
        with pytest.raises(schemas.CrdsAbsent, match="RAYBRIDGE_SHARED_DIR"):
            read()
    with pytest.raises(ValueError):  # an unknown release is still a mistake of its own
        schemas.release_dir("kueue-v0.1.0")
'''


def run_sample(tmp_path: Path, shared: Path) -> dict[str, tuple[str, str]]:
    """test name -> (outcome, message) of SAMPLE run with RAYBRIDGE_SHARED_DIR=shared."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(SAMPLE))
    report = tmp_path / "report.xml"
    env = {**os.environ, "RAYBRIDGE_SHARED_DIR": str(shared), "PYTHONPATH": str(REPO)}
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "kubesim.pytest_plugin",
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


def test_without_the_folder_each_test_that_needs_the_crds_skips_with_the_reason(tmp_path: Path) -> None:
    outcomes = run_sample(tmp_path, tmp_path / "empty")
    skipped = [
        "test_fixture", "test_server_in_the_body", "test_schema_in_the_body", "test_raised_while_handling_it",
        "test_crds_absent_raised_by_hand",
        *(f"test_release_fixture[{release}]" for release in schemas.RELEASES),
    ]
    for name in skipped:
        outcome, message = outcomes[name]
        assert outcome == "skipped", (name, outcomes[name])
        if name != "test_crds_absent_raised_by_hand":
            assert "needs ../shared/crds (KubeRay/Kueue CRD schemas), absent here" in message, (name, message)
            assert "RAYBRIDGE_SHARED_DIR" in message, (name, message)
    for name in ("test_no_crds_needed", "test_every_reader_of_the_folder_raises_crds_absent"):
        assert outcomes[name][0] == "passed", (name, outcomes[name])
    assert outcomes["test_failure"][0] == "failure", outcomes["test_failure"]  # other failures are not hidden
    assert outcomes["test_broken_fixture"][0] == "error", outcomes["test_broken_fixture"]
    assert len(outcomes) == len(skipped) + 4, sorted(outcomes)


def test_with_the_folder_present_nothing_is_skipped_for_it(tmp_path: Path) -> None:
    """A CrdsAbsent while the folder is there (never raised by kubesim itself) is a failure, not a skip.

    The folder here is empty: the tests that need the CRDs fail or error (as they did before the skip existed).
    """
    shared = tmp_path / "shared"
    (shared / "crds").mkdir(parents=True)
    outcomes = run_sample(tmp_path, shared)
    assert outcomes["test_crds_absent_raised_by_hand"][0] == "failure", outcomes["test_crds_absent_raised_by_hand"]
    assert not any(outcome == "skipped" for outcome, _ in outcomes.values()), outcomes
