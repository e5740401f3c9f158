"""A working dir uploads what users of Ray and git expect, and nothing that leads out of it or looks like a secret.

The job lists what arrived. Left out: `.env` and `key.pem` (secrets by their names), a symlinked
file and a symlinked directory that point outside, a FIFO (Ray would block reading it), and
what `.gitignore` and the runtime env's `excludes` name. raybridge says before the upload how
many files and bytes go and what it left out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from raybridge.jobs.decision.upload import (
    REASON_DIR_LINK, REASON_HARD_LINK, REASON_HARD_LINK_TO_SECRET, REASON_LINK_TO_SECRET, REASON_OUTSIDE, REASON_SECRET,
    REASON_SPECIAL, Entry, anchored_pattern, looks_secret, plan_upload,
)  # fmt: skip
from raybridge.jobs.upload import _matcher, list_working_dir
from tests.helpers import EXAMPLES as ROOT_EXAMPLES, run_cli

LIST_FILES = "import os\nfor d, _, fs in os.walk('.'):\n    for f in fs: print('UPLOADED', os.path.join(d, f)[2:])\n"


def _working_dir(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text("outside secret")
    (outside / "dir" / "id.txt").write_text("outside dir")
    wd = tmp_path / "wd"
    (wd / "data").mkdir(parents=True)
    (wd / "main.py").write_text(LIST_FILES)
    (wd / "data" / "inside.txt").write_text("12345")
    (wd / ".env").write_text("API_KEY=hunter2")
    (wd / "key.pem").write_text("-----BEGIN PRIVATE KEY-----")
    (wd / ".gitignore").write_text("ignored.txt\n")
    (wd / "ignored.txt").write_text("ignored")
    (wd / "excluded.txt").write_text("excluded")
    (wd / "inside_link").symlink_to(wd / "data" / "inside.txt")
    (wd / ".ssh").mkdir()
    (wd / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    (wd / "notes.txt").symlink_to(wd / ".ssh" / "id_ed25519")  # the key under another name
    (wd / "outside_link").symlink_to(outside / "secret.txt")
    (wd / "outside_dir").symlink_to(outside / "dir")
    os.mkfifo(wd / "pipe")
    return wd


def test_submit_uploads_only_what_belongs_and_says_so(tmp_path: Path, ray_head: Any) -> None:
    """Through the session's shared head: what is uploaded is the subject here, not the head."""
    wd = _working_dir(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"entrypoint": "python main.py", "workingDir": str(wd), "runtimeEnv": {"excludes": ["excluded.txt"]}}))
    out = run_cli("submit", "--address", ray_head.dashboard_url, str(spec), timeout=240)
    assert out.returncode == 0, out.stderr
    uploaded = sorted(line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("UPLOADED "))
    assert uploaded == [".gitignore", "data/inside.txt", "inside_link", "main.py"]
    said = [line for line in out.stderr.splitlines() if line.startswith("uploading working dir")]
    assert said and "4 files" in said[0], out.stderr
    assert "and 2 more" in said[0], said  # seven left out, five named
    left_out = {path for path, _ in plan_upload(list_working_dir(wd.resolve(), ["excluded.txt"])).left_out}
    assert left_out == {".env", "key.pem", "outside_link", "outside_dir", "pipe", ".ssh/id_ed25519", "notes.txt"}


