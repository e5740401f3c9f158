"""The Ray head a stack starts of its own (`python -m testcluster up`): loopback only, no metrics, token authentication.

Why: every head pod of the stack stands for one local Ray head. As `ray start --head` makes one, its GCS, raylet and
agents listen on every interface with authentication off, two metrics servers answer on 0.0.0.0, and any local user
who POSTs to its dashboard's `/api/jobs/` runs code as the user running the stack. So the head is started as
raybridge starts its private head (raybridge/jobs/private_head.py), each setting from Ray's own source (ray 2.60):
- `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` with `--node-ip-address 127.0.0.1` (_private/ray_constants.py
  ENABLE_RAY_CLUSTER, _private/services.py get_node_ip_address and resolve_ip_for_localhost): the node address stays
  127.0.0.1, and the GCS, raylet, dashboard agent, runtime-env agent and client server listen on loopback only;
- `RAY_enable_metrics_collection=0` (the dashboard agent opens no exporter: dashboard/modules/reporter/
  reporter_agent.py) and `DASHBOARD_METRIC_PORT=-1` (the dashboard's own metrics server, dashboard/head.py
  `_setup_metrics`, fails to bind and the dashboard goes on);
- `RAY_AUTH_MODE=token` with `RAY_AUTH_TOKEN_PATH`, a fresh token in a file of the stack's private directory, mode
  0600: every dashboard and GCS request without it is refused. The stack's door to the head adds it (head_front.py);
- port 0 wherever `ray start` takes it: the kernel picks each as its listener binds, so no other user reads a port
  from the command line and binds it first; the dashboard's port is read from `ray start`'s own output, which goes to
  the stack's private log.
testcluster imports nothing of raybridge (testcluster/tests/test_independence.py), so these few lines are its own.

What this does not do: no supervisor of its own (the head is one of the stack's processes: its process group is
stopped with the stack, or by the stack's reaper; `end_all_but_the_gcs` first, so that its raylet stops at once),
no GPUs (kwok's nodes have them; the head only runs jobs' drivers).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from testcluster.processes import Process, free_port

if TYPE_CHECKING:
    from testcluster.stack import Stack

__all__ = ["RayHead", "end_all_but_the_gcs", "launch_ray_head", "wait_for_ray_head"]

#: `ray start` prints the Job API address once the head is up (ray 2.60 scripts/scripts.py, "To submit a Ray job").
_JOB_API_ADDRESS = re.compile(r"RAY_API_SERVER_ADDRESS='http://127\.0\.0\.1:(\d{1,5})'")
#: What the head's processes find in their environment, whatever the caller's says.
HEAD_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_enable_metrics_collection": "0", "DASHBOARD_METRIC_PORT": "-1",
    "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
}  # fmt: skip
#: The caller's variables that would point the head at another cluster or token.
DROPPED_ENV = ("RAY_ADDRESS", "RAY_AUTH_TOKEN")
#: The head's name among the stack's processes (its log: logs/ray-head.log).
RAY_HEAD_PROCESS = "ray-head"
#: In the stack's private directory: the head's token (mode 0600) and Ray's temp dir.
TOKEN_FILE, TEMP_SUBDIR = "ray-auth-token", "ray"


@dataclass(frozen=True)
class RayHead:
    """The started head: its process, its dashboard's host:port, its GCS address and its token's file."""

    process: Process
    dashboard: str
    gcs_address: str
    token_path: Path

    def token(self) -> str:
        return self.token_path.read_text()


def _answers(url: str, token: str) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:  # noqa: S310 - loopback only
            return bool(200 <= answer.status < 300)
    except OSError:
        return False


def launch_ray_head(stack: "Stack", num_cpus: int = 4) -> Process:
    """`ray start --head --block` started as the stack's process `ray-head`, its temp dir and token in the stack's
    private directory; `wait_for_ray_head` waits for it (the control plane starts meanwhile)."""
    token_path = stack.workdir / TOKEN_FILE
    fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
    ray = Path(sys.executable).with_name("ray")
    argv = [
        str(ray), "start", "--head", "--block", "--disable-usage-stats", "--no-monitor", "--node-ip-address=127.0.0.1",
        "--port=0", "--dashboard-host=127.0.0.1", "--dashboard-port=0", "--include-dashboard=true",
        "--dashboard-agent-listen-port=0", "--metrics-export-port=0", f"--ray-client-server-port={free_port()}",
        f"--num-cpus={num_cpus}", "--num-gpus=0", f"--temp-dir={stack.workdir / TEMP_SUBDIR}",
    ]  # fmt: skip
    # Job drivers run `python ...` from PATH: this interpreter's first, as in the image a head pod runs.
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(HEAD_ENV, RAY_AUTH_TOKEN_PATH=str(token_path), TMPDIR=str(stack.workdir), PATH=os.pathsep.join([str(ray.parent), os.environ.get("PATH", "")]))
    return stack.start_process(RAY_HEAD_PROCESS, argv, env)


def wait_for_ray_head(stack: "Stack", process: Process, timeout: float = 120.0) -> RayHead:
    """The head `launch_ray_head` started, once its Job API answers with the token."""
    token_path = stack.workdir / TOKEN_FILE
    token = token_path.read_text()
    found: dict[str, str] = {}

    def ready() -> bool:
        if "dashboard" not in found:
            printed = _JOB_API_ADDRESS.search(process.log.read_text(errors="replace"))
            if printed is None:
                return False
            found["dashboard"] = f"127.0.0.1:{printed.group(1)}"
        url = f"http://{found['dashboard']}"
        return _answers(f"{url}/api/version", token) and _answers(f"{url}/api/jobs/", token)

    process.wait_ready(ready, timeout)
    gcs_address = (stack.workdir / TEMP_SUBDIR / "ray_current_cluster").read_text().strip()
    return RayHead(process, found["dashboard"], gcs_address, token_path)


#: Ray's GCS as /proc/PID/comm names it.
GCS_COMMAND = "gcs_server"


def end_all_but_the_gcs(process: Process, grace: float = 5.0) -> None:
    """SIGTERM every process of the head's group but the GCS, and wait (at most `grace`) until they are gone; the
    stack then stops the group as it stops every program. A raylet told to stop while the GCS stops too waits about
    10 s for it (the stack's head took its whole 10 s grace and a SIGKILL); with the GCS still up it exits at once."""
    if process.popen is None or process.popen.poll() is not None:
        return
    group = process.popen.pid
    members = [pid for pid, (pgid, command) in _processes().items() if pgid == group and command != GCS_COMMAND]
    for pid in members:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid in _processes() for pid in members):
        time.sleep(0.05)


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (process group, command) of every live process (zombies left out)."""
    found: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        command, _, rest = text[text.index("(") + 1 :].rpartition(")")
        fields = rest.split()
        if fields and fields[0] not in ("Z", "X"):
            found[int(entry)] = (int(fields[2]), command)
    return found
