"""The local backend: a private Ray head on this machine, or a Ray cluster at an address.

With no address, it starts a private head (its own temp dir, ports the kernel picks)
under `head_supervisor`, so the head dies with raybridge however raybridge
ends. The head is reachable by its owner alone: every Ray component listens
on loopback only, Ray's token authentication is on with a token that only
the owner can read, and the head's directory (Ray's session dir, the
uploaded working dir, the logs) is closed to other users. No port of the head
is chosen before the head binds it (Ray's client server, which takes no port 0,
is not started: `head_start.py`), and every connection that carries the token
is proven to reach the head's dashboard after it is established
(`head_listener.connection_problem`), so a port the head freed by dying is no
way in for another user. A head that has exited is an error at once. The head leaves out what a Job API
submission does not need, as far as `ray start` allows (the autoscaler
monitor, idle prestarted workers), and `release()` returns without waiting
for it to wind down. With an address (`--address` or `RAY_ADDRESS`) it
only submits there and leaves that cluster alone.

It does not size anything (`raybridge.jobs.decision.sizing` does) and does not print
(the CLI does); it returns a `JobHandle`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from raybridge.errors import BadInput, InfraError
from raybridge.jobs.head_guard import end_processes_in
from raybridge.jobs.head_supervisor import HEAD_EXITED_MARKER
from raybridge.jobs.head_listener import connection_problem, dashboard_port_in, exposed_listeners, gcs_address_in, listener_holder

if TYPE_CHECKING:
    from raybridge.jobapi.client import RayJobs

START_TIMEOUT = 120.0
TEMP_PREFIX = "raybridge-"
#: In each private head's temp dir: the processes that own it, as "pid starttime" lines.
OWNERS_FILE = "raybridge-owners"
#: In each private head's temp dir: the head's token (mode 0600), and Ray's own temp dir.
TOKEN_FILE = "auth_token"
RAY_TEMP_SUBDIR = "ray"
AUTH_MODE_ENV = "RAY_AUTH_MODE"
AUTH_TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
#: Variables of the user's environment that would point the head at another cluster or token.
HEAD_ENV_DROPPED = ("RAY_ADDRESS", "RAY_AUTH_TOKEN", AUTH_TOKEN_PATH_ENV)
#: ray@2.60 python/ray/_private/ray_constants.py (ENABLE_RAY_CLUSTER) and _private/services.py
#: (get_node_ip_address, resolve_ip_for_localhost): `ray start --node-ip-address 127.0.0.1` is
#: replaced by the machine's network address unless this is "0"; with it, the node address is
#: 127.0.0.1 and the GCS server, raylet, dashboard agent, runtime-env agent and Ray client server
#: listen on loopback only (dashboard/agent.py, http_server_agent.py, util/client/server).
LOOPBACK_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: The head serves no metrics: Ray's metrics servers answer any local user without the token (task and actor names,
#: submission ids, the dashboard's endpoints). ray@2.60: with RayConfig enable_metrics_collection false the raylet
#: starts the dashboard agent with --disable-metrics-collection, and the agent opens no exporter
#: (dashboard/modules/reporter/reporter_agent.py ReporterAgent); the dashboard's own metrics server (dashboard/head.py
#: _setup_metrics) has no switch and binds DASHBOARD_METRIC_PORT (44227 for every user of the machine alike): on -1
#: its bind fails, which the dashboard logs and goes on. Set whatever the user's environment says.
HEAD_METRICS_OFF = {"RAY_enable_metrics_collection": "0", "DASHBOARD_METRIC_PORT": "-1"}
#: Ray settings for the private head, unless the user's environment sets them.
HEAD_ENV_DEFAULTS = {"RAY_prestart_worker_first_driver": "0"}
#: How often the dashboard is asked whether it answers yet.
READY_POLL_SECONDS = 0.1


#: Ray's longest Unix socket path below the head's temp dir (ray@2.60 node.py _prepare_socket_file: the plasma
#: store's, in the session dir), and the kernel's limit on such a path (utils.py validate_socket_filepath).
RAY_SOCKET_SUFFIX = "/raybridge-xxxxxxxx/ray/session_2026-01-01_00-00-00_000000_4194304/sockets/plasma_store"
UNIX_SOCKET_PATH_MAX = 107
SHORT_TEMP_BASE = "/tmp"


def head_temp_base() -> str:
    """Where the private head's temp dir goes: the user's temp dir, or /tmp when Ray's socket paths under the user's
    would be too long (the head's own dir is closed to others either way). BadInput when neither fits."""
    base = tempfile.gettempdir()
    if len(base) + len(RAY_SOCKET_SUFFIX) <= UNIX_SOCKET_PATH_MAX:
        return base
    if os.path.isdir(SHORT_TEMP_BASE) and os.access(SHORT_TEMP_BASE, os.W_OK | os.X_OK):
        return SHORT_TEMP_BASE
    raise BadInput(
        f"TMPDIR {base!r} is {len(base)} characters: Ray's Unix socket paths under it would exceed "
        f"{UNIX_SOCKET_PATH_MAX} bytes; set TMPDIR to a directory of at most "
        f"{UNIX_SOCKET_PATH_MAX - len(RAY_SOCKET_SUFFIX)} characters"
    )


def head_environment(user_env: dict[str, str], token_path: Optional[str], temp_dir: Optional[str] = None) -> dict[str, str]:
    """The environment of the head's processes: the user's, with the head kept to its owner.

    With `temp_dir`, TMPDIR is the head's own directory: what its processes and the job leave in their temp dir
    (multiprocessing's `pymp-*` directories, its forkserver socket) is removed with the head, and a long TMPDIR of
    the user's cannot make their Unix socket paths too long.

    With `token_path`, Ray's token authentication is on with that token, whatever the user's
    environment says about authentication (it concerns the user's own clusters); without, it
    is off. Either way every component listens on loopback only.
    """
    env = {k: v for k, v in user_env.items() if k not in HEAD_ENV_DROPPED}
    if temp_dir is not None:
        env["TMPDIR"] = temp_dir
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env[LOOPBACK_ONLY_ENV] = "0"
    env.update(HEAD_METRICS_OFF)
    if token_path is not None:
        env[AUTH_MODE_ENV] = "token"
        env[AUTH_TOKEN_PATH_ENV] = token_path
    else:
        env[AUTH_MODE_ENV] = "disabled"
    # Every job raybridge submits carries a runtime env (its allocation env vars, usually a
    # working dir), so the idle workers the raylet would prestart for the first driver (the
    # job agent's own) can never run its tasks: they only take CPU while the job starts.
    for name, value in HEAD_ENV_DEFAULTS.items():
        env.setdefault(name, value)
    return env


class PrivateRayHead:
    """A Ray head that belongs to one raybridge run.

    `token_auth=False` leaves Ray's token authentication off (the head still listens on loopback
    only and its directory stays private): for a head that stands for a cluster without it.
    """

    def __init__(self, num_cpus: Optional[int] = None, num_gpus: Optional[int] = None, token_auth: bool = True) -> None:
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.token_auth = token_auth
        #: What a Job API client must send to this head (the bearer token), once started.
        self.auth_headers: dict[str, str] = {}
        self.temp_dir: Optional[Path] = None
        self.dashboard_url: Optional[str] = None
        self.gcs_address: Optional[str] = None
        #: The head's token file (readable by its owner alone), with token authentication, once started.
        self.token_path: Optional[Path] = None
        self._supervisor: Optional[subprocess.Popen[bytes]] = None
        self._log_path: Optional[Path] = None
        #: The process of the head that holds the dashboard's listener (proven when the head started): every
        #: connection carrying the token must be accepted by it.
        self._dashboard_pid: Optional[int] = None
        self._session: Any = None

    def start(self, progress: Callable[[str], None] = lambda _: None, timeout: float = START_TIMEOUT) -> str:
        from raybridge.gpu.ray_start import ensure_ray_can_start

        ensure_ray_can_start()
        base = head_temp_base()
        remove_stale_temp_dirs(base)
        # mkdtemp makes it 0700; Ray makes its own temp dir (a subdir) 0777, which this one closes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=base))
        os.chmod(self.temp_dir, 0o700)
        _write_owners(self.temp_dir, [os.getpid()])
        token_path = _write_token(self.temp_dir) if self.token_auth else None
        if token_path is not None:
            self.token_path = token_path
            self.auth_headers = {"Authorization": f"Bearer {token_path.read_text()}"}
        # Port 0: the kernel picks each port as its listener binds it, so no local user can learn it first from
        # this command line and bind it before the head (head_listener.py). Ray's client server, which takes no 0,
        # is not started at all (head_start.py).
        command = [
            sys.executable, "-m", "raybridge.jobs.head_start", "start", "--head", "--block",
            "--node-ip-address", "127.0.0.1",
            "--port", "0",
            "--dashboard-host", "127.0.0.1",
            "--dashboard-port", "0",
            "--dashboard-agent-listen-port", "0",
            "--metrics-export-port", "0",
            "--temp-dir", str(self.temp_dir / RAY_TEMP_SUBDIR),
            "--include-dashboard", "true",
            "--disable-usage-stats",
            "--no-monitor",  # the autoscaler: a private head has nothing to scale
        ]  # fmt: skip
        if self.num_cpus is not None:
            command += ["--num-cpus", str(self.num_cpus)]
        if self.num_gpus is not None:
            command += ["--num-gpus", str(self.num_gpus)]
        self._log_path = self.temp_dir / "raybridge-head.log"
        log = open(self._log_path, "wb")
        env = head_environment(dict(os.environ), str(token_path) if token_path is not None else None, str(self.temp_dir))
        # The job's `python` is the one raybridge runs under, activated or not.
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        self._supervisor = subprocess.Popen(
            [sys.executable, "-m", "raybridge.jobs.head_supervisor", "--temp-dir", str(self.temp_dir), "--", *command],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        log.close()
        _write_owners(self.temp_dir, [os.getpid(), self._supervisor.pid])
        progress("starting a private local Ray head")
        _import_job_client()  # while the head starts, not after
        self._wait_ready(timeout)
        assert self.dashboard_url is not None and self._supervisor is not None
        exposed = exposed_listeners(self._supervisor.pid)
        if exposed:
            self.stop()
            raise InfraError(
                f"the local Ray head listens beyond loopback ({', '.join(exposed[:3])}): this Ray no longer keeps a "
                f"head to 127.0.0.1 with {LOOPBACK_ONLY_ENV}=0, so raybridge runs no job on it"
            )
        progress(f"private local Ray head ready (dashboard {self.dashboard_url})")
        return self.dashboard_url

    def _wait_ready(self, timeout: float) -> None:
        """Until the head's dashboard answers: its port read from the head's own log, its listener proven the head's
        (head_listener.py) before the first request that carries the token."""
        deadline = time.monotonic() + timeout
        assert self._supervisor is not None and self.temp_dir is not None
        while time.monotonic() < deadline:
            if self._supervisor.poll() is not None:
                raise InfraError(f"the local Ray head exited while starting: {self.log_tail()}")
            if self.dashboard_url is None:
                self._find_dashboard()
            elif self._answers("/api/version") and self._answers("/api/jobs/"):
                self.gcs_address = gcs_address_in(self.temp_dir / RAY_TEMP_SUBDIR)
                return
            time.sleep(READY_POLL_SECONDS)
        tail = self.log_tail()  # before stop() removes the log with the temp dir
        self.stop()
        raise InfraError(f"the local Ray head did not start within {timeout:.0f}s: {tail}")

    def _find_dashboard(self) -> None:
        """Set `dashboard_url` once the head has printed its port and the listener there is the head's own."""
        assert self._supervisor is not None
        try:
            port = dashboard_port_in(self._log_path.read_text(errors="replace")) if self._log_path else None
        except OSError:
            port = None
        if port is None:
            return
        holder, problem = listener_holder(port, session=self._supervisor.pid)
        if problem is not None:
            self.stop()
            raise InfraError(f"the local Ray head's dashboard port is not the head's own ({problem}): nothing was sent to it")
        self._dashboard_pid = holder
        self.dashboard_url = f"http://127.0.0.1:{port}"

    def peer_problem(self, sock: Any) -> Optional[str]:
        """Why the connected socket `sock` must not carry the token (None: it reaches this head's dashboard); with
        `sock` None, after a connection failed, whether the head has exited.

        Asked of every connection to the dashboard once it is established, before anything is sent: the head must
        still run (its supervisor, and the dashboard process it started with) and the connection's accepting end
        must be held by that dashboard process (`head_listener.connection_problem`)."""
        supervisor = self._supervisor
        if supervisor is None or supervisor.poll() is not None:
            return "the local Ray head has exited"
        if self._dashboard_pid is None:
            return None  # no socket table here (head_listener.py): the kernel-chosen port is the protection
        if _start_time(self._dashboard_pid) is None:
            return f"the local Ray head's dashboard (pid {self._dashboard_pid}) has exited"
        if sock is None:
            return None  # the connection failed and the head still runs: the caller's own error stands
        local, peer = sock.getsockname(), sock.getpeername()
        return connection_problem((local[0], local[1]), (peer[0], peer[1]), self._dashboard_pid)

    def job_api(self, request_timeout: Optional[float] = None) -> "RayJobs":
        """The head's Job API: the token on every request, and every connection proven to reach this head."""
        from raybridge.jobapi.client import DEFAULT_REQUEST_TIMEOUT, RayJobs

        assert self.dashboard_url is not None, "the head has not started"
        return RayJobs(
            self.dashboard_url,
            headers=self.auth_headers or None,
            request_timeout=request_timeout or DEFAULT_REQUEST_TIMEOUT,
            peer_check=self.peer_problem,
        )

    def _answers(self, path: str) -> bool:
        """True when the dashboard answers `path` with a success, over a connection proven to be the head's."""
        from raybridge.jobapi.verified_transport import PeerRefused, verified_session

        if self._session is None:
            self._session = verified_session(self.peer_problem)
        try:
            response = self._session.get(f"{self.dashboard_url}{path}", headers=self.auth_headers, timeout=2)
            return bool(200 <= response.status_code < 300)
        except PeerRefused as refused:
            self.stop()
            raise InfraError(f"the local Ray head's dashboard is not the head's own: {refused}") from None
        except Exception:
            return False

    def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self._log_path.read_text(errors="replace") if self._log_path else ""
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:]) or "(empty log)"

    def release(self) -> None:
        """Tell the supervisor to end the head and return at once.

        The supervisor runs in a session of its own and outlives this process
        if need be: it kills the head's processes and removes the temp dir on
        its own, so the job's result need not wait for Ray to wind down.
        """
        proc, self._supervisor = self._supervisor, None
        self._close_session()
        temp_dir, self.temp_dir = self.temp_dir, None  # the supervisor removes it
        if proc is not None and proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                pass
        # Closed first, looked at second (the supervisor marks first, looks at stdin second): a head that died on
        # its own leaves the dir to raybridge unless the supervisor saw stdin closed, and one of the two removes it.
        if proc is not None and temp_dir is not None and (proc.poll() is not None or (temp_dir / HEAD_EXITED_MARKER).exists()):
            shutil.rmtree(temp_dir, ignore_errors=True)

    def stop(self, timeout: float = 20.0) -> None:
        """Close the supervisor's stdin and wait until it has ended the head's whole process group."""
        proc, self._supervisor = self._supervisor, None
        self._close_session()
        if proc is not None:
            try:
                if proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, 9)
                except OSError:
                    pass
                proc.wait(timeout=5)
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


