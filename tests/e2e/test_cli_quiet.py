"""What a user sees is raybridge's output: no Ray INFO lines or colours in a piped job log, no C++
warnings and no long wait for a Ray address that refuses, no notes about absent GPU libraries."""

from __future__ import annotations

import socket

import pytest

from tests.helpers import cli_env, run_cli, short_tmpdir, wait_until_gone


@pytest.mark.fresh_head
def test_a_piped_local_run_prints_the_job_s_own_output() -> None:
    tmp = short_tmpdir()
    out = run_cli("submit", "examples/hello.yaml", env=cli_env(TMPDIR=tmp), timeout=240)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "sum of squares: 285\nallocated: NUM_GPUS=0 NUM_REPLICAS=1\n"  # the README's sample, nothing else
    assert "\x1b" not in out.stderr and "INFO" not in out.stderr
    assert out.stderr.count("backend: local") == 1
    assert wait_until_gone(tmp) == []


def refused_address() -> str:
    """host:port of a port nothing listens on (bound, never listened, closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_ray_address_that_refuses_is_one_line_and_exit_3() -> None:
    address = refused_address()
    out = run_cli("submit", "examples/hello.yaml", "--address", address, timeout=60)
    assert out.returncode == 3
    assert out.stderr == f"error: cannot connect to the Ray cluster at {address!r}: nothing answers there (Connection refused)\n"


def test_sizing_on_a_machine_without_gpus_says_nothing_about_gpu_libraries() -> None:
    quiet = run_cli("plan", "--gpus", "0")
    assert quiet.returncode == 0, quiet.stderr
    assert "amdsmi" not in quiet.stderr and "NVML" not in quiet.stderr and "pynvml" not in quiet.stderr
    verbose = run_cli("plan", "--gpus", "0", "-v")
    assert "note: amd: " in verbose.stderr and "note: nvidia: " in verbose.stderr
