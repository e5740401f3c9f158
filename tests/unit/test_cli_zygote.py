"""`run_cli` through the zygote answers exactly as a fresh `python -m raybridge` does.

The suite's CLI calls are forked from `tests/cli_zygote.py` (see tests/helpers.py); these rows
hold it to a fresh interpreter: the same exit status, stdout and stderr, a call's own KUBECONFIG,
a timeout that kills the call, and a server that gives way to a fresh process when its imports
printed something.
"""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from tests.helpers import EXAMPLES, _Zygote, cli_env, run_cli, run_cli_fresh
from tests.waits import wait_for

ROWS = [
    pytest.param(["--version"], id="version"),
    pytest.param(["plan", "--help"], id="a subcommand's help"),
    pytest.param(["sumbit"], id="a misspelt command: exit 2, did you mean"),
    pytest.param(["plan", "--gpus", "-3"], id="a bad value: exit 2"),
    pytest.param(["render", str(EXAMPLES / "hello.yaml"), "-o", "json"], id="an offline render"),
    pytest.param(["adjuster", "plan", "--pods", str(EXAMPLES / "cluster" / "pods.json"), "--node-gpus", "8"], id="an adjuster plan"),
    pytest.param(["list"], id="no cluster: exit 3 or a note"),
]


@pytest.mark.parametrize("argv", ROWS)
def test_a_forked_call_answers_as_a_fresh_one(argv: list[str]) -> None:
    fresh = run_cli_fresh(*argv)
    run_cli(*argv)  # the first call in an environment runs fresh; the second is forked
    forked = run_cli(*argv)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_call_reads_its_own_kubeconfig(tmp_path) -> None:
    run_cli("list")  # the zygote for this environment exists, started without KUBECONFIG
    run_cli("list")
    missing = tmp_path / "no-such-config"
    env = cli_env(KUBECONFIG=str(missing))
    forked, fresh = run_cli("list", env=env), run_cli_fresh("list", env=env)
    assert str(missing) in fresh.stderr
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr)


def test_a_call_past_its_timeout_is_killed_and_raises_as_subprocess_run_does() -> None:
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"http://127.0.0.1:{silent.getsockname()[1]}"
        argv = ("submit", "--address", address, "--request-timeout", "60", "--", "python", "-c", "1")
        run_cli("--version")
        run_cli("--version")  # the zygote is up: the next call is forked
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            run_cli(*argv, timeout=2)
        assert time.monotonic() - started < 30
    assert run_cli("--version").returncode == 0  # the server goes on serving


@pytest.mark.slow
def test_a_server_whose_imports_print_is_not_used(tmp_path) -> None:
    noisy = tmp_path / "sitecustomize.py"
    noisy.write_text("import sys\nprint('noise at start-up', file=sys.stderr)\n")
    env = cli_env(PYTHONPATH=str(tmp_path))
    server = _Zygote(env, str(tmp_path))
    try:
        assert not server.usable
    finally:
        server.close()
    run_cli("--version", env=env)
    second = run_cli("--version", env=env)
    assert "noise at start-up" in second.stderr  # run fresh, so a user would see it too


def test_the_server_preloads_every_kubernetes_api_class_raybridge_uses() -> None:
    """The client imports its API classes and their models on first use; one the server has not imported costs every
    forked call that uses it the import again (CoreV1Api's module: about 0.8 CPU-s of each call that read a node)."""
    import importlib
    import re

    from tests.cli_zygote import PRELOAD
    from tests.helpers import ROOT

    used = set()
    for path in (ROOT / "raybridge").rglob("*.py"):
        used |= set(re.findall(r"\bclient\.(\w+Api)\(", path.read_text()))
    assert {"CoreV1Api", "CustomObjectsApi"} <= used, used  # the pattern still finds what the code calls
    modules = {"kubernetes.client.api." + re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() for name in used}  # CoreV1Api: core_v1_api
    for module in modules:
        importlib.import_module(module)  # the name is right: the module exists
    assert modules <= set(PRELOAD), sorted(modules - set(PRELOAD))


# (the code given to sys.exit, the status, what stderr says)
END_ROWS = [
    pytest.param(None, 0, "", id="None: 0"),
    pytest.param(3, 3, "", id="an int is the status"),
    pytest.param(258, 2, "", id="an int past 255 wraps as exit(3) does"),
    pytest.param("no such queue", 1, "no such queue\n", id="text: printed, status 1"),
]


@pytest.mark.parametrize("code,status,said", END_ROWS)
def test_a_forked_call_ends_as_python_does(tmp_path, code: object, status: int, said: str) -> None:
    """A non-daemon thread ends first, then the atexit handlers run, then stdout and stderr are flushed, in the
    order CPython's Py_FinalizeEx keeps; what is buffered is not lost."""
    import os
    import sys
    import threading

    from tests.cli_zygote import end_as_python_does

    out, err = tmp_path / "out", tmp_path / "err"
    pid = os.fork()
    if pid == 0:  # the child: its stdout and stderr are files, buffered as a command's are
        try:
            sys.stdout, sys.stderr = open(out, "w"), open(err, "w")  # noqa: SIM115 - flushed by the code under test
            threading.Thread(target=lambda: (time.sleep(0.2), print("thread done"))).start()
            import atexit

            atexit._clear()  # this test process's own handlers (its CLI servers' close) are not the child's to run
            atexit.register(lambda: print("atexit ran"))
            print("buffered line")
            end_as_python_does(code)
        finally:
            os._exit(99)  # reached only if it returned or raised
    def reaped() -> tuple[int, int] | None:
        found = os.waitpid(pid, os.WNOHANG)
        return found if found[0] else None

    try:
        _, wait_status = wait_for(reaped, timeout=30, interval=0.02, what="the forked child's end")
    except TimeoutError:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
    assert os.waitstatus_to_exitcode(wait_status) == status
    assert out.read_text() == "buffered line\nthread done\natexit ran\n"
    assert err.read_text() == said