def _import_job_client() -> None:
    """Import Ray's Job API client now (a second or more of CPU), overlapping the head's start."""
    try:
        import ray.job_submission  # noqa: F401
    except Exception:
        return  # the submission reports it, with context
    from raybridge.noise import after_ray_import

    after_ray_import()


def _write_token(temp_dir: Path) -> Path:
    """A fresh random token in `temp_dir`, readable by this user alone."""
    path = temp_dir / TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def _start_time(pid: int) -> Optional[str]:
    """The kernel's start time of `pid` (so a reused pid is not taken for the owner), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _write_owners(temp_dir: Path, pids: list[int]) -> None:
    """Written whole or not at all (a new file renamed over the old): another run's clean-up reading it meanwhile
    must never see it empty and take a live head's dir for a dead one's."""
    lines = [f"{pid} {_start_time(pid)}" for pid in pids]
    fresh = temp_dir / (OWNERS_FILE + ".new")
    fresh.write_text("\n".join(lines) + "\n")
    os.replace(fresh, temp_dir / OWNERS_FILE)


def _owned(temp_dir: Path) -> bool:
    """True while any process listed as its owner is alive (or the dir says nothing about owners yet)."""
    try:
        lines = (temp_dir / OWNERS_FILE).read_text().split("\n")
    except FileNotFoundError:
        try:  # a dir just made by another run that has not written its owners yet
            return time.time() - temp_dir.stat().st_mtime < 60
        except OSError:
            return False
    except OSError:
        return True
    for line in lines:
        pid, _, started = line.partition(" ")
        if pid.isdigit() and _start_time(int(pid)) == started:
            return True
    return False


def remove_stale_temp_dirs(root: Optional[str] = None) -> list[str]:
    """Remove private-head temp dirs whose owners are all gone (a run that was SIGKILLed with its supervisor)."""
    removed = []
    base = Path(root or tempfile.gettempdir())
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith(TEMP_PREFIX) and p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    for path in candidates:
        try:
            if path.stat().st_uid != os.getuid() or _owned(path):
                continue
        except OSError:
            continue
        end_processes_in(path)  # what escaped a head whose raybridge, supervisor and guard were killed together
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed
