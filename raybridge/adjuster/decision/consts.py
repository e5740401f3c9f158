"""Names the in-cluster node-scale-adjuster writes and reads: labels, annotations, defaults, env vars.

Each rule lives here once, so the controller, the placeholder builder, the
configs' tests and the reconcile core agree on what marks the adjuster's own
objects. It holds constants only; the names every raybridge component shares (the managed-by
label key) come from `core/consts.py`, the ProvisioningRequest API and its classes from
`autoscalers/provisioning_request.py`.
"""

from __future__ import annotations

from raybridge.autoscalers.provisioning_request import BEST_EFFORT_ATOMIC_CLASS  # noqa: F401 - read as consts.<NAME>
from raybridge.autoscalers.provisioning_request import CHECK_CAPACITY_CLASS  # noqa: F401
from raybridge.autoscalers.provisioning_request import GROUP as PROVISIONING_GROUP  # noqa: F401
from raybridge.autoscalers.provisioning_request import PLURAL as PROVISIONING_PLURAL  # noqa: F401
from raybridge.autoscalers.provisioning_request import VERSION as PROVISIONING_VERSION  # noqa: F401
from raybridge.core.consts import MANAGED_BY_LABEL

#: Every object the adjuster creates carries these two labels (the key is raybridge's: core/consts.py);
#: the controller adopts by them.
MANAGED_BY_VALUE = "raybridge-adjuster"
COMPONENT_LABEL = "app.kubernetes.io/component"
PLACEHOLDER_COMPONENT = "placeholder"
#: The constraint group's id (vendor and a digest, always short) and the GPUs a placeholder asks for.
GROUP_LABEL = "raybridge.io/adjuster-group"
GPUS_LABEL = "raybridge.io/placeholder-gpus"
#: JSON list of the "namespace/name" pods a placeholder was created for.
PODS_ANNOTATION = "raybridge.io/placeholder-for"
#: JSON mapping of resource name to thousandths: what the pods a placeholder stands for request beside their GPU
#: shares (CPU, memory, ...). Recorded, not requested: the autoscalers see those pods' requests on the pods.
POD_REQUESTS_ANNOTATION = "raybridge.io/placeholder-pod-requests"

PLACEHOLDER_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{COMPONENT_LABEL}={PLACEHOLDER_COMPONENT}"

#: A node a placeholder brought up is kept from voluntary disruption until its pods land or the provision timeout
#: passes: Karpenter does not disrupt a node annotated `karpenter.sh/do-not-disrupt: "true"`
#: (karpenter@v1.14.1 pkg/controllers/state/statenode.go ValidateNodeDisruptable), and consolidates an empty
#: one after `consolidateAfter` (0 s is common), which a node is once its placeholder has exited and before
#: KAI's pods land; cluster-autoscaler does not scale down a node annotated
#: `cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"` (cluster-autoscaler-1.36.1
#: core/scaledown/eligibility/eligibility.go ScaleDownDisabledKey) and removes one unneeded for
#: --scale-down-unneeded-time (10 minutes by default, often set lower). The adjuster sets the annotations only with
#: its own label beside it, and removes only what it set; `kubectl get nodes -l raybridge.io/adjuster-hold` lists
#: the nodes it holds.
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"
SCALE_DOWN_DISABLED_ANNOTATION = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
#: What a hold sets, each to "true" where no one else has.
HOLD_ANNOTATIONS = (DO_NOT_DISRUPT_ANNOTATION, SCALE_DOWN_DISABLED_ANNOTATION)
HOLD_LABEL = "raybridge.io/adjuster-hold"
#: The hold label's values and the annotations each says the adjuster set (and removes on release): "both", only
#: do-not-disrupt ("true", as holds were before there was a second annotation), only scale-down-disabled
#: ("scale-down"), neither ("label-only": someone else had set both).
HOLD_VALUES: dict[str, tuple[str, ...]] = {
    "both": HOLD_ANNOTATIONS,
    "true": (DO_NOT_DISRUPT_ANNOTATION,),
    "scale-down": (SCALE_DOWN_DISABLED_ANNOTATION,),
    "label-only": (),
}
#: Patching nodes for the hold is granted only by this opt-in file (with a policy that lets the adjuster change
#: nothing else on a node); refused (403), the adjuster says so once and tries again after HOLDS_RETRY_SECONDS.
HOLD_GRANT_FILE = "configs/adjuster/optional/karpenter-hold.yaml"
HOLDS_RETRY_SECONDS = 600.0