# (case, entries, files, bytes, left out)
PLANS = [
    ("plain files go", [Entry("a.py", "file", 10), Entry("d", "dir"), Entry("d/b.py", "file", 5)], 2, 15, []),
    ("secrets by name", [Entry(".env", "file", 1), Entry("x/tls.key", "file", 1), Entry("id_ed25519", "file", 1)], 0, 0,
     [(".env", REASON_SECRET), ("x/tls.key", REASON_SECRET), ("id_ed25519", REASON_SECRET)]),
    ("credentials directories", [Entry(".aws/config", "file", 1), Entry("home/.ssh/known_hosts", "file", 1)], 0, 0,
     [(".aws/config", REASON_SECRET), ("home/.ssh/known_hosts", REASON_SECRET)]),
    ("templates and public keys are no secrets", [Entry(".env.example", "file", 3), Entry("id_rsa.pub", "file", 4)], 2, 7, []),
    ("a link inside goes, one outside does not", [Entry("in", "file-link", 3), Entry("out", "file-link", 0, inside=False)], 1, 3,
     [("out", REASON_OUTSIDE)]),
    ("a symlinked directory is never followed", [Entry("lib", "dir-link", inside=True)], 0, 0, [("lib", REASON_DIR_LINK)]),
    ("a FIFO or socket is left out", [Entry("pipe", "other")], 0, 0, [("pipe", REASON_SPECIAL)]),
    ("a link inside to a secret uploads the secret: left out", [Entry("notes.txt", "file-link", 9, target=".ssh/id_ed25519")], 0, 0,
     [("notes.txt", REASON_LINK_TO_SECRET)]),
    ("a file also named outside the upload is left out", [Entry("notes.txt", "file", 9, inside=False)], 0, 0,
     [("notes.txt", REASON_HARD_LINK)]),
    ("a hard link to a secret under another name", [Entry(".env", "file", 3), Entry("config.txt", "file", 3, target=".env")], 0, 0,
     [(".env", REASON_SECRET), ("config.txt", REASON_HARD_LINK_TO_SECRET)]),
]

# (name, whether it looks like a secret): what a reviewer found passing, and what must not be caught
SECRET_NAMES = [
    (".vault-token", True), ("secrets.yaml", True), ("service-account.json", True), ("my-service-account-key.json", True),
    (".dockercfg", True), ("prod.tfvars", True), ("id_rsa.bak", True), (".bash_history", True), (".python_history", True),
    ("x.pem ", True), ("x.pem.", True), ("id_rsa.pub", False), ("secrets.py", False), ("history.py", False),
    ("accounts.json", False), ("README.md", False),
]


