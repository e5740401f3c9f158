"""`python -m testcluster up --kubeconfig` writes the cluster's admin key into a file of its own, never another's.

`up` refuses (status 2, one line, before anything starts) a path that is a symbolic link, a file of another user's or
in a directory others may write to that is not sticky, makes a missing directory owner-only, and writes a new
owner-only file renamed into place: a file another user put at the path after the check is replaced, not written
into. Where the tests run as root, the other user is `nobody`, as a file owner and as a reader (a forked child).
The same as user nobody against the real command: tests/e2e/test_testcluster_attacks.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root to switch users")


def _read_as_nobody(path: Path) -> str:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            answer = path.read_text()
        except OSError as exc:
            answer = type(exc).__name__
        os.write(write_end, answer.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return text


def _refusal(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from testcluster.__main__ import _kubeconfig_destination

    with pytest.raises(SystemExit) as stopped:
        _kubeconfig_destination(path)
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    return lines[0]


@root_only
def test_up_refuses_a_kubeconfig_that_another_user_made_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o1777)
    folder.chmod(0o1777)
    theirs = folder / "tc.kubeconfig"
    theirs.touch()
    os.chown(theirs, NOBODY, NOBODY)
    assert "belongs to user id 65534, not to you" in _refusal(theirs, capsys)
    link = folder / "link.kubeconfig"
    link.symlink_to(folder / "elsewhere")
    assert "is a symbolic link" in _refusal(link, capsys)


def test_up_refuses_a_kubeconfig_in_a_directory_others_may_write_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)  # not sticky: anyone could replace the file once written
    assert "other users may write to its directory" in _refusal(folder / "tc.kubeconfig", capsys)


def test_up_makes_a_missing_directory_owner_only_and_writes_the_kubeconfig_owner_only(tmp_path: Path) -> None:
    from testcluster.__main__ import _kubeconfig_destination
    from testcluster.private_files import replace_privately

    path = _kubeconfig_destination(tmp_path / "new" / "tc.kubeconfig")
    assert path.parent.stat().st_mode & 0o777 == 0o700
    replace_privately(path, b"key")
    replace_privately(path, b"key 2")  # a second `up` replaces its own file
    assert path.read_text() == "key 2" and path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["tc.kubeconfig"]


@root_only
def test_a_file_put_in_the_kubeconfigs_place_after_the_check_does_not_receive_the_key(tmp_path: Path) -> None:
    """Another user's file (or link) put at the path between the check and the write is replaced, never written into."""
    from testcluster.private_files import replace_privately

    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    theirs = folder / "theirs"
    theirs.touch()
    os.chown(theirs, NOBODY, NOBODY)
    path = folder / "tc.kubeconfig"
    path.symlink_to(theirs)
    replace_privately(path, b"admin key")
    assert theirs.read_text() == "" and not path.is_symlink()
    assert path.read_text() == "admin key" and path.stat().st_uid == os.getuid()
    assert _read_as_nobody(path) == "PermissionError"
