"""The Ray Job API, through `ray.job_submission.JobSubmissionClient`.

A thin adapter: submit, status, details, logs (streamed or whole), stop,
with the client's errors turned into raybridge's `InfraError`. Both
backends use it, so a local run and a KubeRay run look the same to the user.

Every HTTP call is bounded (`request_timeout`, connect and read): the
client itself waits forever on a dashboard that accepts and never answers.
The log stream is a websocket that may rightly stay quiet for hours, so it
is watched instead: the job's status is polled beside it, and the stream is
dropped when the job has ended or the dashboard stops answering.

It does not start or find clusters; it is handed a dashboard address (and
the headers to send, e.g. a KubeRay auth token).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from urllib.parse import urlencode
from typing import Any, Callable, Optional

from raybridge.core.deadline import Deadline
from raybridge.errors import BadInput, InfraError
from raybridge.gpu.ray_start import ensure_ray_can_start
from raybridge.jobapi.verified_transport import PeerCheck, PeerRefused, verified_connector, verified_session
from raybridge.kube.retry import RetryPolicy
from raybridge.noise import after_ray_import

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
#: Where Ray's failure message starts quoting the log.
_LAST_LOGS = re.compile(r",?\s*last available logs", re.IGNORECASE)
#: Bound on one Job API call, connect and read.
DEFAULT_REQUEST_TIMEOUT = 30.0
#: How often the status is polled beside a log stream once the job has run a while.
STATUS_POLL_SECONDS = 2.0
#: How often it is polled during a job's first `FAST_POLL_WINDOW_SECONDS`: a short job's
#: end is noticed within a fraction of a second, a long job costs no more requests than before.
FAST_POLL_SECONDS = 0.25
FAST_POLL_WINDOW_SECONDS = 60.0
#: How long a stream may go on delivering the last lines after the job has ended; whatever
#: it has not delivered by then is read from the whole log instead (one request, no waiting
#: for Ray's own tail loop to notice the end and close the WebSocket).
DRAIN_SECONDS = 0.3
#: How many times a dropped log stream is opened again while its job runs (each: a connection, a port-forward stream).
TAIL_RECONNECTS = 8
#: Submission attempts while a just-started head's job agent registers: every 0.25 s while `retry_for` lasts
#: (the one retry policy, kube/retry.py, with a deadline and a constant backoff).
SUBMIT_RETRY_POLICY = RetryPolicy(first_backoff=0.25, max_backoff=0.25)


def _bounded_client(address: str, headers: Optional[dict[str, str]], request_timeout: float, peer_check: Optional[PeerCheck] = None) -> Any:
    """A JobSubmissionClient whose every HTTP request carries a (connect, read) timeout; with `peer_check`, whose
    every connection (requests, log tails) is checked once established, before the headers go out
    (`verified_transport.py`)."""
    from ray.job_submission import JobSubmissionClient

    import requests

    after_ray_import()
    # One session, so requests reuse their connection (HTTP keep-alive): Ray's client opens a new one per request
    # (ray@2.60 dashboard_sdk.py _do_request, `requests.request`), and through a port-forward every new connection
    # is a new stream through the API server: about 100 a minute while a job's status is polled beside its log.
    session = verified_session(peer_check) if peer_check is not None else requests.Session()

    class BoundedJobSubmissionClient(JobSubmissionClient):  # type: ignore[misc,valid-type]
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", (request_timeout, request_timeout))
            return _checked_request(self, session, method, endpoint, **kwargs)

        async def tail_job_logs(self, job_id: str) -> Any:
            if peer_check is None:
                async for chunk in super().tail_job_logs(job_id):
                    yield chunk
                return
            async for chunk in _checked_log_tail(self, peer_check, job_id):
                yield chunk

    return BoundedJobSubmissionClient(address, headers=headers)


def _checked_request(client: Any, session: Any, method: str, endpoint: str, *, data: Optional[bytes] = None,
                     json_data: Optional[dict[str, Any]] = None, **kwargs: Any) -> Any:  # fmt: skip
    """Ray's `SubmissionClient._do_request` (ray@2.60 dashboard/modules/dashboard_sdk.py), through `session`."""
    from ray.dashboard.modules.dashboard_sdk import format_authentication_http_error

    response = session.request(method, client._address + endpoint, cookies=client._cookies, data=data, json=json_data,
                               headers=client._headers, verify=client._verify, **kwargs)  # fmt: skip
    formatted = format_authentication_http_error(response.status_code, response.text)
    if formatted:
        raise InfraError(formatted)
    return response


