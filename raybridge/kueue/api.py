"""Kueue's API: its group, the versions raybridge speaks, preferred first, and the fields they renamed.

One list for every reader and writer: `kube/kueue.py` (which versions the cluster serves),
`queues/decision/configs.py` (what `queues generate` writes), the CLI's `--kueue-api`. Kueue
0.15 and later serve `v1beta2` (and still `v1beta1`); 0.13 and 0.14 serve `v1beta1` only.
Cohort objects were `v1alpha1` before 0.13. The visibility API (pending positions) is an
aggregated API of its own group, served in the same versions.
"""

from __future__ import annotations

from raybridge.kueue.names import KUEUE_GROUP

GROUP = KUEUE_GROUP
#: The versions raybridge reads and writes, preferred first.
VERSIONS = ("v1beta2", "v1beta1")
NEWEST = VERSIONS[0]
#: What Cohort objects were served as before Kueue 0.13.
OLD_COHORT_VERSION = "v1alpha1"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
#: What `kueue generate --kueue-api` says of each version.
VERSION_NOTES = {"v1beta2": "Kueue >= 0.15", "v1beta1": "Kueue 0.13, 0.14"}


def cohort_field(version: str) -> str:
    """The ClusterQueue field naming its cohort: `cohortName` from v1beta2, `cohort` before."""
    return "cohortName" if version == "v1beta2" else "cohort"
