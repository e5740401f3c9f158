"""The real KAI scheduler (github.com/NVIDIA/KAI-scheduler v0.12.0) in a test cluster: operator `"kai"` of a Stack.

Why: fractional GPUs (`gpu-fraction`, GPU reservation pods) and KAI's queues are judged against KAI itself, not
against our reading of it. KAI ships as an operator that turns its `Config` and `SchedulingShard` into
Deployments; here the same programs are started out of cluster with the stack's admin kubeconfig
(each uses controller-runtime's `GetConfigOrDie`, so `KUBECONFIG` does), with the flags and scheduler
configuration KAI's operator gives them for the chart's defaults (`pkg/operator/operands/*/resources*.go` at
v0.12.0), GPU sharing turned on as `--set global.gpuSharing=true` would:
- its CRDs from the module (`deployments/kai-scheduler/crds`), the namespaces and the reservation service account
  the chart creates, and the RuntimeClass `nvidia` that KAI's admission gives GPU pods (the GPU operator creates it
  on a real cluster);
- the admission webhook (it names the config maps of GPU-sharing pods, which the binder then needs), called by
  `url: https://127.0.0.1:PORT` with the stack's CA, with the selectors and rules of the operator's webhook
  configurations; the binder; the pod grouper; the scheduler with the default shard's configuration;
- the chart's default queues (`default-parent-queue`, and its leaf `default-queue`);
- one kwok Stage that plays the one node-side step of a GPU reservation pod (`reservation_gpu_stage`).

KAI's node-scale-adjuster is built with the rest but started only on request (`start_node_scale_adjuster`, with the
flags the operator gives it: pkg/operator/operands/node_scale_adjuster/resources.go), as the chart starts it only with
`global.clusterAutoscaling`; its scaling pods' container exits at once (cmd/scalingpod's `main` returns), which a
stack plays with `scaling_pod_stage()` among its `StackOptions.stages`.

What this does not do: no KAI operator (what it would derive is derived here, once, from its code), no pod group or
queue controllers (they write PodGroup and Queue status, which scheduling does not read), no
Prometheus (time-aware fairness off), no leader election, no MIG, no device plugin or NVML (kubesim/FIDELITY.md).

The scheduler's plugin server (`/get-snapshot` hands out nodes, queues and ConfigMaps to whoever asks) and the
admission webhook server take a port but no host (cmd/scheduler/app/server.go `RunApp`: `:PORT`; cmd/admission/app
`New`: controller-runtime's webhook server with no Host), so both listen on every interface: the scheduler, the
admission and the node-scale-adjuster run in network namespaces of their own (netjail.py), where that is their own
loopback; the API server reaches the webhook on a loopback port of the stack's that leads there, the stack their
health and metrics through Unix sockets, nothing else reaches them. The binder and the pod grouper take a host for
each of their servers and run as they are.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import yaml

from testcluster.processes import Process, free_port, http_ok, unix_http_ok
from testcluster.sources import crd_files, module_dir, yaml_documents
from testcluster.programs import KAI_COMMANDS, Program, program

if TYPE_CHECKING:
    from testcluster.stack import Stack

__all__ = [
    "KAI_NAMESPACE", "QUEUE_LABEL", "RESERVATION_NAMESPACE", "SCALE_ADJUST_NAMESPACE", "SCALING_POD_APP", "SCHEDULER_NAME",
    "kai_programs", "reservation_gpu_stage", "scaling_pod_stage", "start_kai", "start_node_scale_adjuster",
]  # fmt: skip

#: KAI's defaults (pkg/common/constants/constants.go at v0.12.0).
SCHEDULER_NAME = "kai-scheduler"
KAI_NAMESPACE = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
RESERVATION_NAMESPACE = "kai-resource-reservation"  # also the reservation pods' service account and `app` label
SCALE_ADJUST_NAMESPACE = "kai-scale-adjust"
GPU_RUNTIME_CLASS = "nvidia"
#: The `app` label of the node-scale-adjuster's scaling pods (its `--scaling-pod-app-label` default, which the operator
#: leaves, and the scheduler's `ScalingPodAppLabelValue`).
SCALING_POD_APP = "scaling-pod"
#: Ports inside the namespaces of the jailed programs (no other process shares them): KAI's defaults.
WEBHOOK_PORT, HEALTH_PORT, METRICS_PORT, PLUGIN_SERVER_PORT = 9443, 8081, 8080, 8082
#: The annotation a GPU reservation pod's own container writes: the UUID of the one GPU it was given.
GPU_INDEX_ANNOTATION = "run.ai/reserve_for_gpu_index"


def kai_programs(version: Optional[str] = None) -> dict[str, Program]:
    """KAI's programs a stack runs (`kai-scheduler`, ...), at `version` (default: the newest built here)."""
    return {f"kai-{command}": program(f"kai-{command}", version) for command in KAI_COMMANDS}


