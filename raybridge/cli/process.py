"""How the command-line process ends: normally, or at once for a command that leaves threads it cannot stop.

Why it exists: `adjuster run` uses the official leader election module, whose daemon thread has no cancel and goes
on renewing or retrying after the controller stops. At interpreter shutdown such a thread may still write to
stderr (a log line, or an exception raised as modules are torn down), and a daemon thread holding stderr's lock
then makes the shutdown abort (SIGABRT, exit -6; seen under load). A command that has released everything it owns
asks for the process to end without finalizing; `cli.main` does so once the command's outcome is written.

What it deliberately does not do: end anything itself, or apply to the Python API (only the command line's `main`
reads it).
"""

from __future__ import annotations

import threading

__all__ = ["end_process_without_finalizing", "ending_without_finalizing"]

_requested = threading.Event()


def end_process_without_finalizing() -> None:
    """Ask `cli.main` to end the process with os._exit once the command has returned or failed (output flushed)."""
    _requested.set()


def ending_without_finalizing() -> bool:
    return _requested.is_set()
