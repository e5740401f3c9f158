"""The simulated API server answers its owner's sockets alone: another local user's connection is closed unanswered.

It answers with an admin's rights and port-forwards head pods to the tests' Ray head, so on a machine the tests
share, a second user who found its port could otherwise read and write the test cluster and reach the head.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kubesim.server import KubeApiServer

NOBODY = 65534

ASK = textwrap.dedent(
    """
    import os, socket, sys
    if len(sys.argv) > 2:
        os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[2]))
    s = socket.socket()  # not create_connection: its name lookup imports a codec nobody cannot read
    s.settimeout(5)
    s.connect(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"GET /api HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
    except OSError:
        pass
    print(repr(got[:40]))
    """
)


def _ask(port: int, *as_user: str) -> str:
    out = subprocess.run([sys.executable, "-c", ASK, str(port), *as_user], capture_output=True, text=True, timeout=30, cwd="/")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="whose a socket is: Linux's socket table")
@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another user needs root to become that user")
def test_another_user_gets_no_answer_and_the_owner_does() -> None:
    server = KubeApiServer(crds=[]).start()
    try:
        port = int(server.url.rsplit(":", 1)[1])
        assert _ask(port).startswith("b'HTTP/1.1 ")  # an answer (403: no token given), not a closed connection
        assert _ask(port, str(NOBODY)) == "b''"
    finally:
        server.stop()
