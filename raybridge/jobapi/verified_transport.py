"""HTTP and WebSocket connections to a Job API that are checked after they are established, before a byte is sent.

Why it exists: the private head's bearer token must reach the head alone. A port proven to be the head's
when it started can be freed later (the dashboard crashed, the head died) and bound by another local user,
who would then receive the token with the next status poll and could answer with a forged job status. Ray's
client opens a connection per request (`requests.request`) and one for each log tail (aiohttp), so each of
those connections is handed, once connected, to a check the caller gives (`PeerCheck`: the private head's
proof of its own dashboard, `jobs/head_listener.py`); a connection it refuses is closed unsent and the
request ends in `PeerRefused`, which no retry of the HTTP stack catches.

Connections of a `requests.Session` are kept alive and reused: a reused connection was checked when made,
and a head gone since shows as a reset, not as someone else's answer.

What it deliberately does not do: decide what a good peer is (the check does), or speak TLS (the private
head is plain HTTP on loopback; a cluster's dashboard is reached without a check).
"""

from __future__ import annotations

import socket
from typing import Any, Callable, Optional

from raybridge.errors import InfraError

#: Given a connected socket, why its peer must not receive the request (None: send it). Given None after a
#: connection failed, why the peer cannot be reached where the check knows (the head has exited), else None.
PeerCheck = Callable[[Optional[socket.socket]], Optional[str]]


class PeerRefused(InfraError):
    """A connection was established to something that is not the expected peer; nothing was sent over it."""


def _refuse_unless_ours(sock: Any, check: PeerCheck) -> None:
    problem = check(sock)
    if problem is not None:
        try:
            sock.close()
        except OSError:
            pass
        raise PeerRefused(f"{problem}: nothing was sent to it")


def _refuse_if_gone(check: PeerCheck) -> None:
    """After a failed connect: the peer's own reason (a head that has exited) instead of "connection refused"."""
    problem = check(None)
    if problem is not None:
        raise PeerRefused(problem)


def verified_session(check: PeerCheck) -> Any:
    """A `requests.Session` whose every new plain-HTTP connection passes `check` before its request is sent."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection
    from urllib3.connectionpool import HTTPConnectionPool

    class CheckedConnection(HTTPConnection):
        def connect(self) -> None:
            try:
                super().connect()
            except Exception:
                _refuse_if_gone(check)
                raise
            _refuse_unless_ours(self.sock, check)

    class CheckedPool(HTTPConnectionPool):
        ConnectionCls = CheckedConnection

    class CheckedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": CheckedPool}

    session = requests.Session()
    session.trust_env = False  # a proxy of the environment would be the peer checked, not the head
    adapter = CheckedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", _refusing_adapter())
    return session


def _refusing_adapter() -> Any:
    from requests.adapters import BaseAdapter

    class RefusingAdapter(BaseAdapter):  # type: ignore[misc]
        def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            raise PeerRefused(f"{request.url}: only plain HTTP on loopback is checked, so nothing was sent")

        def close(self) -> None:
            pass

    return RefusingAdapter()


def verified_connector(check: PeerCheck) -> Any:
    """An aiohttp connector whose every connection passes `check` before the request (a WebSocket upgrade with the
    token) is written. aiohttp opens the socket in `TCPConnector._wrap_create_connection` (aiohttp 3.9 to 3.14);
    without that method the connector refuses every connection rather than send unchecked."""
    import asyncio

    import aiohttp

    class CheckedConnector(aiohttp.TCPConnector):  # type: ignore[misc]
        async def _wrap_create_connection(self, *args: Any, **kwargs: Any) -> Any:
            opened = getattr(super(), "_wrap_create_connection", None)
            if opened is None:
                raise PeerRefused("this aiohttp opens connections where raybridge cannot check them")
            try:
                transport, protocol = await opened(*args, **kwargs)
            except Exception:
                gone = await asyncio.get_running_loop().run_in_executor(None, check, None)
                if gone is not None:
                    raise PeerRefused(gone) from None
                raise
            sock = transport.get_extra_info("socket")
            if sock is None:
                transport.close()
                raise PeerRefused("the connection's socket cannot be read")
            problem = await asyncio.get_running_loop().run_in_executor(None, check, sock)
            if problem is not None:
                transport.close()
                raise PeerRefused(f"{problem}: nothing was sent to it")
            return transport, protocol

    return CheckedConnector(force_close=True)
