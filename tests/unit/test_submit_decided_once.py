"""A submission is decided once: the spec checked, the working dir walked and the backend chosen one time each.

`submit` in the CLI previews, checks its flags against and launches one `SubmitRequest`
(`jobs.service.prepare_submit`); a second reading of the kubeconfig or a second walk of the
working dir could disagree with the first (a file written in between) and costs time.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from raybridge.cli.main import main
from raybridge.jobs import options as job_options
from raybridge.kube import config as kube_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter:
    calls: Counter = Counter()

    def counting(module: Any, name: str) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counting(job_options, "runnable_problems")
    counting(job_options, "plan_working_dir_upload")
    counting(kube_config, "cluster_configured")
    return calls


# (case, argv after `submit`)
ROWS = [
    ("a local dry run", [str(ROOT / "examples" / "hello.yaml"), "--dry-run", "--backend", "local"]),
    ("a dry run on nodes", [str(ROOT / "examples" / "train-gpu.yaml"), "--dry-run", "--nodes", str(ROOT / "examples/cluster/nodes.json")]),
    ("a dry run choosing its backend", [str(ROOT / "examples" / "hello.yaml"), "--dry-run"]),
]


@pytest.mark.parametrize("case,argv", ROWS, ids=[r[0] for r in ROWS])
def test_each_decision_of_a_submit_is_made_once(case, argv, counted, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["submit", *argv, "-o", "json"]) == 0, capsys.readouterr().err
    assert counted["runnable_problems"] == 1 and counted["plan_working_dir_upload"] == 1
    assert counted["cluster_configured"] <= 1  # not asked at all where the backend is given
