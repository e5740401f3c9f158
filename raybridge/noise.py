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

It does not touch the environment of the processes raybridge starts (a private
head keeps its full logs for the errors raybridge reports), and it never
silences raybridge's own messages: nothing of raybridge's is printed while a
connection is being made.
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator

_quiet = False


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
