"""What of a local working dir goes to the cluster: the decision, given what is in the directory.

Ray's Job API client zips the working dir whole, less what `.gitignore`,
`.rayignore` and the runtime env's `excludes` name, and it follows every
symlink: a link to `~/.ssh` uploads the keys. raybridge decides first, from a
listing of the directory that follows no link (`jobs/upload.py` makes it,
with Ray's own ignore rules applied), and leaves out:

- a symlinked directory (never followed: it may lead anywhere, even back up);
- a symlinked file whose target is outside the directory (or nowhere);
- a file with more names (hard links) than the upload holds: another of its names may lie anywhere
  outside the directory (`ln ~/.ssh/id_rsa notes.txt` uploads the key), and no listing can tell where;
  and a hard link to a file that looks like a secret under another name in the directory;
- a file that looks like a secret by its name (`.env`, `*.pem`, `id_rsa*`, `.netrc`, `.vault-token`,
  `secrets.yaml`, `*.tfvars`, shell histories, ...; trailing spaces and dots ignored) or lies in a
  credentials directory (`.ssh`, `.aws`, `.gnupg`, `.kube`, `.docker`), and a link to one under
  another name;
- anything that is not a regular file (a FIFO would block the upload for ever).

What is left out becomes anchored `excludes` patterns for Ray, so Ray uploads
exactly the files counted here. It does no I/O and does not print.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Literal

EntryKind = Literal["file", "dir", "file-link", "dir-link", "other"]

#: File names (case-insensitive shell patterns) that usually hold credentials.
SECRET_FILE_PATTERNS = (
    ".env", ".env.*", "*.env",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",  # id_rsa.bak, id_ed25519_sk, ... (the .pub halves are not secret)
    ".netrc", "_netrc", ".pgpass", ".npmrc", ".pypirc", ".git-credentials", ".htpasswd", ".vault-token", ".dockercfg",
    "credentials", "credentials.json", "kubeconfig", "*.kubeconfig", "*.tfstate", "*.tfstate.backup", "*.tfvars",
    "secret.yaml", "secret.yml", "secrets.yaml", "secrets.yml", "secrets.json", "*service-account*.json",
    "*service_account*.json", ".*history",  # shell and REPL histories (.bash_history, .python_history) carry pasted tokens
)  # fmt: skip
#: Examples and templates of such files hold no secrets.
NOT_SECRET_PATTERNS = (".env.example", ".env.sample", ".env.template", "*.pub")
#: Directory names whose whole content is credentials.
SECRET_DIRS = (".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".config/gcloud")

REASON_SECRET = "looks like a secret"
REASON_DIR_LINK = "a symlinked directory (not followed)"
REASON_OUTSIDE = "a symlink to outside the directory"
REASON_SPECIAL = "not a regular file"
REASON_LINK_TO_SECRET = "a symlink to a file that looks like a secret"
REASON_HARD_LINK = "a hard link to a file also named outside the upload"
REASON_HARD_LINK_TO_SECRET = "a hard link to a file that looks like a secret"


@dataclass(frozen=True)
class Entry:
    """One path in the working dir, relative, with '/' separators; `inside`: a link's target lies in the directory.

    For a file: `inside` False when it has more names (hard links) than the upload holds, and `target` another of
    its names there that looks like a secret, if any."""

    path: str
    kind: EntryKind
    size: int = 0
    inside: bool = True
    #: Where a link inside the directory leads (relative, '/' separators): a link to a secret uploads the secret.
    target: str = ""


@dataclass(frozen=True)
class UploadPlan:
    files: int
    bytes: int
    left_out: tuple[tuple[str, str], ...] = ()
    #: Anchored `excludes` patterns (gitwildmatch) that leave out exactly `left_out`.
    excludes: tuple[str, ...] = field(default=())

    def describe(self, where: str, names_shown: int = 5, what: str = "working dir") -> str:
        """`uploading working dir X: 12 files, 3.4 MiB; left out: .env (looks like a secret), ...` (`what`: py_modules)."""
        text = f"uploading {what} {where}: {self.files} file{'s' if self.files != 1 else ''}, {format_bytes(self.bytes)}"
        if self.left_out:
            text += f"; left out: {self.left_out_text(names_shown)}"
        return text

    def left_out_text(self, names_shown: int = 5) -> str:
        """`.env (looks like a secret), key.pem (looks like a secret) and 3 more`."""
        shown = ", ".join(f"{path} ({reason})" for path, reason in self.left_out[:names_shown])
        return shown + (f" and {len(self.left_out) - names_shown} more" if len(self.left_out) > names_shown else "")


def looks_secret(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1].lower().rstrip(" .")  # "x.pem " and "x.pem." are x.pem to a reader of the file
    if any(fnmatch.fnmatchcase(name, p) for p in NOT_SECRET_PATTERNS):
        return False
    if any(fnmatch.fnmatchcase(name, p) for p in SECRET_FILE_PATTERNS):
        return True
    lowered = "/".join(parts[:-1]).lower()
    return any(f"/{d}/" in f"/{lowered}/" for d in SECRET_DIRS)


def anchored_pattern(path: str) -> str:
    """A gitwildmatch pattern that matches `path` (relative to the working dir) and nothing else."""
    body = path.rstrip()
    escaped = "".join("\\" + ch if ch in "\\*?[]" else ch for ch in body)
    # Ray's gitwildmatch strips trailing whitespace, escaped or not; a one-character class keeps it.
    return "/" + escaped + "".join(f"[{ch}]" for ch in path[len(body) :])


def plan_upload(entries: list[Entry]) -> UploadPlan:
    """Count what goes, and name what is left out (with why) and the patterns that leave it out."""
    files = size = 0
    left_out: list[tuple[str, str]] = []
    for entry in entries:
        reason = None
        if entry.kind == "dir-link":
            reason = REASON_DIR_LINK
        elif entry.kind == "other":
            reason = REASON_SPECIAL
        elif entry.kind == "file-link" and not entry.inside:
            reason = REASON_OUTSIDE
        elif entry.kind == "file" and not entry.inside:
            reason = REASON_HARD_LINK
        elif entry.kind in ("file", "file-link") and looks_secret(entry.path):
            reason = REASON_SECRET
        elif entry.kind in ("file", "file-link") and entry.target and looks_secret(entry.target):
            reason = REASON_LINK_TO_SECRET if entry.kind == "file-link" else REASON_HARD_LINK_TO_SECRET
        if reason is not None:
            left_out.append((entry.path, reason))
        elif entry.kind in ("file", "file-link"):
            files += 1
            size += entry.size
    return UploadPlan(files, size, tuple(left_out), tuple(anchored_pattern(path) for path, _ in left_out))


def format_bytes(count: int) -> str:
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} bytes"  # pragma: no cover
