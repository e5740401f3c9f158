"""Keeps a private local Ray head tied to the raybridge process that started it.

Run as `python -m raybridge.launch.head_supervisor -- ray start --head ...`
in a new session (its own process group). It starts the head as its child,
then blocks on stdin; when stdin closes (raybridge exited, crashed or was
killed with SIGKILL) it terminates the whole process group and every descendant: the head,
the raylet, the dashboard, every worker and the job's entrypoint. That is what makes "no Ray process
left behind" hold even when raybridge cannot run its own clean-up.

It does not talk to Ray; it only starts and kills processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, state) for every process."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), int(fields[2]), fields[0])
    return table


def _family(root: int, pgid: int) -> set[int]:
    """The process group plus every descendant of `root`, wherever they moved.

    Ray runs a job's entrypoint in a session of its own, so the process group
    alone misses it; the parent links still lead there.
    """
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = {pid for pid, (_, group, _) in table.items() if group == pgid}
    stack = [root, *found]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(root)
    return {pid for pid in found if table.get(pid, (0, 0, "Z"))[2] not in ("Z", "X")}


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_family(grace: float = 10.0) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me, pgid = os.getpid(), os.getpgid(0)
    family = _family(me, pgid)  # snapshot before anything dies and gets re-parented
    _signal_all(family, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        alive = {pid for pid in family if _alive(pid)}
        if not alive:
            return
        time.sleep(0.2)
    _signal_all(family | _family(me, pgid), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
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
        _kill_family()
        child.poll()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to raybridge, which then closes our stdin
    sys.exit(main(sys.argv[1:]))
