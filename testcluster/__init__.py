"""testcluster: a Kubernetes cluster of the real upstream programs, for raybridge's tests and by hand.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, the KubeRay operator and
Kueue, each built from its Go module (programs.py) and started on loopback (stack.py);
`python -m testcluster up` runs one until interrupted. Like kubesim, nothing here imports raybridge.
"""

from testcluster.programs import PROGRAMS, BuildError, GoMissing, ensure_built
from testcluster.stack import Stack, StackOptions

__all__ = ["PROGRAMS", "BuildError", "GoMissing", "Stack", "StackOptions", "ensure_built"]
