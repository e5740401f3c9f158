"""Keeps a private local Ray head tied to the raybridge process that started it.

Run as `python -m raybridge.launch.head_supervisor -- ray start --head ...`
in a new session (its own process group). It starts the head as its child,
then blocks on stdin; when stdin closes (raybridge exited, crashed or was
killed with SIGKILL) it terminates the whole process group: the head, the
raylet, the dashboard and every worker. That is what makes "no Ray process
left behind" hold even when raybridge cannot run its own clean-up.

It does not talk to Ray; it only starts and kills processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def _kill_group(grace: float = 10.0) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pgid = os.getpgid(0)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _others_alive(pgid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)  # ends this process too
    except ProcessLookupError:
        pass


def _others_alive(pgid: int) -> bool:
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv:
        sys.stderr.write("usage: head_supervisor -- COMMAND...\n")
        return 2
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    try:
        while sys.stdin.buffer.read(1):
            pass  # raybridge writes nothing; EOF means it is gone or done
    except (OSError, KeyboardInterrupt):
        pass
    finally:
        _kill_group()
        child.poll()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to raybridge, which then closes our stdin
    sys.exit(main(sys.argv[1:]))
