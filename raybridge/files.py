"""Reading the files a user names on the command line, with errors a user can act on.

One helper so that a missing or unreadable spec, node list or pod list is
reported the same way: `BadInput` naming the flag and the path.
"""

from __future__ import annotations

from pathlib import Path

from raybridge.errors import BadInput


def read_user_file(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise BadInput(f"{what} file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise BadInput(f"{what} file {str(path)!r} is a directory") from None
    except OSError as exc:
        raise BadInput(f"{what} file {str(path)!r} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{what} file {str(path)!r} is not text") from None
