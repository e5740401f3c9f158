"""Writing a file only this user may read, replacing what was there without ever following it.

Why it exists: `testcluster up` writes the admin kubeconfig where the user asks (__main__.py), and the CRD schemas
keep JSON copies in the cache (crd_schemas.py); both replace a file another user must neither read nor have made.
What it deliberately does not do: decide whether the folder is safe to write in (each caller checks its own), or
create a file that must not exist yet (fault_proxy.py's O_EXCL files).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_privately(path: Path, data: bytes) -> None:
    """`data` into `path`, readable by this user alone: written to a new file of its own beside it (O_EXCL, mode
    0600) and renamed over `path`, so no file that someone else made or linked there receives it."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
