"""Kubernetes objects for one workload: a validated `JobSpec` plus a `SizingDecision` in, plain dicts out.

Why this module exists: `plan`, `render` and `submit` must show and create
exactly the same objects, and the rules that make those objects acceptable to
KubeRay, Kueue and KAI (fixed worker-group size, GPU key in requests *and*
limits, no `backoffLimit` in InteractiveMode, a pre-running deadline, the
queue labels) belong in one place that can be tested without a cluster.

What it deliberately does not do:

- no I/O and no cluster access; it does not import `kubernetes` or `ray`.
  Objects are plain dicts in the order a person reads them (apiVersion, kind,
  metadata, spec), ready for `to_yaml` or a dynamic client.
- no sizing: replicas and GPUs per replica come from the decision as they are.
- no upload of a local `working_dir`: the Ray Job API does that at submit time,
  so a local path never appears in `runtimeEnvYAML`.
- no autoscaling: Kueue admits a fixed shape, so min = max = replicas.
- no Kueue labels on GPU-sharing (fractional) workloads: KAI queues those.
- no defaulting of what the API server or operators fill in themselves
  (restart policies of Ray pods, service types, suspend, Ray's start command).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable, Mapping, Optional

import yaml

from raybridge.core.consts import DEFAULT_HEAD_CPU, DEFAULT_HEAD_MEMORY, DEFAULT_WORKER_CPU, DEFAULT_WORKER_MEMORY, JOB_NAME_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, ORPHAN_BOUND_SECONDS, WORKER_GROUP_NAME
from raybridge.kai.names import KAI_DEFAULT_QUEUE, KAI_GPU_FRACTION_ANNOTATION, KAI_QUEUE_LABEL, KAI_SCHEDULER_NAME
from raybridge.kuberay.names import CLIENT_PORT, DASHBOARD_PORT, GCS_PORT, RAY_API_GROUP, RAY_API_VERSION
from raybridge.kueue.names import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL
from raybridge.jobs.decision.images import PythonVersion, default_image
from raybridge.core.dra import CLAIM_TEMPLATE_KIND, DRIVER_OF_VENDOR, RESOURCE_API_VERSION
from raybridge.kuberay.names import name_limit
from raybridge.core.names import name_problem, namespace_problem, queue_name_problem
from raybridge.jobs.decision.orphan_guard import guarded, with_run_bound
from raybridge.core.quantity import MAX_QUANTITY, format_cpu, format_memory, parse_quantity
from raybridge.core.runtime_env import (
    allocation_env,
    cluster_runtime_env,
    format_number,
    local_working_dir,
    reserved_env_clash,
)
from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.jobs.decision.spec import JobSpec
from raybridge.errors import BadInput

Manifest = dict[str, Any]

RAY_API = f"{RAY_API_GROUP}/{RAY_API_VERSION}"
#: raybridge submits the entrypoint itself (uploading a local working dir); KubeRay waits for `spec.jobId`.
INTERACTIVE_MODE = "InteractiveMode"
#: KubeRay's submitter Job runs `ray job submit`: the RayJob runs by itself after `kubectl apply`.
K8S_JOB_MODE = "K8sJobMode"
SUBMISSION_MODES = (INTERACTIVE_MODE, K8S_JOB_MODE)
HEAD_CONTAINER = "ray-head"
#: How long KubeRay keeps a finished RayJob's cluster (and so its dashboard and logs).
FINISHED_CLUSTER_TTL_SECONDS = 60
WORKER_CONTAINER = "ray-worker"
#: The name of a GPU pod's claim, of its one device request, and (after the job's name) of its claim template.
GPU_CLAIM_NAME = "gpus"
MAIN_CONTAINER = "main"
#: KubeRay's port names for the head (utils/constant.go).
HEAD_PORTS: tuple[tuple[str, int], ...] = (
    ("gcs-server", GCS_PORT),
    ("dashboard", DASHBOARD_PORT),
    ("client", CLIENT_PORT),
)


# --- entry point ---------------------------------------------------------------------------


def render_manifests(
    spec: JobSpec,
    decision: SizingDecision,
    *,
    name: str,
    namespace: str,
    job_id: Optional[str] = None,
    submission_mode: str = INTERACTIVE_MODE,
    orphan_bound: int = ORPHAN_BOUND_SECONDS,
    ray_version: str,
    python: PythonVersion,
) -> list[Manifest]:
    """The objects to create for this workload, chosen by `spec.resolved_kind`.

    `ray_version`, `python`: the Ray release and the Python the default images follow (the caller reads the ones
    installed here: `jobapi.ray_import`).
    """
    kind = spec.resolved_kind
    # The claim template first: the workload's pods (and Kueue, counting their devices) look it up by name.
    claims = [render_claim_template(decision, name=name, namespace=namespace)] if decision.dra else []
    if kind == "RayJob":
        return claims + [
            render_rayjob(
                spec, decision, name=name, namespace=namespace, job_id=job_id, submission_mode=submission_mode, orphan_bound=orphan_bound,
                ray_version=ray_version, python=python,
            )
        ]
    renderers: dict[str, Callable[..., Manifest]] = {
        "RayCluster": render_raycluster,
        "job": render_batch_job,
        "service": render_deployment,
    }
    if kind not in renderers:
        raise BadInput(f"kind: cannot render {kind!r}")
    return claims + [renderers[kind](spec, decision, name=name, namespace=namespace, ray_version=ray_version, python=python)]


def workload_of(objects: list[Manifest]) -> Manifest:
    """The workload among rendered objects (the RayJob, RayCluster, Job or Deployment): the last one."""
    return objects[-1]


def claim_template_name(name: str) -> str:
    """The ResourceClaimTemplate of a job's GPU pods: one claim per pod is made from it."""
    return f"{name}-{GPU_CLAIM_NAME}"