@pytest.mark.parametrize("name, secret", SECRET_NAMES, ids=[repr(n[0]) for n in SECRET_NAMES])
def test_names_that_hold_credentials(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret
    assert looks_secret(f"deep/dir/{name}") is secret


@pytest.mark.parametrize("case, entries, files, size, left_out", PLANS, ids=[p[0] for p in PLANS])
def test_plan_upload(case: str, entries: list[Entry], files: int, size: int, left_out: list[tuple[str, str]]) -> None:
    plan = plan_upload(entries)
    assert (plan.files, plan.bytes, list(plan.left_out)) == (files, size, left_out), case
    assert len(plan.excludes) == len(left_out)


@pytest.mark.parametrize("name", ["a*b", "[x]", "q?", "back\\slash", "trailing ", "#hash", "!bang", "sp ace"])
def test_an_anchored_pattern_leaves_out_that_path_alone_under_rays_matcher(tmp_path: Path, name: str) -> None:
    (tmp_path / "sub").mkdir()
    for path in (tmp_path / name, tmp_path / "sub" / name, tmp_path / "other"):
        path.write_text("x")
    listed = {e.path for e in list_working_dir(tmp_path, [anchored_pattern(name)])}
    assert listed == {"sub", f"sub/{name}", "other"}
    assert _matcher(tmp_path, [anchored_pattern(f"sub/{name}")])(tmp_path / "sub" / name)


def test_looks_secret_reads_names_not_contents() -> None:
    assert looks_secret("config/prod.env") and looks_secret("certs/server.PEM")
    assert not looks_secret("environment.py") and not looks_secret("keys.py")


def test_a_working_dir_larger_than_ray_uploads_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A sparse 1 GiB file: Ray would read and hash all of it before refusing the package (its limit is the gRPC
    message size, 512 MiB in ray@2.60, packages zipped uncompressed); raybridge refuses it from the listing."""
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "main.py").write_text("print(1)\n")
    with open(wd / "huge.bin", "wb") as f:
        f.truncate(1 << 30)
    out = run_cli("submit", "--dry-run", "--working-dir", str(wd), "--", "python", "main.py", timeout=60)
    assert out.returncode == 2, out.stderr
    assert "workingDir: 1.0 GiB in 2 files" in out.stderr and "more than Ray uploads (512.0 MiB" in out.stderr
    assert "dry run" not in out.stderr  # nothing planned past the refusal


def _spec(tmp_path: Path, runtime_env: dict[str, Any], working_dir: str | None = None) -> str:
    spec = {"entrypoint": "python main.py", "runtimeEnv": runtime_env, **({"workingDir": working_dir} if working_dir else {})}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


def _module(tmp_path: Path, *extra: str) -> Path:
    module = tmp_path / "mylib"
    module.mkdir()
    (module / "__init__.py").write_text("X = 1\n")
    for name in extra:
        (module / name).write_text("API_KEY=hunter2\n")
    return module


# (case, runtime env for a temp dir, exit status, what stderr says)
LOCAL_PATH_ROWS = [
    ("a py_modules directory holding a secret is refused, naming it",
     lambda t: {"py_modules": [str(_module(t, ".env"))]}, 2, "holds what raybridge never uploads: .env (looks like a secret)"),
    ("a clean py_modules directory is reported as the working dir is",
     lambda t: {"py_modules": [str(_module(t))]}, 0, "would upload py_modules "),
    ("a py_modules URI is Ray's to fetch", lambda t: {"py_modules": ["s3://bucket/lib.zip"]}, 0, "dry run"),
    ("a py_modules directory larger than Ray uploads is refused before it is read",
     lambda t: {"py_modules": [str(_sparse(_module(t), 1 << 30))]}, 2, "runtimeEnv.py_modules: 1.0 GiB in 2 files under"),
    ("pip from a file that looks like a secret", lambda t: {"pip": str(_module(t, "id_rsa") / "id_rsa")}, 2, "looks like a secret"),
    ("pip from a directory", lambda t: {"pip": "/etc"}, 2, "not a regular file"),
    ("pip from a requirements file", lambda t: {"pip": _requirements(t)}, 0, "dry run"),
    ("pip packages by name", lambda t: {"pip": ["requests"]}, 0, "dry run"),
]


def _sparse(directory: Path, size: int) -> Path:
    """`directory` with a sparse file of `size` bytes in it (no disk used, but Ray would read every byte)."""
    with open(directory / "weights.bin", "wb") as f:
        f.truncate(size)
    return directory


def _requirements(tmp_path: Path) -> str:
    path = tmp_path / "requirements.txt"
    path.write_text("requests\n")
    return str(path)


@pytest.mark.parametrize("case, runtime_env, status, said", LOCAL_PATH_ROWS, ids=[r[0] for r in LOCAL_PATH_ROWS])
def test_every_local_path_of_the_runtime_env_passes_the_same_filter(tmp_path: Path, case: str, runtime_env: Any, status: int, said: str) -> None:
    out = run_cli("submit", "--dry-run", _spec(tmp_path, runtime_env(tmp_path)), timeout=60)
    assert out.returncode == status, (case, out.stderr)
    assert said in out.stderr, (case, out.stderr)
    assert "Traceback" not in out.stderr


def test_an_upload_is_said_when_it_is_near_would_upload_in_a_dry_run_and_never_before_an_error(tmp_path: Path) -> None:
    """A dry run says what it would upload, after saying it creates nothing; a submit that fails before any
    submission (an API server that refuses) says nothing of an upload."""
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "main.py").write_text("print('hi')\n")
    spec = _spec(tmp_path, {}, working_dir=str(wd))
    dry = run_cli("submit", "--dry-run", spec, timeout=60)
    lines = dry.stderr.splitlines()
    assert dry.returncode == 0, dry.stderr
    would = [i for i, line in enumerate(lines) if line.startswith("would upload working dir ")]
    assert would and would[0] > lines.index("dry run, nothing is created"), dry.stderr
    assert not any(line.startswith("uploading") for line in lines), dry.stderr
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    refused = run_cli("submit", spec, "--kubeconfig", str(kubeconfig), "--request-timeout", "2", timeout=60)
    assert refused.returncode == 3, refused.stderr
    assert "upload" not in refused.stderr, refused.stderr


def test_a_ray_without_the_internals_the_filter_shares_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter lists the working dir with Ray's own matcher and limit; a Ray that moved them is refused, never
    silently filtered by another rule than the one Ray uploads by."""
    import ray._private.runtime_env.packaging as packaging

    from raybridge.errors import InfraError
    from raybridge.jobs.upload import plan_working_dir_upload

    monkeypatch.delattr(packaging, "GCS_STORAGE_MAX_SIZE")
    with pytest.raises(InfraError, match="has no ray._private.runtime_env.packaging.GCS_STORAGE_MAX_SIZE"):
        plan_working_dir_upload(str(ROOT_EXAMPLES / "hello"), None)


def _hard_linked_working_dir(tmp_path: Path) -> Path:
    """A working dir with hard links: to a file outside it (the key, as `ln ~/.ssh/id_rsa notes.txt` makes), to a
    secret inside it under a harmless name, between two plain files inside it, and a symlink to the outside one's
    name inside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    wd = tmp_path / "wd"
    (wd / "data").mkdir(parents=True)
    (wd / "main.py").write_text(LIST_FILES)
    os.link(outside / "id_ed25519", wd / "notes.txt")
    os.symlink(wd / "notes.txt", wd / "notes_link")
    (wd / ".env").write_text("API_KEY=hunter2")
    os.link(wd / ".env", wd / "config.txt")
    (wd / "data" / "a.txt").write_text("12345")
    os.link(wd / "data" / "a.txt", wd / "data" / "b.txt")
    return wd


HARD_LINKS_LEFT_OUT = {
    "notes.txt": REASON_HARD_LINK, "notes_link": REASON_OUTSIDE, ".env": REASON_SECRET, "config.txt": REASON_HARD_LINK_TO_SECRET,
}  # fmt: skip


def test_a_hard_link_is_left_out_unless_every_name_of_its_file_is_uploaded(tmp_path: Path) -> None:
    wd = _hard_linked_working_dir(tmp_path)
    plan = plan_upload(list_working_dir(wd.resolve(), []))
    assert dict(plan.left_out) == HARD_LINKS_LEFT_OUT
    assert plan.files == 3  # main.py, data/a.txt, data/b.txt: the two names of one file, both uploaded
    # one of the pair ignored: its other name is no longer in the upload
    (wd / ".gitignore").write_text("data/b.txt\n")
    ignored = dict(plan_upload(list_working_dir(wd.resolve(), [])).left_out)
    assert ignored["data/a.txt"] == REASON_HARD_LINK


def test_hard_links_are_left_out_in_the_dry_run_listing_and_the_real_upload(tmp_path: Path, ray_head: Any) -> None:
    """What `--dry-run` says is left out is what the job finds missing on the head."""
    wd = _hard_linked_working_dir(tmp_path)
    dry = run_cli("submit", "--dry-run", "--working-dir", str(wd), "--", "python", "main.py", timeout=60)
    assert dry.returncode == 0, dry.stderr
    said = [line for line in dry.stderr.splitlines() if line.startswith("would upload working dir")]
    assert said and "3 files" in said[0] and f"notes.txt ({REASON_HARD_LINK})" in said[0], dry.stderr
    assert f"config.txt ({REASON_HARD_LINK_TO_SECRET})" in said[0], said
    out = run_cli("submit", "--address", ray_head.dashboard_url, "--working-dir", str(wd), "--", "python", "main.py", timeout=240)
    assert out.returncode == 0, out.stderr
    uploaded = sorted(line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("UPLOADED "))
    assert uploaded == ["data/a.txt", "data/b.txt", "main.py"], out.stdout  # before: notes.txt (the key) and config.txt too
    assert "BEGIN OPENSSH" not in out.stdout
