"""KubeRay's names: its API, the limits on the names it derives, the head's ports.

Why it exists: the manifests, the lifecycle commands, the dashboard's port-forward and the adapters spell
KubeRay's names; they read them here, each written once (kuberay ray-operator/controllers/ray/utils/constant.go
and util.go at the releases cited). What it does not do: read a RayJob's state (`rayjob.py`) or decide which
release honours which deadline (`releases.py`).
"""

from __future__ import annotations

import unicodedata

from raybridge.core.consts import K8S_NAME_MAX

RAY_API_GROUP = "ray.io"
RAY_API_VERSION = "v1"
#: The longest RayJob name every supported KubeRay can run. KubeRay v1.3 names the job's cluster
#: `<job>-raycluster-<5>` (kuberay@v1.3.2 ray-operator/controllers/ray/utils/util.go GenerateRayClusterName,
#: `<job>-<5>` from v1.4.0), and that name is the `ray.io/cluster` label of its pods and head Service: at most
#: 63 characters, so 46 for the job. v1.4 and later refuse names over 47 (MaxRayJobNameLength).
RAYJOB_NAME_MAX = 46
RAYCLUSTER_NAME_MAX = 53
DASHBOARD_PORT = 8265
#: KubeRay's default head ports (utils/constant.go), by port name.
GCS_PORT = 6379
CLIENT_PORT = 10001


def name_limit(kind: str) -> int:
    """The longest name of a `kind` object every supported KubeRay can run (it appends suffixes to RayJob and
    RayCluster names); a Kubernetes name's 63 for any other kind."""
    return {"RayJob": RAYJOB_NAME_MAX, "RayCluster": RAYCLUSTER_NAME_MAX}.get(kind, K8S_NAME_MAX)


#: KubeRay keeps at most this many characters of a name it derives others from (utils.CheckName).
KUBERAY_DERIVED_NAME_MAX = 50


def kuberay_derived_name(name: str) -> str:
    """The name KubeRay gives an object it derives from `name` (the token Secret from the RayCluster's name).

    kuberay@v1.5.2 and v1.7.0 ray-operator/controllers/ray/utils/util.go, CheckName: a name over 50
    characters keeps its last 50; one that then starts with a digit or punctuation gets an 'r' in place
    of its first character. A RayJob's cluster is its name plus a 6-character suffix
    (GenerateRayClusterName), so RayJob names of 45 and 46 characters are cut.
    """
    if not name:
        return name
    if len(name) > KUBERAY_DERIVED_NAME_MAX:
        name = name[len(name) - KUBERAY_DERIVED_NAME_MAX :]
    if name[0].isdigit() or unicodedata.category(name[0]).startswith("P"):  # unicode.IsDigit, unicode.IsPunct
        name = "r" + name[1:]
    return name
