"""Keeping other libraries' chatter off raybridge's stderr unless `-v` asks for it.

Ray logs INFO lines from its SDK ("WebSocket closed ...", "Uploading package
..."), warns FutureWarnings on connect, and urllib3 warns about TLS. On the
command line raybridge's stderr carries raybridge's own messages; with
`-v` everything is shown. Library callers keep their own logging setup: only
the CLI calls `quiet_libraries`.

Ray configures its "ray" logger when it is first imported, so the adapters
that import Ray call `after_ray_import()` to re-apply the choice. Ray's C++
core writes lines such as "rpc_client.h:153: Failed to connect to GCS" straight
to file descriptor 2 while a driver connects, before any of Ray's log settings
apply (Ray 2.60 reads `RAY_BACKEND_LOG_LEVEL` only once its logging has started,
after the connection); `native_stderr_quiet()` points descriptor 2 elsewhere for
just that stretch.

A job's log carries Ray's own INFO lines about running it (job_manager.py,
worker.py) and ANSI colours; `JobOutput` leaves those out unless `-v` (the
colours: unless the output is a terminal).

The local GPU probe's notes about absent vendor libraries (amdsmi, NVML) are
such chatter too on a machine without GPUs: `without_probe_library_notes`.

It does not touch the environment of the processes raybridge starts (a private
head keeps its full logs for the errors raybridge reports), and it never
silences raybridge's own messages: nothing of raybridge's is printed while a
connection is being made.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

_quiet = False


def verbose() -> bool:
    """Whether `-v` asked for everything (false for library callers, who never call `quiet_libraries`)."""
    return not _quiet


def without_probe_library_notes(notes: tuple[str, ...], vendors: tuple[str, ...]) -> tuple[str, ...]:
    """This machine's GPU probe notes ("amd: amdsmi not installed", "nvidia: NVML library not found")
    left out when quiet: on a machine without GPUs they say only that the vendor libraries are absent."""
    if not _quiet:
        return notes
    return tuple(n for n in notes if not any(n.startswith(f"{vendor}: ") for vendor in vendors))


def quiet_libraries(verbose: bool) -> None:
    """Called once by the CLI: quiet unless verbose."""
    global _quiet
    _quiet = not verbose
    if verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        return
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", module="urllib3")
    warnings.filterwarnings("ignore", module="kubernetes")
    after_ray_import()


def after_ray_import() -> None:
    """Re-apply the choice to Ray's loggers.

    Ray sets the "ray" logger and some of its children (the job SDK's) to INFO
    when imported, and attaches its own handler; quiet means their levels go to
    ERROR and that handler lets only errors through, whichever child logs.
    """
    if not _quiet or "logging" not in sys.modules:  # no logging, no logger to quiet (a command that never loads Ray)
        return
    import logging

    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name == "ray" or name.startswith("ray.") or name.startswith("urllib3")):
            logger.setLevel(logging.ERROR)
    for handler in logging.getLogger("ray").handlers:
        handler.addFilter(_errors_only)  # once: addFilter skips a filter already there


def _errors_only(record: object) -> bool:
    """A logging filter (a callable is one): errors and worse pass."""
    return getattr(record, "levelno", 0) >= 40  # logging.ERROR, without importing logging for commands that never log


@contextmanager
def native_stderr_quiet() -> Iterator[None]:
    """While inside, when quiet, what native code writes to file descriptor 2 goes to /dev/null."""
    if not _quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


# --- a job's own output, without Ray's lines about running it ------------------------------------

#: Ray's Python log lines in a job's log (job_manager.py, worker.py, ...): "2025-01-31 12:00:00,123\tINFO worker.py:1 -- ...".
_RAY_INFO_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\t(?:INFO|DEBUG) [\w.]+\.py:\d+ -- ")
#: The job manager's echo of the command before the driver's own output.
_RAY_ENTRYPOINT_LINE = re.compile(r"^Running entrypoint for job \S+: ")
#: ANSI escape sequences (colours, cursor moves), as Ray writes them around its dashboard URL.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


class JobOutput:
    """Writes a job's log to `write` without Ray's INFO lines (when quiet) and without ANSI escapes (when `plain`).

    Chunks arrive cut anywhere; a line is judged once it is whole. A tail that cannot be the start of
    one of Ray's lines is written at once, so a progress bar without a newline still shows; `close()`
    writes what is left.
    """

    def __init__(self, write: Callable[[str], Any], plain: bool, quiet: "bool | None" = None, entrypoint: str = "") -> None:
        self._write = write
        self._plain = plain
        self._quiet = quiet  # None: as the command line chose (`quiet_libraries`)
        self._held = ""
        #: The job's entrypoint: Ray echoes it whole, so an entrypoint of several lines echoes them all.
        self._entrypoint = entrypoint
        #: The lines of the entrypoint's echo still to come (after "Running entrypoint for job X: <its first line>").
        self._echo: list[str] = []

    def expect_entrypoint(self, entrypoint: str) -> None:
        """The job's entrypoint, learnt after the output was made (`logs` reads it from the RayJob)."""
        self._entrypoint = entrypoint

    @property
    def quiet(self) -> bool:
        return _quiet if self._quiet is None else self._quiet

    def __call__(self, chunk: str) -> None:
        if not self.quiet and not self._plain:
            self._write(chunk)
            return
        text = self._held + chunk
        lines = text.splitlines(keepends=True)
        tail = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else ""
        out = "".join(line for line in (self._clean(line) for line in lines) if line)  # whole lines first: they set _echo
        self._held = tail if tail and (self._echo or _may_be_ray_line(tail)) else ""
        if tail and not self._held:
            out += self._clean(tail)
        if out:
            self._write(out)

    def close(self) -> None:
        held, self._held = self._held, ""
        out = self._clean(held)
        if out:
            self._write(out)

    def _clean(self, line: str) -> str:
        if self._plain:
            line = _ANSI.sub("", line)
        if self.quiet and self._echo:
            if line.rstrip("\r\n") == self._echo[0]:
                self._echo.pop(0)
                return ""
            self._echo = []
        if self.quiet and _RAY_ENTRYPOINT_LINE.match(line):
            # job_supervisor.py writes f"Running entrypoint for job {id}: {entrypoint}\n": its later lines follow.
            first, *rest = self._entrypoint.split("\n") if self._entrypoint else [""]
            self._echo = rest if rest and line.rstrip("\r\n").endswith(first) else []
            return ""
        if self.quiet and _RAY_INFO_LINE.match(line):
            return ""
        return line


def _may_be_ray_line(tail: str) -> bool:
    return tail[:1].isdigit() or "Running entrypoint for job ".startswith(tail[:26]) or tail.startswith(("Running entrypoint", "\x1b"))
