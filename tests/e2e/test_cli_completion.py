"""The kubectl plugin and shell completion, as a user installs and types them.

Why this module exists: `kubectl ray` users reach for `kubectl raybridge ...`, and expect TAB to complete
commands and flags. The package installs `kubectl-raybridge` beside `raybridge` (kubectl runs any
`kubectl-<name>` on PATH as `kubectl <name>`), and `raybridge completion bash|zsh` prints a script generated
from the parser by shtab, so it always matches this release's commands and flags.

What it deliberately does not do: test shtab's or bash's completion machinery beyond asking the generated
function for candidates, or zsh (not installed here) beyond the script's shape.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli_env, run_cli

BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-raybridge"


def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = run_cli("completion", "bash")
    assert out.returncode == 0, out.stderr
    path = tmp_path_factory.mktemp("completion") / "raybridge.bash"
    path.write_text(out.stdout)
    return path


def complete(script: Path, line: str) -> list[str]:
    """What bash offers for TAB at the end of `line`, from the generated function."""
    words = line.split(" ")
    program = (
        f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
        f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; _shtab_raybridge; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [word for word in done.stdout.split() if word]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_runs_the_installed_plugin_under_its_own_name():
    assert PLUGIN.exists(), f"{PLUGIN} is missing: the package installs it (pip install .)"
    helped = kubectl("raybridge", "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: kubectl raybridge ")
    typo = kubectl("raybridge", "subm")
    assert typo.returncode == 2 and "did you mean 'submit'?" in typo.stderr and "(see 'kubectl raybridge --help')" in typo.stderr
    listed = kubectl("plugin", "list")
    assert str(PLUGIN) in listed.stdout, listed.stdout + listed.stderr


@pytest.mark.parametrize("line,expected", [
    ("raybridge sub", ["submit"]),
    ("raybridge ch", ["check"]),
    ("raybridge submit --orph", ["--orphan-timeout"]),
    ("raybridge adjuster pl", ["plan"]),
    ("raybridge completion ", ["bash", "zsh"]),
])  # fmt: skip
def test_bash_completes_commands_flags_and_choices(bash_script, line, expected):
    assert complete(bash_script, line) == expected


def test_the_zsh_script_knows_every_command():
    out = run_cli("completion", "zsh")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("#compdef raybridge")
    for command in ("submit", "plan", "render", "status", "explain", "check", "adjuster", "queues", "completion"):
        assert f"{command}:" in out.stdout or f'"{command}"' in out.stdout, command


def test_an_unknown_shell_is_a_usage_error():
    out = run_cli("completion", "fish")
    assert out.returncode == 2 and "invalid choice: 'fish'" in out.stderr


def _readme_completion_commands() -> list[str]:
    """The README's completion commands for bash, as written (Set up)."""
    import re

    from tests.helpers import ROOT

    text = (ROOT / "README.md").read_text()
    setup = text[text.index("## Set up") : text.index("## A five-minute tour")]
    return [c for c in re.findall(r"`([^`]*raybridge completion bash[^`]*)`", setup)]


@pytest.fixture
def shell_path(tmp_path: Path) -> str:
    """A PATH where `raybridge` is this tree's (as an install puts it) and kubectl_complete-raybridge the entry point
    pyproject.toml declares."""
    binaries = tmp_path / "bin"
    binaries.mkdir()
    for name, module in (("raybridge", "raybridge"), ("kubectl-raybridge", "raybridge"), ("kubectl_complete-raybridge", "raybridge.cli.kubectl_complete")):
        (binaries / name).write_text(f'#!/bin/sh\nexec {sys.executable} -m {module} "$@"\n')
        (binaries / name).chmod(0o755)
    return f"{binaries}{os.pathsep}{os.environ.get('PATH', '')}"


def test_the_readme_completion_commands_work_on_a_fresh_account(tmp_path: Path, shell_path: str) -> None:
    """A fresh home has no ~/.local/share/bash-completion: the command creates it. Without the bash-completion package
    (not installed here), the README's other line defines the completion in the shell itself."""
    commands = _readme_completion_commands()
    assert len(commands) == 2, commands
    home = tmp_path / "home"
    home.mkdir()
    env = dict(cli_env(HOME=str(home), PATH=shell_path), PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    saved = subprocess.run(["bash", "-c", commands[0]], env=env, capture_output=True, text=True, timeout=60)
    assert saved.returncode == 0, saved.stderr
    script = home / ".local" / "share" / "bash-completion" / "completions" / "raybridge"
    assert complete(script, "raybridge sub") == ["submit"]
    evaluated = subprocess.run(["bash", "-c", f"{commands[1]}; complete -p raybridge"], env=env, capture_output=True, text=True, timeout=60)
    assert evaluated.returncode == 0 and "_shtab_raybridge" in evaluated.stdout, evaluated.stderr


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("words,expected", [
    (["sub"], ["submit"]),
    (["submit", "--orph"], ["--orphan-timeout"]),
    (["submit", "--backend", ""], ["kubernetes", "local"]),
    (["completion", ""], ["bash", "zsh"]),
    (["adjuster", "pl"], ["plan"]),
])  # fmt: skip
def test_kubectl_completes_the_plugin_through_its_completion_executable(shell_path: str, words: list[str], expected: list[str]) -> None:
    """The real kubectl's own completion (`kubectl __complete`, what its shell scripts call) of `kubectl raybridge ...`."""
    env = dict(cli_env(PATH=shell_path), PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(["kubectl", "__complete", "raybridge", *words], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:-1] == expected and lines[-1] == ":4", done.stdout


def test_the_package_installs_the_kubectl_completion_executable() -> None:
    import tomllib

    from tests.helpers import ROOT

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl_complete-raybridge"] == "raybridge.cli.kubectl_complete:main"
