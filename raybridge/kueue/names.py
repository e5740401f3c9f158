"""Kueue's names: its API group and the labels a job carries for it, each written once.

Why it exists: the launcher, `explain`, the queue generator and the adapters all spell Kueue's labels; they
read them here (kueue@v0.13.10 and later: pkg/controller/constants/constants.go). What it does not do: hold
Kueue's API versions (`api.py`) or any rule.
"""

from __future__ import annotations

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: Kueue evicts a Workload whose job carries it after that many seconds of admitted time.
KUEUE_MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
KUEUE_GROUP = "kueue.x-k8s.io"
#: The controller of a MultiKueue AdmissionCheck (kueue@v0.19.2 apis/kueue/v1beta2/multikueue_types.go
#: MultiKueueControllerName): a ClusterQueue with one dispatches its jobs to worker clusters; Kueue's webhook sets
#: it as a dispatched job's `spec.managedBy` in the manager (kueue@v0.17.0 pkg/controller/jobs/rayjob/rayjob_webhook.go Default:
#: jobframework.ApplyDefaultForManagedBy).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