def reservation_gpu_stage() -> dict:
    """A kwok Stage that plays what a GPU reservation pod's container does on a real node.

    The binder creates a reservation pod per shared GPU and waits until the pod carries the annotation
    `run.ai/reserve_for_gpu_index` (github.com/NVIDIA/KAI-scheduler@v0.12.0,
    pkg/binder/binding/resourcereservation/resource_reservation.go, `waitForGPUReservationPodAllocation`). On a
    real node the pod's container writes it: it asks NVML for the one GPU the device plugin gave it and patches its
    own pod with that GPU's UUID (cmd/resourcereservation/app/app.go `Run`,
    pkg/resourcereservation/discovery/discovery.go `GetGPUDevice`, pkg/resourcereservation/patcher/pod_patcher.go
    `PatchDeviceInfo`). kwok runs no container, so this Stage writes it once the pod runs: `GPU-<pod uid>`, which
    has a GPU UUID's form and is distinct for each reservation pod, as each gets a GPU of its own. Only this step is
    played (kubesim/FIDELITY.md); which GPU of the node is not modelled (KAI's scheduler tracks GPU groups itself).
    """
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "kai-gpu-reservation"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchLabels": {"app": RESERVATION_NAMESPACE},
                "matchExpressions": [
                    {"key": ".metadata.namespace", "operator": "In", "values": [RESERVATION_NAMESPACE]},
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {"key": f'.metadata.annotations["{GPU_INDEX_ANNOTATION}"]', "operator": "DoesNotExist"},
                ],
            },
            "next": {
                "patches": [{
                    "root": "metadata", "type": "merge",
                    "template": f"annotations:\n  {GPU_INDEX_ANNOTATION}: GPU-{{{{ .metadata.uid }}}}\n",
                }],
            },
        },
    }  # fmt: skip


def scheduler_config() -> dict:
    """The scheduler configuration KAI's operator writes for the chart's default SchedulingShard (placement strategy
    `binpack` for GPU and CPU, no kValue, minimum runtime, queue depth or usage database):
    pkg/operator/operands/scheduler/resources_for_shard.go `configMapForShard` at v0.12.0."""
    plugins = [
        "predicates", "proportion", "priority", "nodeavailability", "resourcetype", "podaffinity", "elastic", "kubeflow",
        "ray", "subgrouporder", "taskorder", "nominatednode", "dynamicresources", "minruntime", "topology", "snapshot",
    ]  # fmt: skip
    tier = [{"name": name} for name in plugins]
    tier += [{"name": "gpupack"}, {"name": "nodeplacement", "arguments": {"gpu": "binpack", "cpu": "binpack"}}, {"name": "gpusharingorder"}]
    return {"actions": "allocate, consolidation, reclaim, preempt, stalegangeviction", "tiers": [{"plugins": tier}]}


def default_queues(source: Path) -> list[dict]:
    """The chart's default queue hierarchy (templates/default-queue.yaml with values.yaml's `defaultQueue`)."""
    values = yaml.safe_load((source / "deployments" / "kai-scheduler" / "values.yaml").read_text())["defaultQueue"]
    parent = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": values["parentName"]},
              "spec": {"resources": values["parentResources"]}}  # fmt: skip
    child = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": values["childName"]},
             "spec": {"parentQueue": values["parentName"], "resources": values["childResources"]}}  # fmt: skip
    return [parent, child]


