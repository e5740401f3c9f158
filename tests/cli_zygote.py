"""A process that has imported raybridge's dependencies once and forks a `python -m raybridge` per call.

Why this exists: the suite runs the CLI several hundred times, as a user
would, each in a process of its own; a fresh interpreter spends most of a
call importing (`ray.job_submission` alone half a second of CPU on the
2-core test machine, `kubernetes` a third). This server is started with
the very environment and working directory of the calls it serves, imports
the heavy modules once, and for each call forks a child that runs
`raybridge`'s `__main__` exactly as `python -m raybridge ARGS` does: its
own process, its own stdin/stdout/stderr, `sys.exit`'s status and
`atexit` handlers at the end, a signal's death reported as one.

What it deliberately does not do: serve calls whose working directory or
environment differs from its own beyond the variables raybridge reads only
when a command runs (`KUBECONFIG`: `tests/helpers.py` CALL_TIME_ENV), since
module-level reads (Ray's `RAY_*` settings, `tempfile`'s `TMPDIR`) would
then be wrong; hide what an
import prints (anything printed while it imports disqualifies it, and the
callers fall back to fresh processes), or stand in for a test whose subject
is the process start itself (imports, start-up time, signals while
importing): those run `python -m raybridge` directly. Nor does a child tear
its interpreter down after the `atexit` handlers (`end_as_python_does`).

Protocol, one JSON object per line: it says `{"ready": true, "noise": TEXT}`
once its imports are done; then for each request `{"args": [...], "env":
{...}, "stdin": PATH, "stdout": PATH, "stderr": PATH}` it answers `{"pid": N}`
when the child starts and `{"returncode": N}` when it has ended.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import tempfile

#: What a command may import, heaviest first; each is imported if it can be.
PRELOAD = (
    "ray.job_submission",
    "kubernetes",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.watch",
    "kubernetes.stream",
    # The client's API classes and models are imported on first use (kubernetes >= 33, pydantic): CoreV1Api's
    # module alone was about 0.8 CPU-s of every forked call that reads a node or a pod.
    "kubernetes.client.api.core_v1_api",
    "kubernetes.client.api.custom_objects_api",
    "kubernetes.client.api.scheduling_v1_api",
    "kubernetes.client.api.coordination_v1_api",
    "kubernetes.leaderelection.leaderelection",
    "raybridge.cli.main",
    "raybridge.cli.jobs",
    "raybridge.cli.lifecycle",
    "raybridge.cli.queues",
    "raybridge.cli.adjuster",
    "raybridge.cli.explain",
    "raybridge.cli.render",
    "raybridge.jobs.kubernetes",
    "raybridge.jobs.queued",
    "raybridge.kube.exec_plugin",
    "raybridge.kube.portforward",
    "raybridge.kube.kai",
    "raybridge.jobs.lifecycle",
    "raybridge.jobs.service",
    "raybridge.jobapi.client",
    "raybridge.adjuster.controller",
    "raybridge.queues.explain",
    "ray.dag",  # Ray's `shutdown`, an atexit handler of every command that imported ray, imports it (30 ms a call)
)


def _preload() -> str:
    """Import PRELOAD with fds 1 and 2 pointed at a file; what was printed comes back."""
    with tempfile.TemporaryFile() as capture:
        saved = os.dup(1), os.dup(2)
        os.dup2(capture.fileno(), 1)
        os.dup2(capture.fileno(), 2)
        try:
            for name in PRELOAD:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - the command will meet the same failure itself
                    pass
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        capture.seek(0)
        return capture.read().decode(errors="replace")


def _run_child(request: dict, channels: tuple[int, int]) -> None:
    """In the forked child: become `python -m raybridge ARGS` with the request's stdio. Does not return."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in channels:  # the server's pipes are no business of the command's
        os.dup2(devnull, fd, inheritable=False)
    os.close(devnull)
    for fd, path, mode in ((0, request["stdin"], os.O_RDONLY), (1, request["stdout"], os.O_WRONLY), (2, request["stderr"], os.O_WRONLY)):
        opened = os.open(path, mode)
        os.dup2(opened, fd)
        os.close(opened)
    import runpy

    os.environ.clear()  # the variables that may differ from the server's (helpers.CALL_TIME_ENV)
    os.environ.update(request["env"])
    sys.argv = ["raybridge", *request["args"]]
    try:
        runpy.run_module("raybridge", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        end_as_python_does(stop.code)
    end_as_python_does(0)  # a __main__ that returns is a status of 0, as for `python -m`


def end_as_python_does(code: object) -> None:
    """End this process as an interpreter ends on `sys.exit(code)`, up to its teardown. Does not return.

    CPython (Py_FinalizeEx) prints a code that is not an int to stderr and makes it status 1, waits for the
    threads that are not daemons, runs the `atexit` handlers (Ray's `shutdown` among them: it imports `ray.dag`)
    and flushes stdout and stderr (status 120 if that fails). Then it tears the interpreter down: every module
    cleared, a last collection. That teardown is left out here: in a child of the server it wrote to most of
    the server's pages the child shares, and took about 0.1 CPU-s of the 0.13 a forked `--help` cost. What
    only that teardown does (a `__del__` at exit) shows in the fresh runs (`run_cli_fresh`,
    RAYBRIDGE_TEST_FRESH_CLI=1), not here.
    """
    import atexit
    import threading

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls: non-daemon threads end first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = 120
    os._exit(status)


def serve() -> None:
    sys.path[0] = os.getcwd()  # as `python -m` sets it
    answers_fd, requests_fd = os.dup(1), os.dup(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    noise = _preload()
    answers = os.fdopen(answers_fd, "w", buffering=1)
    requests = os.fdopen(requests_fd, "r")
    gc.freeze()  # what the imports made is never collected: a child's exit need not walk it
    answers.write(json.dumps({"ready": True, "noise": noise}) + "\n")
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request, (answers_fd, requests_fd))
        answers.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    serve()
