"""A port-forward stream cut under the official client's pump thread prints no traceback (kube/portforward.py):
the thread's exception goes to the debug log; other threads' exceptions still reach the previous hook."""

from __future__ import annotations

import threading

import pytest

from raybridge.kube import portforward


def _raise_in_thread(name: str) -> None:
    def boom() -> None:
        raise RuntimeError("Unexpected channel number: 7")

    thread = threading.Thread(target=boom, name=name)
    thread.start()
    thread.join()


def test_the_client_s_stream_threads_fail_quietly_and_others_do_not(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.thread.name))
    monkeypatch.setattr(portforward, "_hooked", False)
    portforward._quiet_stream_threads()
    _raise_in_thread(f"{portforward.CLIENT_THREAD_PREFIX}: 8265")
    _raise_in_thread("someone-else")
    assert seen == ["someone-else"]
    assert "Traceback" not in capsys.readouterr().err
