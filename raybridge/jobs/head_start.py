"""`ray start` for the private head, without Ray's client server.

Why it exists: `ray start --head` always starts Ray's client server (the `ray://` endpoint) when grpc
is installed, on 10001 or the port given, and takes no port 0 for it (ray@2.60 scripts.py `start`:
"no port, has client -> default to 10001"; parameter.py `_check_usage` refuses ports below 1024). A
port chosen before the head starts shows in the process table, so another local user can bind it
first and make every private head fail to start. raybridge submits through the Job API alone and
never uses `ray://`, so the head starts no client server at all: `ray start` is run in this process
with Ray's check for the client's dependencies answering "not installed", the one case in which
`ray start` leaves the client server out and chooses no port for it.

What it deliberately does not do: change any other part of `ray start`; every argument is Ray's.
Run as `python -m raybridge.jobs.head_start start --head ...`.
"""

from __future__ import annotations

import sys


def _no_client_server() -> ImportError:
    return ImportError("raybridge's private head starts no Ray client server")


def main() -> None:
    from ray.scripts import scripts

    scripts.get_ray_client_dependency_error = _no_client_server  # read by `start` alone (ray@2.60 scripts.py)
    sys.argv[0] = "ray"
    scripts.main()


if __name__ == "__main__":
    main()
