"""Which cluster and namespace a command talks to: decided here, once, for every command.

`-n` (or the spec's `namespace`) wins over the kubeconfig context's
namespace, which wins over `default`; `render` and `plan` use the same
answer as `submit`, `status` and the rest, without connecting. The
kubeconfig is every file of $KUBECONFIG merged as kubectl merges them, and
the connection is made to exactly the context and namespace resolved here
(`resolve()` -> `kube.config.KubeTarget` -> `connect_target`). The
`--request-timeout` bound travels with the target into every API call; a
command's `--timeout` comes in as a `Deadline` at `connect`.

A `--kubeconfig` that does not exist is bad input (exit 2), whatever the
command and backend; `$KUBECONFIG` files that do not exist are notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.deadline import Deadline
from raybridge.kube.config import DEFAULT_REQUEST_TIMEOUT, KubeTarget, kubeconfig_files, resolve_kube_target


@dataclass(frozen=True)
class ClusterTarget:
    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    #: As given (`-n` or the spec); None means the context's namespace, else `default`.
    namespace: Optional[str] = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def resolve(self) -> KubeTarget:
        """The files, context and namespace, without connecting; BadInput for a `--kubeconfig` that does not exist."""
        return resolve_kube_target(self.kubeconfig, self.context, self.namespace, self.request_timeout)

    def resolved_namespace(self) -> str:
        return self.resolve().namespace

    def notes(self) -> tuple[str, ...]:
        """What the user should hear about the configuration (KUBECONFIG files that do not exist).

        BadInput when `--kubeconfig` names a file that does not exist.
        """
        files = kubeconfig_files(self.kubeconfig)
        files.check_explicit()
        return files.notes

    def connect(self, deadline: Optional[Deadline] = None) -> Any:
        """A connected `Kube` for this target, every call bounded by `request_timeout` and `deadline`."""
        from raybridge.kube.client import connect_target

        return connect_target(self.resolve(), deadline)
