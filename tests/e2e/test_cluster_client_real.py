"""The test cluster's admin client (testcluster/client.py `ClusterClient`) on the session's real cluster: its
discovery cache is private to it and gone with it.

Why this module exists: the kubernetes client's dynamic client caches discovery in /tmp/osrcp-<md5 of the server
URL>.json by default (kubernetes/dynamic/discovery.py `Discoverer.__init__`), a name another local user can guess and
write first, which the client then loads; and every client of every stack left one behind (2,583 on this machine).

What it deliberately does not do: check raybridge's own clients (they use the typed API, no discovery cache).
"""

from __future__ import annotations

import hashlib
import stat
import tempfile
from pathlib import Path
from typing import Any

from testcluster.client import ClusterClient


def test_the_clients_discovery_cache_is_its_own_and_gone_once_it_is_closed(real_admin: tuple[Any, str]) -> None:
    admin, kubeconfig = real_admin
    shared = Path(tempfile.gettempdir()) / f"osrcp-{hashlib.md5(admin.url.encode()).hexdigest()}.json"
    client = ClusterClient(Path(kubeconfig))
    try:
        assert client.get_object("v1", "Namespace", "default") is not None  # discovery read (and written to its cache)
        cache = client.discovery_cache
        assert (cache / "discovery.json").is_file()
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    finally:
        client.close()
    assert not cache.exists()
    assert not shared.exists(), shared  # no client wrote the guessable name