def _webhook_configurations(stack: "Stack", port: int) -> list[dict]:
    """The admission webhook configurations KAI's operator writes (pkg/operator/operands/admission/resources.go
    `mutatingWCForKAIConfig`, `validatingWCForKAIConfig`, `buildWebhookSelectors` at v0.12.0), called by URL."""
    assert stack.pki is not None
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", KAI_NAMESPACE]}]}
    rule = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}

    def hook(path: str, operations: list[str]) -> dict:
        return {
            "name": f"kai-admission.{KAI_NAMESPACE}.svc", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "namespaceSelector": selector, "failurePolicy": "Fail", "rules": [dict(rule, operations=operations)],
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": stack.pki.ca_data},
        }  # fmt: skip

    mutating = dict(hook("/mutate--v1-pod", ["CREATE"]), reinvocationPolicy="IfNeeded")
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "kai-admission"}, "webhooks": [mutating]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "kai-admission"}, "webhooks": [hook("/validate--v1-pod", ["CREATE", "UPDATE"])]},
    ]  # fmt: skip


def start_kai(stack: "Stack") -> None:
    """KAI's CRDs and objects, then its admission webhook, binder, pod grouper and scheduler, then its default queues."""

    assert stack.pki is not None
    scheduler = stack.programs["kai-scheduler"]
    source = module_dir(scheduler.upstream_module(), scheduler.module_dir)
    stack.install_crds([doc for path in crd_files("kai", source) for doc in yaml_documents(path)])
    namespaces = (KAI_NAMESPACE, RESERVATION_NAMESPACE, SCALE_ADJUST_NAMESPACE)
    stack.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in namespaces])
    stack.apply([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": RESERVATION_NAMESPACE, "namespace": RESERVATION_NAMESPACE}},
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": GPU_RUNTIME_CLASS}, "handler": GPU_RUNTIME_CLASS},
    ])  # fmt: skip
    home = stack.workdir / "kai"
    env = dict(os.environ, KUBECONFIG=str(stack.kubeconfig))

    # The admission webhook: controller-runtime reads its serving certificate from $TMPDIR/k8s-webhook-server/serving-certs.
    tmp = home / "admission-tmp"
    certs = tmp / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True)
    serving = stack.pki.serving("kai-admission", ("127.0.0.1", "localhost"))
    shutil.copy(serving.cert, certs / "tls.crt")
    shutil.copy(serving.key, certs / "tls.key")
    argv = [
        str(stack.binaries["kai-admission"]), "--scheduler-name", SCHEDULER_NAME, "--webhook-addr", str(WEBHOOK_PORT),
        "--health-probe-bind-address", f"127.0.0.1:{HEALTH_PORT}", "--metrics-bind-address", "0",
        "--gpu-sharing-enabled=true", "--gpu-pod-runtime-class-name", GPU_RUNTIME_CLASS,
    ]  # fmt: skip
    webhook, health = stack.sockets / "kai-admission-webhook.sock", stack.sockets / "kai-admission-health.sock"
    process = stack.jailed("kai-admission", argv, dict(env, TMPDIR=str(tmp)), serves={webhook: WEBHOOK_PORT, health: HEALTH_PORT})
    process.wait_ready(lambda: unix_http_ok(health, "/readyz"), 60)
    stack.apply(_webhook_configurations(stack, stack.expose(webhook)))

    probe = free_port()
    argv = [
        str(stack.binaries["kai-binder"]), "--scheduler-name", SCHEDULER_NAME,
        "--resource-reservation-namespace", RESERVATION_NAMESPACE, "--resource-reservation-service-account", RESERVATION_NAMESPACE,
        "--resource-reservation-app-label", RESERVATION_NAMESPACE,
        "--resource-reservation-pod-image", f"registry/local/kai-scheduler/resourcereservation:{scheduler.version}",
        "--scale-adjust-namespace", SCALE_ADJUST_NAMESPACE, "--health-probe-bind-address", f"127.0.0.1:{probe}",
        "--metrics-bind-address", "0", "--cdi-enabled=false",
    ]  # fmt: skip
    binder = stack.start_process("kai-binder", argv, env)  # no health checks of its own: ready once its workers run
    binder.wait_ready(lambda: 'Starting workers\t{"controller": "bindrequest"' in binder.log.read_text(errors="replace"), 60)

    probe = free_port()
    argv = [
        str(stack.binaries["kai-podgrouper"]), "--scheduler-name", SCHEDULER_NAME, "--queue-label-key", QUEUE_LABEL,
        "--nodepool-label-key", NODE_POOL_LABEL, "--health-probe-bind-address", f"127.0.0.1:{probe}", "--metrics-bind-address", "0",
    ]  # fmt: skip
    stack.start_process("kai-podgrouper", argv, env).wait_ready(lambda: http_ok(f"http://127.0.0.1:{probe}/readyz"), 60)

    config = home / "scheduler-config.yaml"
    config.write_text(yaml.safe_dump(scheduler_config(), sort_keys=False))
    argv = [
        str(stack.binaries["kai-scheduler"]), f"--scheduler-conf={config}", f"--scheduler-name={SCHEDULER_NAME}",
        f"--namespace={KAI_NAMESPACE}", f"--nodepool-label-key={NODE_POOL_LABEL}", "--partition-label-value=",
        f"--resource-reservation-app-label={RESERVATION_NAMESPACE}", f"--listen-address=127.0.0.1:{METRICS_PORT}",
        f"--plugin-server-port={PLUGIN_SERVER_PORT}",
    ]  # fmt: skip
    metrics = stack.sockets / "kai-scheduler-metrics.sock"
    stack.jailed("kai-scheduler", argv, env, serves={metrics: METRICS_PORT}).wait_ready(lambda: unix_http_ok(metrics, "/metrics"), 60)
    stack.apply(default_queues(source))