def claim_selectors(decision: SizingDecision) -> list[str]:
    """The CEL selectors that keep a claim to the GPUs gpuModel and gpuMemory chose: the devices' product names,
    their memory capacity (as NVIDIA's and AMD's drivers publish them, `core/dra.py`; the CEL as their demos write
    it, e.g. `device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0`)."""
    driver = DRIVER_OF_VENDOR.get(decision.gpu_vendor or "")
    if driver is None:
        return []
    found = []
    if decision.device_models:
        names = ", ".join(_cel_string(m) for m in decision.device_models)
        found.append(f"device.attributes['{driver.name}'].{driver.model_attribute} in [{names}]")
    if decision.device_memory_mib:
        found.append(f"device.capacity['{driver.name}'].{driver.memory_capacity}.compareTo(quantity('{decision.device_memory_mib}Mi')) >= 0")
    return found


def _cel_string(text: str) -> str:
    """`text` as a CEL string literal (single quotes, backslash escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def model_affinity(decision: SizingDecision) -> Optional[dict[str, Any]]:
    """The node affinity that keeps device-plugin GPU pods to the nodes of the models gpuModel and gpuMemory chose:
    their product label among the values found (one term per label key; terms are ORed)."""
    if not decision.node_models or decision.dra:
        return None
    by_key: dict[str, list[str]] = {}
    for key, value in decision.node_models:
        by_key.setdefault(key, []).append(value)
    terms = [{"matchExpressions": [{"key": key, "operator": "In", "values": sorted(values)}]} for key, values in sorted(by_key.items())]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def render_claim_template(decision: SizingDecision, *, name: str, namespace: str) -> Manifest:
    """The ResourceClaimTemplate a DRA job's GPU pods claim their devices through: `gpus_per_replica` devices of the
    decision's DeviceClass per pod (resource/v1 ExactDeviceRequest). Kueue v0.18+ counts `count` times the pods
    against the quota of the resource its Configuration maps the class to (`deviceClassMappings`)."""
    check_identity("job", name, namespace)
    exactly: dict[str, Any] = {"deviceClassName": decision.device_class, "count": int(decision.gpus_per_replica)}
    selectors = claim_selectors(decision)
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": expression}} for expression in selectors]
    request = {"name": GPU_CLAIM_NAME, "exactly": exactly}
    template = _object(RESOURCE_API_VERSION, CLAIM_TEMPLATE_KIND, claim_template_name(name), namespace, selector_labels(name), {})
    template["spec"] = {"spec": {"devices": {"requests": [request]}}}
    return template


def render_rayjob(
    spec: JobSpec,
    decision: SizingDecision,
    *,
    name: str,
    namespace: str,
    job_id: Optional[str] = None,
    submission_mode: str = INTERACTIVE_MODE,
    orphan_bound: int = ORPHAN_BOUND_SECONDS,
    ray_version: str,
    python: PythonVersion,
) -> Manifest:
    """A RayJob. InteractiveMode (what `submit` creates): KubeRay makes the cluster, raybridge submits
    through the Job API. K8sJobMode: KubeRay's submitter runs the entrypoint, so the object runs by
    itself after `kubectl apply`; a local working dir cannot travel with it and is refused."""
    check_identity("RayJob", name, namespace)
    if submission_mode not in SUBMISSION_MODES:
        raise BadInput(f"submissionMode: must be one of {', '.join(SUBMISSION_MODES)} (got {submission_mode!r})")
    if submission_mode == K8S_JOB_MODE and local_working_dir(spec.runtime_env, spec.working_dir):
        raise BadInput(
            "workingDir: a local directory cannot reach the cluster through `kubectl apply`; "
            "use a URI (s3://, gs://, https://) or run it with `raybridge submit`, which uploads it"
        )
    body: dict[str, Any] = {}
    if spec.entrypoint:
        body["entrypoint"] = spec.entrypoint
    env_yaml = runtime_env_yaml(spec)
    if env_yaml is not None:
        body["runtimeEnvYAML"] = env_yaml
    # No backoffLimit: KubeRay rejects a value above 0 in InteractiveMode, and a retry would start a new cluster.
    body["submissionMode"] = submission_mode
    body["shutdownAfterJobFinishes"] = True
    # KubeRay deletes the cluster as soon as the job ends (TTL 0): its dashboard, and the last lines of a
    # log still being streamed, would go with it. Kueue frees the quota when the job finishes, whatever the TTL.
    body["ttlSecondsAfterFinished"] = FINISHED_CLUSTER_TTL_SECONDS
    body["rayClusterSpec"] = ray_cluster_spec(spec, decision, name=name, ray_version=ray_version, python=python)
    rayjob = _object(RAY_API, "RayJob", name, namespace, object_labels(spec, decision, name=name), body)
    if submission_mode == INTERACTIVE_MODE:
        # Nobody but raybridge drives an InteractiveMode RayJob: the job id and the orphan bound it renews.
        return guarded(rayjob, job_id, orphan_bound, spec.max_run_seconds)
    if job_id:
        rayjob["spec"]["jobId"] = job_id
    return with_run_bound(rayjob, spec.max_run_seconds)


def render_raycluster(spec: JobSpec, decision: SizingDecision, *, name: str, namespace: str, ray_version: str, python: PythonVersion) -> Manifest:
    """A standalone RayCluster; it holds its quota until deleted."""
    check_identity("RayCluster", name, namespace)
    body = ray_cluster_spec(spec, decision, name=name, ray_version=ray_version, python=python)
    return _object(RAY_API, "RayCluster", name, namespace, object_labels(spec, decision, name=name), body)


def render_batch_job(spec: JobSpec, decision: SizingDecision, *, name: str, namespace: str, ray_version: str, python: PythonVersion) -> Manifest:
    """A batch/v1 Job of exactly one pod that is never retried."""
    check_identity("job", name, namespace)
    template = pod_template(
        spec,
        decision,
        name=name,
        containers=[plain_container(spec, decision, ray_version, python)],
        gpu_pod=_has_gpus(decision),
        restart_policy="Never",
    )
    body = {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template}
    return _object("batch/v1", "Job", name, namespace, object_labels(spec, decision, name=name), body)


def render_deployment(spec: JobSpec, decision: SizingDecision, *, name: str, namespace: str, ray_version: str, python: PythonVersion) -> Manifest:
    """An apps/v1 Deployment of `decision.replicas` pods, each with `decision.gpus_per_replica` GPUs."""
    check_identity("service", name, namespace)
    template = pod_template(
        spec,
        decision,
        name=name,
        containers=[plain_container(spec, decision, ray_version, python)],
        gpu_pod=_has_gpus(decision),
        extra_labels=queue_labels(spec, decision),
    )
    body = {
        "replicas": decision.replicas,
        "selector": {"matchLabels": selector_labels(name)},
        "template": template,
    }
    return _object("apps/v1", "Deployment", name, namespace, object_labels(spec, decision, name=name), body)


def to_yaml(objects: list[Manifest]) -> str:
    """Multi-document YAML for `kubectl apply -f -`, keys in the order they were built."""
    return yaml.dump_all(objects, Dumper=_ManifestDumper, sort_keys=False, explicit_start=True)


# --- the Ray cluster ------------------------------------------------------------------------


def ray_cluster_spec(spec: JobSpec, decision: SizingDecision, *, name: str, ray_version: str, python: PythonVersion) -> dict[str, Any]:
    """RayCluster `spec` (also a RayJob's `rayClusterSpec`): one head, one fixed-size worker group.

    `enableInTreeAutoscaling` is left out (false): Kueue admits a fixed shape.
    """
    body: dict[str, Any] = {}
    auth_mode = spec.resolved_auth_mode
    if auth_mode:
        body["authOptions"] = {"mode": auth_mode, **({"secretName": spec.auth_secret} if spec.auth_secret else {})}
    if auth_mode == "token":
        # KubeRay refuses token auth unless rayVersion says Ray 2.52 or later (ValidateRayClusterSpec).
        body["rayVersion"] = ray_version
    body["headGroupSpec"] = head_group(spec, decision, name=name, ray_version=ray_version, python=python)
    body["workerGroupSpecs"] = [worker_group(spec, decision, name=name, ray_version=ray_version, python=python)]
    return body


def head_group(spec: JobSpec, decision: SizingDecision, *, name: str, ray_version: str, python: PythonVersion) -> dict[str, Any]:
    """The head: no GPUs, the dashboard reachable from outside the pod, KubeRay's ports."""
    cpu, memory = head_cpu_memory(spec)
    container = {
        "name": HEAD_CONTAINER,
        "image": image_for(spec, decision, ray_version, python),
        "ports": [{"containerPort": port, "name": port_name} for port_name, port in HEAD_PORTS],
        "env": container_env(spec, decision),
        "resources": pod_resources(cpu, memory),
    }
    return {
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
        "template": pod_template(spec, decision, name=name, containers=[container], gpu_pod=False),
    }


def worker_group(spec: JobSpec, decision: SizingDecision, *, name: str, ray_version: str, python: PythonVersion) -> dict[str, Any]:
    """The one worker group, sized by the decision, with replicas = minReplicas = maxReplicas."""
    cpu, memory = worker_cpu_memory(spec, decision)
    container = {
        "name": WORKER_CONTAINER,
        "image": image_for(spec, decision, ray_version, python),
        "env": container_env(spec, decision),
        "resources": pod_resources(cpu, memory, gpu_resources(decision)),
    }
    replicas = decision.replicas
    return {
        "groupName": WORKER_GROUP_NAME,
        "replicas": replicas,
        "minReplicas": replicas,
        "maxReplicas": replicas,
        "rayStartParams": {"num-gpus": ray_num_gpus(decision)},
        "template": pod_template(spec, decision, name=name, containers=[container], gpu_pod=_has_gpus(decision)),
    }


def ray_num_gpus(decision: SizingDecision) -> str:
    """Ray's `num-gpus` for a worker: the whole GPUs it holds, or 1 for a shared (fractional) GPU."""
    if decision.fractional:
        return "1"
    return str(int(decision.gpus_per_replica))


def runtime_env(spec: JobSpec) -> Optional[dict[str, Any]]:
    """The runtime env the cluster can use by itself (local paths are left for the Job API to upload)."""
    return cluster_runtime_env(spec.runtime_env, spec.working_dir)


def runtime_env_yaml(spec: JobSpec) -> Optional[str]:
    """`runtime_env` as the YAML string KubeRay's `runtimeEnvYAML` holds."""
    env = runtime_env(spec)
    if env is None:
        return None
    return yaml.safe_dump(env, sort_keys=False, default_flow_style=False)


# --- containers and pods -------------------------------------------------------------------


def plain_container(spec: JobSpec, decision: SizingDecision, ray_version: str, python: PythonVersion) -> dict[str, Any]:
    """The one container of a non-Ray Job or Deployment pod."""
    cpu, memory = worker_cpu_memory(spec, decision)
    container: dict[str, Any] = {"name": MAIN_CONTAINER, "image": image_for(spec, decision, ray_version, python)}
    if spec.entrypoint:
        container["command"] = ["/bin/sh", "-c", spec.entrypoint]
    container["env"] = container_env(spec, decision)
    container["resources"] = pod_resources(cpu, memory, gpu_resources(decision))
    return container


def pod_template(
    spec: JobSpec,
    decision: SizingDecision,
    *,
    name: str,
    containers: list[dict[str, Any]],
    gpu_pod: bool,
    extra_labels: Optional[Mapping[str, str]] = None,
    restart_policy: Optional[str] = None,
) -> dict[str, Any]:
    """A pod template with raybridge's labels, KAI sharing fields, node selector and tolerations."""
    labels = selector_labels(name)
    if decision.fractional:
        labels[KAI_QUEUE_LABEL] = kai_queue(spec)
    labels.update(extra_labels or {})
    metadata: dict[str, Any] = {"labels": labels}
    if decision.fractional and gpu_pod:
        metadata["annotations"] = {KAI_GPU_FRACTION_ANNOTATION: format_number(decision.gpus_per_replica)}
    pod: dict[str, Any] = {}
    if restart_policy:
        pod["restartPolicy"] = restart_policy
    if decision.fractional:
        pod["schedulerName"] = KAI_SCHEDULER_NAME
    pod["containers"] = containers
    if gpu_pod and decision.dra:
        # Each pod's claim is made from the template (kube-controller-manager's resourceclaim controller); each
        # container that runs on the GPUs names the claim.
        pod["resourceClaims"] = [{"name": GPU_CLAIM_NAME, "resourceClaimTemplateName": claim_template_name(name)}]
        for container in containers:
            container.setdefault("resources", {})["claims"] = [{"name": GPU_CLAIM_NAME}]
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    affinity = model_affinity(decision) if gpu_pod else None
    if affinity:
        pod["affinity"] = affinity
    tolerations = pod_tolerations(spec, decision, gpu_pod=gpu_pod)
    if tolerations:
        pod["tolerations"] = tolerations
    return {"metadata": metadata, "spec": pod}


def pod_tolerations(spec: JobSpec, decision: SizingDecision, *, gpu_pod: bool) -> list[dict[str, Any]]:
    """The spec's tolerations, after the vendor's GPU taint toleration on a GPU pod."""
    found: list[dict[str, Any]] = []
    if gpu_pod and decision.resource_key:
        found.append({"key": decision.resource_key, "operator": "Exists", "effect": "NoSchedule"})
    for toleration in spec.tolerations:
        item = toleration.model_dump(by_alias=True, exclude_none=True)
        if item not in found:
            found.append(item)
    return found


def container_env(spec: JobSpec, decision: SizingDecision) -> list[dict[str, str]]:
    """What was allocated (not what was asked for), then the spec's `env`."""
    clash = reserved_env_clash(spec.env)
    if clash:
        raise BadInput(
            *(f"env.{key}: set by raybridge to the GPUs actually allocated; use another name" for key in clash)
        )
    values = allocation_env(decision.total_gpus, decision.replicas, decision.gpus_per_replica)
    values.update(spec.env)
    return [{"name": key, "value": value} for key, value in values.items()]


def gpu_resources(decision: SizingDecision) -> dict[str, str]:
    """The whole-GPU extended resource per pod; empty without GPUs, when sharing a GPU through KAI, or when the GPUs
    are claimed as DRA devices (`render_claim_template`)."""
    if not _has_gpus(decision) or decision.fractional or decision.dra:
        return {}
    if not decision.resource_key:
        raise ValueError(f"decision allocates {decision.gpus_per_replica} GPUs per replica but names no resource key")
    # Quantities in their canonical string form, as the API server returns them.
    return {decision.resource_key: str(int(decision.gpus_per_replica))}


def pod_resources(cpu: str, memory: str, extended: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """Requests equal to limits: the pod gets exactly what Kueue counted."""
    amounts: dict[str, Any] = {"cpu": cpu, "memory": memory, **(extended or {})}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def head_cpu_memory(spec: JobSpec) -> tuple[str, str]:
    return spec.head.cpu or DEFAULT_HEAD_CPU, spec.head.memory or DEFAULT_HEAD_MEMORY


def worker_cpu_memory(spec: JobSpec, decision: SizingDecision) -> tuple[str, str]:
    """Per-GPU CPU and memory times the GPUs per replica (defaults without GPUs); `spec.worker` wins."""
    gpus = decision.gpus_per_replica
    if gpus > 0:
        factor = Decimal(str(gpus))
        cores, num_bytes = Decimal(str(spec.cpus_per_gpu)) * factor, parse_quantity(spec.memory_per_gpu) * factor
        if not spec.worker.cpu and (cores * 1000).to_integral_value() < 1:
            raise BadInput(f"cpusPerGpu: {spec.cpus_per_gpu:g} CPU per GPU on {gpus:g} GPU(s) per replica is {cores:g} CPU, "
                           "below 1m, the smallest CPU amount Kubernetes keeps (it would be a 0m request)")
        if not spec.worker.memory and num_bytes.to_integral_value() < 1:
            raise BadInput(f"memoryPerGpu: {spec.memory_per_gpu} per GPU on {gpus:g} GPU(s) per replica is below 1 byte "
                           "(it would be a 0 request)")
        # Each is within bounds; their product need not be (raybridge writes no quantity above 2^63-1, core/quantity.py).
        if not spec.worker.cpu and cores > MAX_QUANTITY:
            raise BadInput(f"cpusPerGpu: {spec.cpus_per_gpu:g} CPU per GPU on {gpus:g} GPU(s) per replica is {cores:.3g} CPU, "
                           "above 2^63-1, the most a request holds")
        if not spec.worker.memory and num_bytes > MAX_QUANTITY:
            raise BadInput(f"memoryPerGpu: {spec.memory_per_gpu} per GPU on {gpus:g} GPU(s) per replica is {num_bytes:.3g} bytes, "
                           "above 2^63-1, the most a request holds")
        cpu, memory = format_cpu(cores), format_memory(num_bytes)
    else:
        cpu, memory = DEFAULT_WORKER_CPU, DEFAULT_WORKER_MEMORY
    return spec.worker.cpu or cpu, spec.worker.memory or memory


def image_for(spec: JobSpec, decision: SizingDecision, ray_version: str, python: PythonVersion) -> str:
    """The spec's image, else the vendor's default for `ray_version` (the CPU image when no GPUs are allocated)."""
    if spec.image:
        return spec.image
    vendor = decision.gpu_vendor if _has_gpus(decision) else None
    return default_image(vendor, ray_version, python)


# --- labels and names ------------------------------------------------------------------------


def selector_labels(name: str) -> dict[str, str]:
    """The labels that find every object and pod of one raybridge job."""
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, JOB_NAME_LABEL: name}


def queue_labels(spec: JobSpec, decision: SizingDecision) -> dict[str, str]:
    """Kueue's queue and priority labels, or KAI's queue label when a GPU is shared."""
    if decision.fractional:
        return {KAI_QUEUE_LABEL: kai_queue(spec)}
    labels: dict[str, str] = {}
    if spec.queue:
        labels[KUEUE_QUEUE_LABEL] = _label_value("queue", spec.queue)
    if spec.priority_class:
        labels[KUEUE_PRIORITY_LABEL] = _label_value("priorityClass", spec.priority_class)
    return labels


def object_labels(spec: JobSpec, decision: SizingDecision, *, name: str) -> dict[str, str]:
    return {**selector_labels(name), **queue_labels(spec, decision)}


def kai_queue(spec: JobSpec) -> str:
    return _label_value("queue", spec.queue or KAI_DEFAULT_QUEUE)


def check_identity(kind: str, name: str, namespace: str) -> None:
    """BadInput unless `name` is a DNS-1035 label within the kind's limit and `namespace` a DNS-1123 label."""
    problems = [f"name: {p}" for p in (name_problem(kind, name, name_limit(kind)),) if p]
    problems += [f"namespace: {p}" for p in (namespace_problem(namespace),) if p]
    if problems:
        raise BadInput(*problems)


# --- private ---------------------------------------------------------------------------------


def _object(api_version: str, kind: str, name: str, namespace: str, labels: dict[str, str], spec: dict[str, Any]) -> Manifest:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def _has_gpus(decision: SizingDecision) -> bool:
    return decision.gpus_per_replica > 0


def _label_value(field: str, value: str) -> str:
    problem = queue_name_problem(value)
    if problem:
        raise BadInput(f"{field}: {problem}")
    return value


class _ManifestDumper(yaml.SafeDumper):
    """SafeDumper that writes multi-line strings as blocks and never emits anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_str(data)


_ManifestDumper.add_representer(str, _represent_str)
