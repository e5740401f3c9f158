"""What a newcomer reads first: each flag's default in the help, and warnings and notes that say what is true.

CLI in, output and exit status out.
"""

from __future__ import annotations

import json
import re
import socket

import pytest

from tests.helpers import EXAMPLES, cli_env, run_cli

#: `adjuster run` flags that have no RAYBRIDGE_ADJUSTER_ variable: they matter to `adjuster plan --policy kai` only.
NO_ENV = {"--help", "--policy", "--kai-namespace"}


def flag_help(help_text: str) -> dict[str, str]:
    """`--flag` -> its help, from `--help` printed wide enough that no line wraps."""
    found: dict[str, str] = {}
    flag = ""
    for line in help_text.splitlines():
        if line.startswith("  -"):
            invocation = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            flag = re.findall(r"--[a-z][a-z-]*", invocation[0])[-1]
            found[flag] = invocation[1] if len(invocation) > 1 else ""
        elif line.startswith("   ") and flag:
            found[flag] += " " + line.strip()
        else:
            flag = ""
    return found


def test_adjuster_run_help_shows_every_flags_default_and_its_variable() -> None:
    out = run_cli("adjuster", "run", "--help", env=cli_env(COLUMNS="400"))
    assert out.returncode == 0, out.stderr
    flags = flag_help(out.stdout)
    assert len(flags) > 25 and "--lease-name" in flags and "--request-timeout" in flags
    no_default = [flag for flag, text in flags.items() if flag != "--help" and "(default: " not in text]
    assert no_default == []
    no_variable = [flag for flag, text in flags.items()
                   if flag not in NO_ENV and f"env RAYBRIDGE_ADJUSTER_{flag[2:].replace('-', '_').upper()})" not in text]
    assert no_variable == []
    assert "(default: 15; env RAYBRIDGE_ADJUSTER_LEASE_DURATION)" in flags["--lease-duration"]


NODES = str(EXAMPLES / "cluster" / "nodes.json")
AMD_DEFAULT_WARNING = "warning: image rocm/ray:latest is the AMD default: Ray publishes no ROCm image"
SIZE = ["--gpus", "16", "--nodes", NODES]

# (case, command line, whether the AMD default image is warned of)
IMAGE_WARNING_ROWS = [
    ("plan on AMD", ["plan", *SIZE, "--gpu-vendor", "amd"], True),
    ("render on AMD", ["render", *SIZE, "--gpu-vendor", "amd"], True),
    ("dry run on Kubernetes, AMD", ["submit", "--dry-run", "--backend", "kubernetes", *SIZE, "--gpu-vendor", "amd"], True),
    ("render on AMD, image pinned", ["render", *SIZE, "--gpu-vendor", "amd", "--image", "rocm/ray:6.3"], False),
    ("render on NVIDIA", ["render", *SIZE, "--gpu-vendor", "nvidia"], False),
    ("render without GPUs", ["render", "--nodes", NODES], False),
]


@pytest.mark.parametrize("case, command, warned", IMAGE_WARNING_ROWS, ids=[row[0] for row in IMAGE_WARNING_ROWS])
def test_the_unpinned_amd_default_image_is_warned_of(case: str, command: list[str], warned: bool) -> None:
    out = run_cli(*command, "--", "python", "x.py")
    assert out.returncode == 0, out.stderr
    assert (AMD_DEFAULT_WARNING in out.stderr) is warned, out.stderr
    assert AMD_DEFAULT_WARNING not in out.stdout


HELLO = str(EXAMPLES / "hello.yaml")

# (case, command line): a job with no GPUs on the example's mixed AMD and NVIDIA nodes
CPU_ONLY_ROWS = [
    ("plan", ["plan", HELLO, "--nodes", NODES, "-o", "json"]),
    ("dry run, Kubernetes", ["submit", HELLO, "--dry-run", "--backend", "kubernetes", "--nodes", NODES, "-o", "json"]),
    ("dry run, local", ["submit", HELLO, "--dry-run", "--nodes", NODES, "-o", "json"]),
]


@pytest.mark.parametrize("case, command", CPU_ONLY_ROWS, ids=[row[0] for row in CPU_ONLY_ROWS])
def test_a_cpu_only_job_picks_no_gpu_vendor_and_notes_none(case: str, command: list[str]) -> None:
    out = run_cli(*command)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    plan = result.get("plan", result)
    assert (plan["gpuVendor"], plan["resourceKey"], plan["totalGpus"]) == (None, None, 0)
    assert plan["notes"] == []  # no mixed-cluster note, and no note that this machine lacks GPU libraries
    assert "mixed cluster" not in out.stderr


@pytest.mark.parametrize("command", [["status", "hello"], ["logs", "hello"], ["list"], ["stop", "hello"], ["delete", "hello"]])
def test_without_a_cluster_the_job_commands_say_where_a_local_runs_job_went(command: list[str]) -> None:
    out = run_cli(*command)  # no kubeconfig, not in a pod: where a local run leaves the user
    assert out.returncode == 3
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: no kubeconfig found"), out.stderr
    assert "a local run's job lives only while its `submit` runs" in out.stderr and "submit with --address" in out.stderr


@pytest.mark.parametrize("flags", [[], ["-o", "yaml"], ["-o", "json"], ["-v"]], ids=["default", "yaml", "json", "verbose"])
def test_a_dry_run_says_its_backend_once(flags: list[str]) -> None:
    out = run_cli("submit", HELLO, "--dry-run", *flags)  # no kubeconfig: the local backend
    assert out.returncode == 0, out.stderr
    said = [line for line in (out.stderr + out.stdout).splitlines() if re.match(r'\s*"?backend"?: "?local', line)]
    assert len(said) == 1, out.stderr + out.stdout
    result = json.loads(out.stdout) if "json" in flags else None
    assert result is None or result["backendReason"] == "no kubeconfig or in-cluster config was found"
    assert "dry run, nothing is created" in out.stderr


def test_a_ray_address_that_accepts_and_never_answers_is_one_line_and_exit_3_within_the_request_timeout() -> None:
    with socket.socket() as listener:  # the kernel completes the handshake (backlog); nothing ever answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        out = run_cli("submit", HELLO, "--address", address, "--request-timeout", "2", timeout=120)
    assert out.returncode == 3
    assert out.stderr == f"error: cannot connect to the Ray cluster at {address!r}: it accepts connections but does not answer within 2s\n"