async def _checked_log_tail(client: Any, peer_check: PeerCheck, job_id: str) -> Any:
    """Ray's `JobSubmissionClient.tail_job_logs` (ray@2.60 dashboard/modules/job/sdk.py: one WebSocket, its TEXT
    messages yielded until it closes), over a connection `peer_check` accepted."""
    import aiohttp

    async with aiohttp.ClientSession(cookies=client._cookies, headers=client._headers, connector=verified_connector(peer_check)) as session:
        ws = await session.ws_connect(f"{client._address}/api/jobs/{job_id}/logs/tail", headers=client._headers)
        while True:
            message = await ws.receive()
            if message.type == aiohttp.WSMsgType.TEXT:
                yield message.data
            elif message.type == aiohttp.WSMsgType.CLOSED:
                if ws.close_code == aiohttp.WSCloseCode.ABNORMAL_CLOSURE:
                    raise InfraError(f"the log stream of {job_id} closed unexpectedly (code {ws.close_code})")
                return
            elif message.type == aiohttp.WSMsgType.ERROR:
                raise InfraError(f"the log stream of {job_id} broke: {ws.exception()}")


@dataclass(frozen=True)
class JobOutcome:
    """How a Ray job ended, in Ray's words: its status, Ray's message and the entrypoint's exit code."""

    status: str
    message: Optional[str] = None
    exit_code: Optional[int] = None

    def describe(self, width: int = 300) -> str:
        """`failed (exit code 3): <Ray's message>`, the message cut at a word boundary.

        Ray appends the last lines of the log to its failure message; they were
        streamed already, so they are left out here.
        """
        import textwrap

        text = self.status.lower() + (f" (exit code {self.exit_code})" if self.exit_code is not None else "")
        message = _LAST_LOGS.split(self.message or "", maxsplit=1)[0].strip().rstrip(",")
        if message:
            text += ": " + textwrap.shorten(message, width=width, placeholder=" ...")
        return text