DEFAULT_NAMESPACE = "raybridge-adjuster"
DEFAULT_PRIORITY_CLASS = "raybridge-placeholder"
#: The cluster autoscaler's --expendable-pods-priority-cutoff the adjuster assumes (the autoscaler's default):
#: the placeholders' PriorityClass must be at least this (configs/adjuster/10-priorityclass.yaml: -1).
DEFAULT_EXPENDABLE_CUTOFF = -10
#: The placeholder's container runs `true` and exits at once: the node stays, its GPUs are free for
#: the real pods (a pause image would keep them until preempted, and KAI does not preempt pods of
#: other schedulers). Any image with `true` and `sleep` binaries works (--placeholder-image). This one is the
#: busybox Kubernetes' own e2e suite pulls (test/utils/image/manifest.go: registry.k8s.io/e2e-test-images,
#: busybox 1.36.1-1), so it is on the official registry and its mirrors.
DEFAULT_PLACEHOLDER_IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
PLACEHOLDER_COMMAND = ("/bin/true",)
#: A placeholder of pods that must not share a host (host_spread.py) runs this long before it exits (busybox's
#: `sleep`): kube-scheduler forgets a finished pod, so between such a placeholder's exit and the landing of the
#: replica it was for, the group's next placeholder could be bound to its node (the anti-affinity that keeps them
#: apart holds against running pods only) and be counted for nothing there, while the node launched for it came
#: empty: 4 anti-affine replicas got 5 GPU nodes in 2 of 4 bursts on Karpenter. Running, it keeps the others off its
#: node until the replica is there (KAI binds it within its next sessions, beside the placeholder on another GPU, and
#: the controller then deletes the placeholder; where the placeholder takes every GPU of its node, the replica waits
#: this long). A node of the group that comes up later than this after the first still races as before: the
#: replacement kept off counted nodes (reconcile._landed_nodes) is what is left then.
KEEP_APART_SECONDS = 20
KEEP_APART_COMMAND = ("/bin/sleep", str(KEEP_APART_SECONDS))
#: The label such a placeholder carries ("true"): `kubectl get pods -l` lists them.
KEEP_APART_LABEL = "raybridge.io/placeholder-keeps-apart"
#: The UID the placeholder runs as (non-root; busybox needs no user entry for `true`).
PLACEHOLDER_UID = 65532
NAME_PREFIX = "rb-placeholder"
DEFAULT_LEASE_NAME = "raybridge-adjuster"
COMPONENT_NAME = "raybridge-adjuster"

#: How long capacity a placeholder brought up counts against the demand before its pods must land.
DEFAULT_PROVISION_TIMEOUT_SECONDS = 300.0
#: How often the controller reconciles without an event (a grace period ending is noticed this fast).
DEFAULT_RESYNC_SECONDS = 1.0
#: A group whose placeholder the autoscaler said it brings no node for (decision/refusals.py) gets no new placeholder
#: for this long after the autoscaler last said so: Karpenter says it again after 5 minutes while the pod still
#: fails (its Event's DedupeTimeout, pkg/controllers/provisioning/scheduling/events.go), cluster-autoscaler every loop.
REFUSAL_HOLD_SECONDS = 330.0
#: A pass stops creating once the nodes no longer offer what it read (a node came up meanwhile: its room may hold the
#: pods the rest were for) and leaves them to the next pass, which reads the nodes again; after this many passes in a
#: row cut short, the next one creates all it decided, so that nodes changing all the time never stop every creation.
PASSES_CUT_SHORT_IN_A_ROW = 3
#: A pool with no node now is known by the GPU memory of its nodes when one was last seen, for this long: a
#: gpu-memory pod larger than all of them is refused rather than asked a node for again (demand.py).
MEMORY_SEEN_SECONDS = 3600.0
#: Karpenter's NodePools (read, where granted, to say which limit keeps a placeholder out).
KARPENTER_GROUP, KARPENTER_VERSION, NODE_POOL_PLURAL = "karpenter.sh", "v1", "nodepools"
#: Quiet time after an event before reconciling, so a burst is one reconcile.
DEFAULT_DEBOUNCE_SECONDS = 0.1
#: New placeholders wait while GPU-sharing pods their scheduler has not looked at yet exist, and until none has
#: been created for this long (Karpenter's BATCH_IDLE_DURATION; creation times are whole seconds) ...
DEFAULT_BATCH_IDLE_SECONDS = 1.0
#: ... never longer than until a pod they are for has waited this long (Karpenter's BATCH_MAX_DURATION).
DEFAULT_BATCH_MAX_SECONDS = 10.0
#: `--metrics-bind-address`: in a pod ":8080", every interface of the pod's own network (controller-runtime's old
#: default), where Prometheus scrapes the pod's address; outside a pod "127.0.0.1:8080", this machine alone.
DEFAULT_METRICS_HOST = ""
DEFAULT_METRICS_PORT = 8080
#: `--health-probe-bind-address`: in a pod ":8081" (controller-runtime's scaffolding), where the kubelet's probes
#: connect; outside a pod none ("0"): nothing probes there, and the metrics port answers /healthz and /readyz too.
DEFAULT_PROBE_HOST = ""
DEFAULT_PROBE_PORT = 8081
#: The host of both outside a pod.
LOOPBACK_HOST = "127.0.0.1"
DEFAULT_LEASE_DURATION_SECONDS = 15
DEFAULT_RENEW_DEADLINE_SECONDS = 10
DEFAULT_RETRY_PERIOD_SECONDS = 2
#: Bound on every API call (connect and read); watches add their own server-side timeout.
DEFAULT_REQUEST_TIMEOUT_SECONDS = 10.0
WATCH_TIMEOUT_SECONDS = 60

#: Environment variables: every flag of `adjuster run` can come from one (the flag wins).
ENV_PREFIX = "RAYBRIDGE_ADJUSTER_"

# --- --mode provisioning-request -------------------------------------------------------------
REQUEST_COMPONENT = "provisioning-request"
#: On each PodTemplate: the ProvisioningRequest it belongs to.
REQUEST_LABEL = "raybridge.io/provisioning-request"
REQUEST_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{COMPONENT_LABEL}={REQUEST_COMPONENT}"
REQUEST_NAME_PREFIX = "rb-request"
DEFAULT_PROVISIONING_CLASS = BEST_EFFORT_ATOMIC_CLASS
#: A Failed request keeps covering its pods this long before it is deleted and asked for again.
DEFAULT_FAILED_BACKOFF_SECONDS = 60.0
