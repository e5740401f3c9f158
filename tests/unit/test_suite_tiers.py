"""The fast tier (`pytest --fast`, CONTRIBUTING.md) holds what it says: no test that waits in real time, starts a
Ray head or a cluster, needs Go or tests the harness; and it keeps the pure units and the offline CLI."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT


def _collected(*args: str, env: dict[str, str] | None = None) -> list[str]:
    env = env or {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0", *args],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_the_fast_tier_leaves_out_what_needs_go_a_head_a_cluster_or_real_time() -> None:
    fast = _collected("--fast")
    assert fast, "the fast tier collected nothing"
    slow_modules = ("kubesim/tests/", "testcluster/tests/", "tests/e2e/test_kube_", "tests/e2e/test_release_matrix", "tests/e2e/test_dra_real",
                    "tests/e2e/test_local_submit", "tests/e2e/test_private_head", "tests/unit/test_suite_", "tests/unit/test_benchmark")  # fmt: skip
    assert not [t for t in fast if t.startswith(slow_modules)], [t for t in fast if t.startswith(slow_modules)][:5]
    assert "tests/unit/test_go_number.py::test_the_rows_are_what_go_s_strconv_returns" not in fast
    assert not [t for t in fast if "test_discover_probes_every_node_of_a_ray_cluster" in t]  # it uses the Ray head fixture
    assert any(t.startswith("tests/unit/test_layers.py") for t in fast)
    assert any(t.startswith("tests/e2e/test_cli_offline.py") for t in fast) and any(t.startswith("tests/property/") for t in fast)


def test_the_realtime_tests_of_the_fast_tier_s_modules_are_left_out() -> None:
    realtime = set(_collected("-m", "realtime", "tests/unit", "tests/e2e/test_cli_offline.py"))
    fast = set(_collected("--fast", "tests/unit", "tests/e2e/test_cli_offline.py"))
    assert realtime and not realtime & fast


FAST_IDS_PLUGIN = '''
import os
import sys

import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    is_fast = next(plugin.is_fast for plugin in config.pluginmanager.get_plugins() if hasattr(plugin, "is_fast"))
    with open(os.environ["FAST_IDS_OUT"], "w") as out:
        out.writelines(item.nodeid + "\\n" for item in items if is_fast(item))
    with open(os.environ["FAST_IDS_OUT"] + ".imported", "w") as out:
        out.writelines(module.__file__ + "\\n" for module in list(sys.modules.values())
                       if os.path.basename(getattr(module, "__file__", None) or "").startswith("test_"))
'''


def test_the_fast_tier_imports_fewer_modules_and_loses_no_test(tmp_path) -> None:
    """`--fast` does not import the modules outside its files (conftest.py pytest_ignore_collect); what it collects is
    what a whole collection holds that `is_fast` keeps."""
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "fast_ids.py").write_text(FAST_IDS_PLUGIN)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "plugin"), env.get("PYTHONPATH")]))
    env["FAST_IDS_OUT"] = str(tmp_path / "fast-ids")
    whole = _collected("-p", "fast_ids", env=env)
    kept_from_whole = (tmp_path / "fast-ids").read_text().splitlines()
    imported_by_whole = (tmp_path / "fast-ids.imported").read_text().splitlines()
    fast = _collected("--fast", "-p", "fast_ids", env=env)
    assert kept_from_whole and fast == kept_from_whole
    imported_by_fast = {os.path.relpath(path, ROOT) for path in (tmp_path / "fast-ids.imported").read_text().splitlines()}
    from conftest import FAST_E2E_MODULES, FAST_TREES

    assert imported_by_fast and all(path.startswith(FAST_TREES + FAST_E2E_MODULES) for path in imported_by_fast), sorted(imported_by_fast)
    assert len(imported_by_whole) > len(imported_by_fast)
    assert {t.split("::")[0] for t in fast} < {t.split("::")[0] for t in whole}