class RayJobs:
    def __init__(
        self,
        address: str,
        headers: Optional[dict[str, str]] = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        peer_check: Optional[PeerCheck] = None,
    ) -> None:
        ensure_ray_can_start()
        self.address = address
        try:
            self.client = _bounded_client(address, headers, request_timeout, peer_check)
        except PeerRefused as exc:
            raise InfraError(f"cannot reach the Ray Job API at {address}: {exc}") from None
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError from the client
            raise InfraError(f"cannot reach the Ray Job API at {address}: {_first_line(exc)}") from None

    def submit(
        self,
        entrypoint: str,
        submission_id: str,
        runtime_env: Optional[dict[str, Any]],
        metadata: Optional[dict[str, str]] = None,
        retry_for: float = 0.0,
    ) -> str:
        """Submit once; with `retry_for`, keep trying server errors that long.

        A head that has just started can answer 500 until its job agent has
        registered. The submission id is fixed, so a retry never runs the job twice.
        Ray answers an id it knows with a 500 ("already exists"): after a failed
        attempt that is this run's job, which got through after all; to the first
        attempt it is another job under that id (BadInput), never taken for ours.
        """
        deadline = Deadline.after(retry_for, time.monotonic)
        failed_before = False
        attempt = 0
        while True:
            attempt += 1
            try:
                return self.client.submit_job(
                    entrypoint=entrypoint, submission_id=submission_id, runtime_env=runtime_env or None, metadata=metadata
                )
            except PeerRefused:
                raise
            except Exception as exc:
                text = str(exc)
                if "already exists" in text:
                    if failed_before:
                        return submission_id  # an earlier attempt got through after all
                    raise BadInput(
                        f"the Ray cluster at {self.address} already has a job with submission id {submission_id}, "
                        "not submitted by this run: a submission id names one job; choose another (--submission-id)"
                    ) from None
                wait = SUBMIT_RETRY_POLICY.wait_before_retry(attempt, "status", deadline) if "status code 5" in text else None
                if wait is None:
                    raise InfraError(f"submitting to the Ray Job API at {self.address} failed: {_first_line(exc)}") from None
                failed_before = True
                time.sleep(wait)

    def status(self, submission_id: str) -> str:
        try:
            return str(self.client.get_job_status(submission_id).value)
        except PeerRefused:
            raise
        except Exception as exc:
            raise InfraError(f"reading job {submission_id} from {self.address}: {_first_line(exc)}") from None

    def outcome(self, submission_id: str) -> JobOutcome:
        """The job's status with Ray's message and the driver's exit code, as far as Ray reports them."""
        try:
            info = self.client.get_job_info(submission_id)
        except PeerRefused:
            raise
        except Exception as exc:
            raise InfraError(f"reading job {submission_id} from {self.address}: {_first_line(exc)}") from None
        status = getattr(info.status, "value", str(info.status))
        return JobOutcome(str(status), getattr(info, "message", None) or None, getattr(info, "driver_exit_code", None))

    def logs(self, submission_id: str) -> str:
        """The whole log. Output that is not UTF-8 makes the Job API answer 500; the raw log file is
        then read through Ray's log API and decoded with replacement characters."""
        try:
            return self.client.get_job_logs(submission_id)
        except Exception as exc:
            first_error = exc
        try:
            return self._raw_driver_log(submission_id)
        except Exception:
            raise InfraError(f"reading logs of {submission_id} from {self.address}: {_first_line(first_error)}") from None

    def _raw_driver_log(self, submission_id: str) -> str:
        info = self.client.get_job_info(submission_id)
        node = getattr(info, "driver_node_id", None)
        if not node:
            raise InfraError(f"job {submission_id} has no driver node to read the log from")
        query = urlencode({"filename": f"job-driver-{submission_id}.log", "node_id": node, "lines": -1})
        response = self.client._do_request("GET", f"/api/v0/logs/file?{query}")
        if response.status_code != 200:
            raise InfraError(f"Ray's log API answered {response.status_code}")
        return bytes(response.content).decode("utf-8", errors="replace")

    def stop(self, submission_id: str) -> bool:
        try:
            return bool(self.client.stop_job(submission_id))
        except Exception:
            return False

    def stream_logs(self, submission_id: str, write: Callable[[str], None], poll: float = STATUS_POLL_SECONDS) -> Optional[str]:
        """Write log chunks as they come until the job ends; the final status, or None if the dashboard went away.

        The caller falls back to polling the status (or the RayJob) when this returns None.
        """

        written = 0

        async def tail_once() -> None:
            """One log stream; Ray sends the log from its start, so what was written already is skipped."""
            nonlocal written
            seen = 0
            async for chunk in self.client.tail_job_logs(submission_id):
                fresh = chunk[max(0, written - seen):]
                seen += len(chunk)
                if fresh:
                    write(fresh)
                    written += len(fresh)

        async def tail() -> None:
            """The log stream, opened again when it drops while the job runs (a proxy or port-forward closing it),
            up to TAIL_RECONNECTS times, a second apart and doubling: the output goes on as it comes."""
            for attempt in range(TAIL_RECONNECTS + 1):
                try:
                    await tail_once()
                except InfraError:
                    pass
                except Exception:  # noqa: BLE001 - a broken connection, said as the stream's end below
                    pass
                try:
                    status = await asyncio.get_running_loop().run_in_executor(None, self.status, submission_id)
                except InfraError:
                    return
                if status in TERMINAL or attempt == TAIL_RECONNECTS:
                    return
                await asyncio.sleep(min(2.0 ** attempt, 30.0))

        async def watch() -> Optional[str]:
            loop = asyncio.get_running_loop()
            fast_until = time.monotonic() + FAST_POLL_WINDOW_SECONDS
            while True:
                await asyncio.sleep(min(poll, FAST_POLL_SECONDS) if time.monotonic() < fast_until else poll)
                try:
                    status = await loop.run_in_executor(None, self.status, submission_id)
                except InfraError:
                    return None
                if status in TERMINAL:
                    return status

        async def both() -> Optional[str]:
            tailing = asyncio.ensure_future(tail())
            watching = asyncio.ensure_future(watch())
            done, _ = await asyncio.wait({tailing, watching}, return_when=asyncio.FIRST_COMPLETED)
            if watching in done:
                # Ended, or the dashboard stopped answering: let the stream deliver what it has at hand;
                # the rest comes from the whole log below.
                await asyncio.wait({tailing}, timeout=DRAIN_SECONDS)
                tailing.cancel()
                await asyncio.gather(tailing, return_exceptions=True)
                return watching.result()
            # The stream ended or broke (a proxy closing the WebSocket) before the job did: its error is
            # not the job's. Keep watching the status; what the stream missed is written once it ends.
            await asyncio.gather(tailing, return_exceptions=True)
            return await watching

        try:
            final = asyncio.run(both())
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            final = None  # the stream broke; the caller polls the status instead
        self._write_missed_output(submission_id, written, write, known_terminal=final in TERMINAL)
        return final

    def _write_missed_output(
        self, submission_id: str, written: int, write: Callable[[str], None], known_terminal: bool = False
    ) -> None:
        """Once the job has ended, write what the stream did not deliver (it stops at output that is not
        UTF-8, and it is cut short once the job has ended)."""
        try:
            if not known_terminal and self.status(submission_id) not in TERMINAL:
                return
            whole = self.logs(submission_id)
        except InfraError:
            return
        if len(whole) > written:
            write(whole[written:])

    def wait(self, submission_id: str, timeout: Optional[float] = None, poll: float = 0.5) -> str:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status(submission_id)
            if status in TERMINAL:
                return status
            if deadline is not None and time.monotonic() > deadline:
                return status
            time.sleep(poll)


def _first_line(exc: BaseException) -> str:
    """The telling line of an error: the exception line of a server-side traceback, else the first."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if "Traceback (most recent call last)" in lines[0]:
        return f"{lines[0].split('Traceback')[0].strip()} {lines[-1].strip()}".strip()
    return lines[0]
