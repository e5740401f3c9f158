"""The suite's plugins load only where a run needs them: a pure unit test runs without kubesim, testcluster or the
kubernetes package imported.

Why: the top-level conftest.py once registered the test clusters' pytest plugins for every run, so
`pytest tests/unit/test_sizing.py` needed the kubernetes package, kubesim and testcluster (and cryptography)
importable, and paid for importing them. Now testcluster's plugin is registered only by a run whose paths reach
tests/e2e, testcluster/tests or kubesim/tests (conftest.py says how).
Each check runs pytest in a subprocess (`-n 0`: one process, the suite's own settings otherwise) with a probe
plugin that writes what was imported after each test and which plugins were registered.
What this deliberately does not do: check which imports the tests themselves make (a unit test of the shipped
configs imports kubesim and testcluster's CRD schemas, as it must; the row below shows the probe sees it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Top-level packages a pure unit test must run without.
WATCHED = ("kubernetes", "kubesim", "testcluster")
#: Modules of those a run may load without loading the rest: the CRD-skip rule the top-level conftest.py registers
#: (testcluster/crds_skip.py, standard library and pytest only; the package's __init__ imports nothing until named).
ALLOWED = ("testcluster", "testcluster.crds_skip")
PLUGINS = ("testcluster.pytest_plugin",)

PROBE = '''
import json, os, sys
import pytest

WATCHED, PLUGINS = json.loads(os.environ["PROBE_WATCHED"]), json.loads(os.environ["PROBE_PLUGINS"])
ALLOWED = set(json.loads(os.environ["PROBE_ALLOWED"]))


def imported():
    return sorted({name.split(".")[0] for name in sys.modules if name not in ALLOWED} & set(WATCHED))


class Probe:
    def __init__(self):
        self.tests, self.seen = [], set()

    def write(self, config):
        plugins = [name for name in PLUGINS if config.pluginmanager.has_plugin(name)]
        with open(os.environ["PROBE_OUT"], "w") as out:
            json.dump({"tests": self.tests, "imported": sorted(self.seen), "plugins": plugins}, out)

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):
        if os.environ.get("PROBE_STOP_AFTER_CONFIGURE"):  # every conftest's pytest_configure has run: no need to collect
            self.write(config)
            pytest.exit("probed", returncode=0)

    def pytest_runtest_logfinish(self, nodeid, location):
        self.tests.append(nodeid)
        self.seen.update(imported())

    def pytest_sessionfinish(self, session):
        self.seen.update(imported())
        self.write(session.config)


sys.exit(pytest.main(sys.argv[1:], plugins=[Probe()]))
'''


def probe(tmp_path: Path, *args: str, **env: str) -> dict:
    """What a pytest run of `args` imported of WATCHED (after each test, and at its end) and which PLUGINS it had."""
    out = tmp_path / "probe.json"
    run = subprocess.run(
        [sys.executable, "-c", PROBE, "-q", "-p", "no:cacheprovider", "-n", "0", *args],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PROBE_"))},
             "PROBE_WATCHED": json.dumps(WATCHED), "PROBE_PLUGINS": json.dumps(PLUGINS), "PROBE_ALLOWED": json.dumps(ALLOWED), "PROBE_OUT": str(out), **env},
    )  # fmt: skip
    assert run.returncode == 0 and out.exists(), run.stdout + run.stderr
    return json.loads(out.read_text())


def test_a_pure_unit_test_runs_without_kubesim_testcluster_or_kubernetes(tmp_path: Path) -> None:
    found = probe(tmp_path, "tests/unit/test_sizing.py")
    assert len(found["tests"]) >= 20 and all(t.startswith("tests/unit/test_sizing.py::") for t in found["tests"]), found["tests"]
    assert found["imported"] == [], f"a pure unit test run imported {found['imported']}"
    assert found["plugins"] == [], f"a pure unit test run registered {found['plugins']}"


def test_the_probe_sees_kubesim_where_a_unit_test_imports_it(tmp_path: Path) -> None:
    """The check above is no blind one: a unit test of the shipped configs imports kubesim (Kueue's flavor assignment)
    and testcluster (the CRD schemas), and the probe says so; still no plugin is registered for it."""
    found = probe(tmp_path, "tests/unit/test_configs.py::test_there_are_configs")
    assert found["tests"] == ["tests/unit/test_configs.py::test_there_are_configs"]
    assert {"kubesim", "testcluster"} <= set(found["imported"]) and found["plugins"] == [], found


# (the run's paths, whether they reach tests that use the real cluster); no path: the suite's testpaths
REACHES = [
    ([], True),
    (["tests"], True),
    (["tests/e2e/test_explain.py::test_unreachable_cluster_exits_3"], True),
    (["tests/unit", "testcluster/tests/test_stack.py"], True),
    (["."], True),
    (["tests/unit"], False),
    (["tests/unit/test_sizing.py", "tests/property"], False),
    (["kubesim/tests"], True),
]


@pytest.mark.parametrize("paths,reaches", REACHES, ids=[" ".join(r[0]) or "testpaths" for r in REACHES])
def test_only_a_run_that_reaches_the_real_cluster_s_tests_registers_its_plugin(tmp_path: Path, paths: list[str], reaches: bool) -> None:
    """Probed once every pytest_configure has run (the controlling process's plugins are set then, before any
    worker starts), with the real cluster off (RAYBRIDGE_TESTCLUSTER=0: nothing is built or started)."""
    found = probe(tmp_path, *paths, RAYBRIDGE_TESTCLUSTER="0", PROBE_STOP_AFTER_CONFIGURE="1")
    assert found["plugins"] == (["testcluster.pytest_plugin"] if reaches else []), found["plugins"]


CRDS_SAMPLE = '''
from testcluster import crd_schemas as schemas


def test_schema_in_the_body():
    schemas.schema_errors({"apiVersion": "ray.io/v1", "kind": "RayJob"})


def test_another_error():
    raise RuntimeError("not the CRDs")


def test_passes():
    pass
'''


def test_the_top_level_conftest_skips_a_test_that_asks_for_absent_crds_without_any_plugin(tmp_path: Path) -> None:
    """testcluster/crds_skip.py's rule (testcluster/tests/test_crds_absent.py checks it), applied by the
    top-level conftest.py alone: where the CRDs' sources are absent, the test that asked for the CRDs skips with the
    reason; any other error still fails."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(CRDS_SAMPLE))
    report = tmp_path / "report.xml"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "PYTHONPATH": str(ROOT),
           "RAYBRIDGE_SHARED_DIR": str(tmp_path / "empty"), "GOMODCACHE": str(tmp_path / "empty-module-cache")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "conftest", "-c", str(tmp_path / "pytest.ini"),
         "--rootdir", str(tmp_path), f"--junitxml={report}", str(tmp_path / "test_sample.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.exists(), done.stdout + done.stderr
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        found = [child for child in case if child.tag in ("skipped", "failure", "error")]
        outcomes[case.get("name")] = (found[0].tag, found[0].get("message", "")) if found else ("passed", "")
    assert outcomes["test_schema_in_the_body"][0] == "skipped" and "crds" in outcomes["test_schema_in_the_body"][1].lower(), outcomes
    assert outcomes["test_another_error"][0] == "failure" and outcomes["test_passes"] == ("passed", ""), outcomes


SHOWS_PROGRESS = '''
import sys
import pytest
import testcluster.pytest_plugin as plugin

def pretend_to_build(programs, progress=lambda line: None):
    progress("building a-program 1.0 from example.com/a with go ...")
    return {}

plugin.ensure_built = pretend_to_build  # nothing is built: only where its progress goes is checked
plugin._unavailable = lambda: None  # as where Go is installed
sys.exit(pytest.main(["--co", "-q", "-p", "no:cacheprovider", "-n", "0", "tests/e2e/test_examples.py"]))
'''


def test_the_real_cluster_s_build_progress_reaches_the_terminal(tmp_path: Path) -> None:
    """A first build takes many minutes before any test runs: each program's line of progress must be shown, not
    written before the terminal reporter exists (it once was, and a first run looked like a hang)."""
    run = subprocess.run(
        [sys.executable, "-c", SHOWS_PROGRESS], capture_output=True, text=True, timeout=240, cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "testcluster: building a-program 1.0 from example.com/a with go ..." in run.stdout + run.stderr, run.stdout + run.stderr
