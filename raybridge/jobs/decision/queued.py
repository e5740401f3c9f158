"""A job queued to run by itself (`submit --no-wait`), decided: the RayJob KubeRay submits, and resubmits, alone.

`submit --no-wait` returns once the RayJob exists, whatever its queue: nobody is left to hand the entrypoint
over. So the RayJob is in `K8sJobMode`: once Kueue admits it and its Ray cluster is ready, KubeRay creates a
submitter Job whose pod runs `ray job submit` against the cluster's dashboard, then follows the job's logs
until it ends (kuberay@v1.3.2 controllers/ray/common/job.go GetK8sJobCommand, v1.6.1 BuildJobSubmitCommand:
`ray job status ID || ray job submit --no-wait --submission-id ID ...; ray job logs --follow ID`). After a
Kueue eviction KubeRay deletes the cluster and that Job (rayjob_controller.go, Suspending: deleteSubmitterJob)
and, at the readmission, builds a new cluster and a new submitter Job, which submits the job again under the
same id (initRayJobStatusIfNeed takes `spec.jobId` again) on every release raybridge supports. `HTTPMode`
(the operator POSTs the job itself, v1.3.2 to v1.6.1) would need no submitter pod, but sends the runtime env
as it is: a local working dir cannot travel in it.

The local working dir travels as a zip in a ConfigMap of the job's own (owned by the RayJob, deleted with
it), mounted read-only into the submitter's pod, and `runtimeEnvYAML` names that zip: the submitter's Ray
client uploads a local `.zip` working dir as raybridge's own client uploads a directory (ray@2.60
_private/runtime_env/working_dir.py upload_working_dir_if_needed, the package branch), and the nodes unpack
it as its top level (packaging.py download_and_unpack_package: a gcs:// zip keeps its top level). A
ConfigMap holds at most 1 MiB (kubernetes pkg/apis/core/validation ValidateConfigMap: the data and
binaryData together, core.MaxSecretSize), which caps what a queued job can carry; a larger working dir
needs a URI, or a submit that waits.

Kueue counts the submitter's pod as a pod set of its own in K8sJobMode (kueue@v0.13.10
pkg/controller/jobs/rayjob/rayjob_controller.go PodSets: "submitter", from `submitterPodTemplate`), so its
requests are KubeRay's default submitter's (500m CPU, 200Mi memory; limits 1 and 1Gi:
common/job.go GetDefaultSubmitterContainer), written out so that the preflight counts what Kueue counts.

Pure: it builds objects from plain data; creating them is `jobs/queued.py`'s. It does not zip (I/O).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

import yaml

from raybridge.core.consts import MANAGED_BY_LABEL, MANAGED_BY_VALUE

#: Where the working dir's zip is mounted in the submitter's pod, and its key in the ConfigMap.
WORKING_DIR_MOUNT = "/var/run/raybridge/working-dir"
WORKING_DIR_KEY = "working_dir.zip"
WORKING_DIR_VOLUME = "raybridge-working-dir"
#: The most a ConfigMap holds, data and keys together (kubernetes core.MaxSecretSize, 1 MiB).
CONFIG_MAP_MAX_BYTES = 1024 * 1024
#: The zipped working dir's cap: a ConfigMap's bound less its key.
WORKING_DIR_ZIP_MAX_BYTES = CONFIG_MAP_MAX_BYTES - len(WORKING_DIR_KEY)
#: KubeRay's submitter container: its name (utils.SubmitterContainerName) and default requests and limits.
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}


def working_dir_config_map_name(name: str) -> str:
    return f"{name}-working-dir"


def queued_runtime_env(runtime_env: dict[str, Any], zipped: bool) -> dict[str, Any]:
    """The Job API runtime env (`jobs/options.py` resolve_runtime_env) as the submitter sends it: the working dir is
    the mounted zip (its `excludes` applied when zipping), or none."""
    result = {key: value for key, value in runtime_env.items() if key not in ("working_dir", "excludes")}
    if zipped:
        result["working_dir"] = f"{WORKING_DIR_MOUNT}/{WORKING_DIR_KEY}"
    return result


def queued_rayjob(rayjob: dict[str, Any], runtime_env: dict[str, Any], config_map: Optional[str], pre_running_deadline: Optional[int]) -> dict[str, Any]:
    """`rayjob` (rendered in K8sJobMode, with its job id) with the submitter's pod, the runtime env it submits and,
    where the operator honours it (v1.6+), `preRunningDeadlineSeconds`: a cluster that never starts (an image never
    pulled) fails within it and frees its quota, each admission anew (it counts from KubeRay's startTime)."""
    obj = copy.deepcopy(rayjob)
    spec = obj["spec"]
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    # The head's image: the Ray client in it matches the cluster's Ray, as KubeRay's default submitter's does.
    container: dict[str, Any] = {"name": SUBMITTER_CONTAINER, "image": head["image"], "resources": copy.deepcopy(SUBMITTER_RESOURCES)}
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if config_map is not None:
        container["volumeMounts"] = [{"name": WORKING_DIR_VOLUME, "mountPath": WORKING_DIR_MOUNT, "readOnly": True}]
        pod["volumes"] = [{"name": WORKING_DIR_VOLUME, "configMap": {"name": config_map}}]
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    spec["submitterPodTemplate"] = {"metadata": {"labels": labels}, "spec": pod}
    spec["runtimeEnvYAML"] = yaml.safe_dump(runtime_env, sort_keys=False, default_flow_style=False)
    if pre_running_deadline:
        spec["preRunningDeadlineSeconds"] = int(pre_running_deadline)
    return obj


def working_dir_config_map(name: str, namespace: str, owner: dict[str, Any], data: str) -> dict[str, Any]:
    """The ConfigMap that carries the zipped working dir (`data`: base64), owned by the RayJob `owner` (as the server
    stored it: its uid), so that it goes when the RayJob goes."""
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": working_dir_config_map_name(name), "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
            "ownerReferences": [{"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "name": meta.get("name"),
                                 "uid": meta.get("uid"), "blockOwnerDeletion": True}],
        },
        "binaryData": {WORKING_DIR_KEY: data},
        "immutable": True,
    }  # fmt: skip


def runtime_env_problems(local_py_modules: list[str], local_files: list[tuple[str, str]]) -> list[str]:
    """What of the runtime env cannot reach the cluster without raybridge (`--no-wait`): local py_modules, and pip,
    conda or uv files (`local_files`: field, path), which the submitter's client would look for on its own disk."""
    problems = [
        f"runtimeEnv.py_modules: {module!r} is a local directory, which a queued job (--no-wait) cannot take along; "
        "give a URI, or submit without --no-wait (raybridge then uploads it)"
        for module in local_py_modules
    ]
    problems += [
        f"runtimeEnv.{field}: {path!r} is a local file, which a queued job (--no-wait) cannot take along; "
        "list the packages in the spec instead, or submit without --no-wait"
        for field, path in local_files
    ]
    return problems


__all__ = [
    "CONFIG_MAP_MAX_BYTES", "SUBMITTER_CONTAINER", "WORKING_DIR_KEY", "WORKING_DIR_MOUNT", "WORKING_DIR_ZIP_MAX_BYTES",
    "queued_rayjob", "queued_runtime_env", "runtime_env_problems", "working_dir_config_map", "working_dir_config_map_name",
]  # fmt: skip