def scaling_pod_stage() -> dict:
    """A kwok Stage: a running scaling pod of the node-scale-adjuster exits 0 at once, as its image does on a node
    (cmd/scalingpod/main.go at v0.12.0: an empty `main`). The adjuster deletes a scaling pod that succeeded."""
    from testcluster.kwok import completing_stage

    return completing_stage("kai-scaling-pod-exits", {"app": SCALING_POD_APP})


def start_node_scale_adjuster(stack: "Stack") -> Process:
    """KAI's node-scale-adjuster, started now with the flags KAI's operator gives it for the chart's defaults
    (`argsForKAIConfig`: scheduler name, service account and namespace `kai-scale-adjust`, the scaling pod image),
    once its controller's workers run. The caller stops it (`Process.stop()`); each start is a fresh adjuster (its
    60 s cooldown is held in memory). The service account the operator creates for the scaling pods is created here.

    The program has no flag for its metrics server: controller-runtime's default binds `:8080`, every interface, so
    it runs in a network namespace of its own (netjail.py), where that is its own loopback."""
    stack.apply([{"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": SCALE_ADJUST_NAMESPACE, "namespace": SCALE_ADJUST_NAMESPACE}}])  # fmt: skip
    version = stack.programs["kai-scheduler"].version
    argv = [
        str(stack.binaries["kai-nodescaleadjuster"]), "--scheduler-name", SCHEDULER_NAME,
        "--scaling-pod-service-account", SCALE_ADJUST_NAMESPACE, "--scale-adjust-namespace", SCALE_ADJUST_NAMESPACE,
        "--scaling-pod-image", f"registry/local/kai-scheduler/scalingpod:{version}",
    ]  # fmt: skip
    log = stack.workdir / "logs" / "kai-nodescaleadjuster.log"
    offset = log.stat().st_size if log.exists() else 0  # the log is appended to by every start
    process = stack.jailed("kai-nodescaleadjuster", argv, dict(os.environ, KUBECONFIG=str(stack.kubeconfig)))

    def workers_started() -> bool:
        with open(log, "rb") as text:
            text.seek(offset)
            return b"Starting workers" in text.read()

    try:
        process.wait_ready(workers_started, 60)
    except BaseException:
        process.stop()
        raise
    return process
