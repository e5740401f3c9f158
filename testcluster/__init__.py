"""testcluster: a Kubernetes cluster of the real upstream programs, for raybridge's tests and by hand.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, the KubeRay operator and
Kueue, each built from its Go module (programs.py) and started on loopback (stack.py);
`python -m testcluster up` runs one until interrupted. The CRDs of the releases it builds are read
by crd_schemas.py for offline checks. Like kubesim, nothing here imports raybridge.

Re-exports only, imported when first named: a run that needs only the CRD-skip rule (crds_skip.py)
loads neither the stack nor the kubernetes package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROGRAMS", "BuildError", "GoMissing", "Stack", "StackOptions", "ensure_built"]


def __getattr__(name: str) -> Any:
    if name in ("PROGRAMS", "BuildError", "GoMissing", "ensure_built"):
        from testcluster import programs

        return getattr(programs, name)
    if name in ("Stack", "StackOptions"):
        from testcluster import stack

        return getattr(stack, name)
    raise AttributeError(f"module 'testcluster' has no attribute {name!r}")
