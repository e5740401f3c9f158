"""Which cluster a command talks to: the kubeconfig files, the context and the namespace, resolved once.

Every file of $KUBECONFIG is merged as kubectl merges them (`resolve_kube_target`); a missing,
unreadable or oversized file is said, not silently skipped; in a pod, the service account's
namespace and token count as a configuration (`in_cluster`). `ClusterTarget` is what a command's
flags name (kubeconfig, context, namespace, request timeout): resolved once, connected through
`kube.client`. It reads files and the environment; it makes no call to an API server.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from raybridge.core.consts import DEFAULT_NAMESPACE
from raybridge.errors import BadInput


_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


#: kubectl's --request-timeout, for every API call that does not set its own.
DEFAULT_REQUEST_TIMEOUT = 30.0


def in_pod() -> bool:
    """Whether this process runs in a Kubernetes pod: the kubelet gives every container KUBERNETES_SERVICE_HOST,
    whatever the pod's enableServiceLinks says (pkg/kubelet/kubelet_pods.go, getServiceEnvVarMap: the master
    service's variables are always added)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def in_cluster() -> bool:
    """In a pod with its service account's token mounted: the token and namespace count as a configuration."""
    return in_pod() and (_SA_DIR / "token").exists()


@dataclass(frozen=True)
class KubeconfigFiles:
    """The kubeconfig files that would be read, and those named that do not exist."""

    existing: tuple[Path, ...]
    missing: tuple[Path, ...]
    explicit: bool = False
    #: Files named that cannot be a kubeconfig (a FIFO, a device, larger than `MAX_KUBECONFIG_BYTES`), with why.
    unusable: tuple[str, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(f"kubeconfig {str(p)!r} does not exist: skipped" for p in self.missing)

    def check_explicit(self) -> None:
        """BadInput when `--kubeconfig` names a file that does not exist (never a silent fallback)."""
        if self.explicit and self.missing:
            raise BadInput(f"--kubeconfig {str(self.missing[0])!r} does not exist")
        if self.unusable:
            raise BadInput(*self.unusable)


#: The largest kubeconfig read (a FIFO or /dev/zero would never end).
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024


def _unusable(path: Path, named_by: str) -> Optional[str]:
    """Why an existing `path` cannot be read as a kubeconfig (not a regular file, too large), or None."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"{named_by} {str(path)!r} cannot be read: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return f"{named_by} {str(path)!r} is not a regular file"
    if info.st_size > MAX_KUBECONFIG_BYTES:
        return f"{named_by} {str(path)!r} is larger than {MAX_KUBECONFIG_BYTES // 2**20} MiB"
    return None


def kubeconfig_files(explicit: Optional[str] = None) -> KubeconfigFiles:
    """`--kubeconfig`, else every file in $KUBECONFIG, else ~/.kube/config (as kubectl looks); unusable ones set apart."""
    if explicit:
        named, named_by, is_explicit = [Path(explicit).expanduser()], "--kubeconfig", True
    elif os.environ.get("KUBECONFIG"):
        named = [Path(part).expanduser() for part in os.environ["KUBECONFIG"].split(os.pathsep) if part]
        named_by, is_explicit = "KUBECONFIG file", False
    else:
        named, named_by, is_explicit = [Path.home() / ".kube" / "config"], "kubeconfig", False
    existing = [p for p in named if p.exists()]
    missing = [p for p in named if not p.exists()] if explicit or os.environ.get("KUBECONFIG") else []
    problems = {p: _unusable(p, named_by) for p in existing}
    return KubeconfigFiles(
        tuple(p for p in existing if problems[p] is None),
        tuple(missing),
        is_explicit,
        tuple(problem for problem in problems.values() if problem),
    )


def kubeconfig_path(explicit: Optional[str] = None) -> Optional[Path]:
    """The first kubeconfig that would be used, or None if there is none."""
    files = kubeconfig_files(explicit)
    return files.existing[0] if files.existing else None


def cluster_configured(kubeconfig: Optional[str] = None) -> bool:
    """True when a kubeconfig or an in-cluster service account is available.

    BadInput when `kubeconfig` (the `--kubeconfig` flag) names a file that does
    not exist: the user named a cluster, so nothing falls back to running locally.
    """
    files = kubeconfig_files(kubeconfig)
    files.check_explicit()
    return bool(files.existing) or in_cluster()


@dataclass(frozen=True)
class KubeTarget:
    """Where a command's API calls go, resolved once: the files merged, the context, the namespace."""

    files: tuple[Path, ...]
    missing: tuple[Path, ...]
    context: Optional[str]
    #: The namespace commands default to: the one asked for, else the context's, else `default`.
    namespace: str
    #: The context's own namespace (None when it sets none): what `-n` overrides.
    context_namespace: Optional[str]
    in_cluster: bool
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT


def _merged_view(files: tuple[Path, ...]) -> tuple[Optional[str], dict[str, Any]]:
    """(current-context, contexts by name) as kubectl merges the files: the first file that sets a value wins."""
    import yaml

    current: Optional[str] = None
    contexts: dict[str, Any] = {}
    for path in files:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        if current is None and isinstance(data.get("current-context"), str) and data["current-context"]:
            current = data["current-context"]
        listed = data.get("contexts")
        for item in listed if isinstance(listed, list) else []:  # a malformed list is the client loader's to refuse
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                contexts.setdefault(item["name"], item.get("context") or {})
    return current, contexts


def resolve_kube_target(
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
    namespace: Optional[str] = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
) -> KubeTarget:
    """The target without connecting: the kubeconfig files, the context and the namespace (-n, else the context's, else default).

    BadInput when `kubeconfig` names a file that does not exist.
    """
    files = kubeconfig_files(kubeconfig)
    files.check_explicit()
    if files.existing:
        current, contexts = _merged_view(files.existing)
        if context and context not in contexts:
            where = ", ".join(str(path) for path in files.existing)
            raise BadInput(f"no context named {context!r} in {where} (contexts: {', '.join(sorted(contexts)) or 'none'})")
        chosen_name = context or current
        chosen = contexts.get(chosen_name or "")
        ctx_ns = chosen.get("namespace") if isinstance(chosen, dict) else None
        ctx_ns = ctx_ns if isinstance(ctx_ns, str) and ctx_ns else None
        return KubeTarget(
            files.existing, files.missing, chosen_name, namespace or ctx_ns or DEFAULT_NAMESPACE, ctx_ns, False, request_timeout
        )
    if context:
        looked = ", ".join(str(path) for path in files.missing) or str(Path.home() / ".kube" / "config")
        raise BadInput(f"--context {context}: no kubeconfig to find it in ({looked} does not exist; --kubeconfig or KUBECONFIG names one)")
    inside = in_cluster()
    ns_file = _SA_DIR / "namespace"
    sa_ns = (ns_file.read_text().strip() or None) if inside and ns_file.exists() else None
    return KubeTarget((), files.missing, None, namespace or sa_ns or DEFAULT_NAMESPACE, sa_ns, inside, request_timeout)


def context_namespace(kubeconfig: Optional[str] = None, context: Optional[str] = None) -> Optional[str]:
    """The namespace of the kubeconfig's chosen context (or the in-cluster one), without connecting; None when nothing sets one."""
    return resolve_kube_target(kubeconfig, context).context_namespace
