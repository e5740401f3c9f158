"""`submit --backend local`: a private head or an existing one, real Ray, nothing left behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, cli_env, processes_using, run_cli, short_tmpdir, wait_for_output, wait_until_gone


def test_main_command_runs_the_example_on_a_private_head():
    """The README's main command, as a newcomer runs it: no kubeconfig, embedded local Ray."""
    tmp = short_tmpdir()
    out = run_cli("submit", "examples/hello.yaml", env=cli_env(TMPDIR=tmp), timeout=240)
    assert out.returncode == 0, out.stderr
    assert "backend: local (no kubeconfig" in out.stderr
    assert "sum of squares: 285" in out.stdout
    assert "NUM_GPUS=0 NUM_REPLICAS=1" in out.stdout
    assert wait_until_gone(tmp) == [], "the private head left processes behind"


def test_existing_head_with_json_result(ray_head):
    out = run_cli("submit", "--address", ray_head.dashboard_url, "-o", "json", "--", "python", "-c", "print('hi from ray')")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "SUCCEEDED" and result["backend"] == "local"
    assert "hi from ray" in out.stderr  # logs go to stderr when stdout carries JSON


def test_failing_job_exits_1(ray_head):
    out = run_cli("submit", "--address", ray_head.dashboard_url, "--", "python", "-c", "import sys; print('boom'); sys.exit(3)")
    assert out.returncode == 1
    assert "boom" in out.stdout and "failed" in out.stderr


def test_ray_address_env_selects_local_backend(ray_head):
    out = run_cli("submit", "--", "python", "-c", "print(40 + 2)", env=cli_env(RAY_ADDRESS=ray_head.dashboard_url))
    assert out.returncode == 0, out.stderr
    assert "backend: local (a Ray address is set)" in out.stderr and "42" in out.stdout


# (case, argv, fragment)
REFUSED = [
    ("more GPUs than this machine has", ["submit", "--backend", "local", "--gpus", "2", "--", "python", "-c", "1"], "this machine has no GPUs"),
    ("no entrypoint", ["submit", "--backend", "local"], "no entrypoint"),
    ("working dir that is not there", ["submit", "--backend", "local", "--working-dir", "/nonexistent", "--", "python", "x.py"], "is not a directory"),
    ("RayCluster kind locally", ["submit", "--backend", "local", "--kind", "RayCluster"], "needs the kubernetes backend"),
]


@pytest.mark.parametrize("case,argv,fragment", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_before_anything_starts(case, argv, fragment):
    tmp = short_tmpdir()
    out = run_cli(*argv, env=cli_env(TMPDIR=tmp))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert fragment in out.stderr and "Traceback" not in out.stderr
    assert processes_using(tmp) == []


def _start_long_job(tmp: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "raybridge", "submit", "--backend", "local", "--", "python", "-c",
         "import time; print('started', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(TMPDIR=tmp), cwd=str(ROOT),
    )  # fmt: skip


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_the_job_and_the_head(sig, code):
    tmp = short_tmpdir()
    proc = _start_long_job(tmp)
    try:
        wait_for_output(proc, "started")
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == code
        assert "interrupted: stopping the job" in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
    assert wait_until_gone(tmp) == []


def test_sigkill_of_raybridge_still_takes_the_head_down():
    """raybridge cannot clean up after SIGKILL; the head's supervisor must."""
    tmp = short_tmpdir()
    proc = _start_long_job(tmp)
    try:
        wait_for_output(proc, "started")
        assert processes_using(tmp), "the head should be running"
        proc.kill()
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert wait_until_gone(tmp, timeout=40) == []


def test_python_api_submit_wait_logs(ray_head):
    import raybridge

    spec = raybridge.build_spec({"name": "api", "entrypoint": "python -c \"print('from the api')\""})
    with raybridge.submit(spec, backend="local", address=ray_head.dashboard_url, progress=lambda message: None) as job:
        assert job.wait(timeout=120) == "SUCCEEDED"
        assert "from the api" in job.logs()
        assert job.submission_id.startswith("api-")


def test_python_api_stop(ray_head):
    import raybridge

    spec = raybridge.build_spec({"entrypoint": "python -c \"import time; time.sleep(300)\""})
    job = raybridge.submit(spec, backend="local", address=ray_head.dashboard_url, progress=lambda message: None)
    try:
        deadline = time.monotonic() + 60
        while job.status() == "PENDING" and time.monotonic() < deadline:
            time.sleep(0.2)
        job.stop()
        assert job.wait(timeout=60) == "STOPPED"
    finally:
        job.close()
