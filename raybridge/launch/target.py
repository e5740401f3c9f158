"""Which cluster and namespace a command talks to: decided here, once, for every command.

`-n` (or the spec's `namespace`) wins over the kubeconfig context's
namespace, which wins over `default`; `render` and `plan` use the same
answer as `submit`, `status` and the rest, without connecting. The
`--request-timeout` bound travels with the target into every API call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raybridge.core.consts import DEFAULT_NAMESPACE
from raybridge.kube.client import DEFAULT_REQUEST_TIMEOUT, context_namespace, kubeconfig_files


@dataclass(frozen=True)
class ClusterTarget:
    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    #: As given (`-n` or the spec); None means the context's namespace, else `default`.
    namespace: Optional[str] = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def resolved_namespace(self) -> str:
        return self.namespace or context_namespace(self.kubeconfig, self.context) or DEFAULT_NAMESPACE

    def notes(self) -> tuple[str, ...]:
        """What the user should hear about the configuration (kubeconfig files that do not exist)."""
        return kubeconfig_files(self.kubeconfig).notes

    def connect(self) -> Any:
        """A connected `Kube` for this target, every call bounded by `request_timeout`."""
        from raybridge.kube.client import connect

        return connect(self.kubeconfig, self.context, self.resolved_namespace(), self.request_timeout)
