"""`adjuster plan` on 10,000 pending pods and 2,000 nodes, against merely loading the two JSON files.

Both are whole processes run alternately on the same files: `python -m
raybridge adjuster plan --pods P --nodes N -o json` and a `python -c` that
only `json.load`s P and N. `adjuster plan` turns the cyclic GC off, so the
loader that counts does too (same setting on both sides); the loader with the
GC on is printed for reference only, and so is `adjuster plan --help` (the
CLI's start-up: interpreter, imports, parser). The script prints each median and the
ratio plan / load (GC off), in wall time and in the processes' CPU time
(which a busy machine disturbs less); the issue's target is below 2, and the
exit status is 1 when the wall ratio does not meet it. Both sides run with
bytecode caches, as an installed package has them (pip compiles them; the
standard library ships them): the children write raybridge's to a private
PYTHONPYCACHEPREFIX on the warm-up run even where PYTHONDONTWRITEBYTECODE is
set, so the plan side does not compile its modules from source on every
run while the loader's json module comes precompiled. The files are
generated from a seed: 10,000 pending pods (one in twenty still inside the grace period; fractions,
gpu-memory pods, multi-device pods, two vendors) and 2,000 nodes in four
pools with selectors and tolerations, in two shapes, each measured:

* `kubectl` (the one the target is judged on): objects as `kubectl get -o json`
  prints them. A pod is a KubeRay worker as KubeRay's pod builder writes it
  (ray-operator/controllers/ray/common/pod.go `DefaultWorkerPodTemplate`,
  `labelPod`, the env of `setContainerEnvVars`, the `wait-gcs-ready` init
  container, the probes of utils/constant.go) after the API server's defaults
  (service-account volume, default tolerations, dnsPolicy and the rest), with
  the Unschedulable condition KAI writes: about 6.3 KB compact. A node is a GPU node
  labelled by Node Feature Discovery and the GPU operator's feature
  discovery, with the image list and node info a kubelet reports: about 13 KB.
  managedFields are left out, as kubectl leaves them out by default.
* `lean`: the same pods and nodes with only what the planner reads and a
  little more (about 1 KB a pod and 0.9 KB a node, compact), for reference: here the
  planner's own work weighs the most against the load.

    python benchmarks/adjuster_plan_speed.py [--runs 7] [--pods 10000] [--nodes 2000] [--seed 1] [--shape kubectl|lean|both]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOW = "2025-06-01T12:00:00Z"

POOLS = [  # (pool label, vendor, GPUs per node, MiB per GPU, taint)
    ("h100", "nvidia", 8, 81559, None),
    ("a100", "nvidia", 8, 40960, None),
    ("l4", "nvidia", 4, 23034, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}),
    ("mi300x", "amd", 8, None, {"key": "amd.com/gpu", "effect": "NoSchedule"}),
]


def make_nodes(count: int, rng: random.Random) -> list[dict]:
    nodes = []
    for i in range(count):
        pool, vendor, gpus, mib, taint = POOLS[i % len(POOLS)]
        key = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}[vendor]
        labels = {"pool": pool, "kubernetes.io/hostname": f"{pool}-{i}", "topology.kubernetes.io/zone": f"zone-{rng.randint(1, 3)}"}
        labels["amd.com/gpu.vram" if vendor == "amd" else "nvidia.com/gpu.memory"] = "192G" if vendor == "amd" else str(mib)
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"{pool}-{i}", "labels": labels, "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [taint]} if taint else {},
            "status": {
                "allocatable": {key: str(gpus), "cpu": "96", "memory": "1056745Mi", "pods": "110", "ephemeral-storage": "1Ti"},
                "capacity": {key: str(gpus), "cpu": "96", "memory": "1056745Mi", "pods": "110", "ephemeral-storage": "1Ti"},
                "conditions": [{"type": t, "status": "False" if t != "Ready" else "True", "lastTransitionTime": NOW} for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
                "nodeInfo": {"kubeletVersion": "v1.31.2", "containerRuntimeVersion": "containerd://1.7.22"},
            },
        })  # fmt: skip
    return nodes


def make_pods(count: int, rng: random.Random) -> list[dict]:
    pods = []
    for i in range(count):
        pool, vendor, _, _, taint = rng.choice(POOLS)
        roll = rng.random()
        annotations = {"kai.scheduler/queue": f"team-{i % 7}"}
        if roll < 0.6:
            annotations["gpu-fraction"] = rng.choice(["0.1", "0.125", "0.2", "0.25", "0.3", "0.33", "0.5", "0.6", "0.75"])
        else:
            annotations["gpu-memory"] = str(rng.choice([2000, 4096, 10240, 20000, 40000]))
        if rng.random() < 0.08:
            annotations["gpu-fraction-num-devices"] = str(rng.choice([2, 4]))
        spec = {
            "schedulerName": "kai-scheduler",
            "nodeSelector": {"pool": pool},
            "containers": [{"name": "main", "image": "rayproject/ray:2.55.1", "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
                            "env": [{"name": "RANK", "value": str(i)}], "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        }  # fmt: skip
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.mktime(time.strptime(NOW, "%Y-%m-%dT%H:%M:%SZ")) - 3700 + i // 4))
        if taint:
            spec["tolerations"].append({"key": taint["key"], "operator": "Exists", "effect": "NoSchedule"})
        status: dict = {"phase": "Pending"}
        state = rng.random()
        if True:  # every pod pending; one in twenty still inside the grace period
            waited = 2 if state < 0.05 else rng.randint(11, 3600)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.mktime(time.strptime(NOW, "%Y-%m-%dT%H:%M:%SZ")) - waited))
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": stamp,
                                     "message": "Not enough resources for the workload: node-group(s) didn't have enough resources: GPUs."}]  # fmt: skip
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"job-{i}-worker", "namespace": f"team-{i % 7}", "uid": f"{i:08d}-0000-0000-0000-000000000000", "creationTimestamp": created,
                         "labels": {"app": "ray", "kai.scheduler/queue": f"team-{i % 7}"}, "annotations": annotations},
            "spec": spec,
            "status": status,
        })  # fmt: skip
    return pods


# --- the kubectl shape: the same objects with everything else a real cluster returns -----------------

NFD_CPUID = ("ADX", "AESNI", "AMXBF16", "AMXINT8", "AMXTILE", "AVX", "AVX2", "AVX512BF16", "AVX512BITALG", "AVX512BW",
             "AVX512CD", "AVX512DQ", "AVX512F", "AVX512FP16", "AVX512IFMA", "AVX512VBMI", "AVX512VBMI2", "AVX512VL",
             "AVX512VNNI", "AVX512VPOPCNTDQ", "AVXVNNI", "CETIBT", "CETSS", "CMPXCHG8", "FLUSH_L1D", "FMA3", "FSRM",
             "FXSR", "FXSROPT", "GFNI", "HYPERVISOR", "IA32_ARCH_CAP", "IBPB", "LAHF", "MD_CLEAR", "MOVBE", "MOVDIR64B",
             "MOVDIRI", "OSXSAVE", "SERIALIZE", "SHA", "SPEC_CTRL_SSBD", "STIBP", "SYSCALL", "SYSEE", "TSXLDTRK", "VAES",
             "VMX", "VPCLMULQDQ", "WAITPKG", "WBNOINVD", "X87", "XGETBV1", "XSAVE", "XSAVEC", "XSAVEOPT", "XSAVES")  # fmt: skip
IMAGES = ("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", "nvcr.io/nvidia/driver:550.127.08-ubuntu22.04",
          "nvcr.io/nvidia/gpu-operator:v24.9.0", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
          "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.0", "nvcr.io/nvidia/k8s/container-toolkit:v1.17.0-ubuntu20.04",
          "registry.k8s.io/nfd/node-feature-discovery:v0.16.6", "rayproject/ray:2.55.1-py311-cu124", "rayproject/ray:2.54.0-py311-cu124",
          "ghcr.io/nvidia/kai-scheduler/binder:v0.9.3", "registry.k8s.io/kube-proxy:v1.31.2", "registry.k8s.io/pause:3.10",
          "docker.io/calico/node:v3.28.2", "docker.io/calico/cni:v3.28.2", "registry.k8s.io/coredns/coredns:v1.11.3",
          "quay.io/prometheus/node-exporter:v1.8.2", "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
          "docker.io/fluent/fluent-bit:3.1.9", "registry.k8s.io/csi-secrets-store/driver:v1.4.6", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04")  # fmt: skip


def kubectl_node(node: dict, index: int, rng: random.Random) -> dict:
    """`node` with the labels, annotations and status a GPU node of a real cluster has."""
    labels = node["metadata"]["labels"]
    vendor = "amd" if "amd.com/gpu" in node["status"]["allocatable"] else "nvidia"
    zone = labels["topology.kubernetes.io/zone"]
    labels.update({
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": f"gpu-{labels['pool']}-8x", "node.kubernetes.io/instance-type": f"gpu-{labels['pool']}-8x",
        "topology.kubernetes.io/region": "region-1", "failure-domain.beta.kubernetes.io/region": "region-1",
        "failure-domain.beta.kubernetes.io/zone": zone, "node-role.kubernetes.io/gpu": "",
        "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true", "feature.node.kubernetes.io/cpu-hardware_multithreading": "true",
        "feature.node.kubernetes.io/cpu-model.family": "6", "feature.node.kubernetes.io/cpu-model.id": "143",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel", "feature.node.kubernetes.io/kernel-version.full": "5.15.0-1071-nvidia",
        "feature.node.kubernetes.io/kernel-version.major": "5", "feature.node.kubernetes.io/kernel-version.minor": "15",
        "feature.node.kubernetes.io/kernel-version.revision": "0", "feature.node.kubernetes.io/memory-numa": "true",
        "feature.node.kubernetes.io/pci-10de.present": str(vendor == "nvidia").lower(), "feature.node.kubernetes.io/pci-1002.present": str(vendor == "amd").lower(),
        "feature.node.kubernetes.io/storage-nonrotationaldisk": "true", "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04", "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "22",
    })  # fmt: skip
    labels.update({f"feature.node.kubernetes.io/cpu-cpuid.{flag}": "true" for flag in NFD_CPUID})
    if vendor == "nvidia":
        labels.update({f"nvidia.com/gpu.deploy.{part}": "true" for part in ("container-toolkit", "dcgm", "dcgm-exporter", "device-plugin", "driver", "gpu-feature-discovery", "node-status-exporter", "operator-validator")})
        labels.update({
            "nvidia.com/cuda.driver-version.full": "550.127.08", "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "127",
            "nvidia.com/cuda.driver.rev": "08", "nvidia.com/cuda.runtime-version.full": "12.4", "nvidia.com/cuda.runtime.major": "12",
            "nvidia.com/cuda.runtime.minor": "4", "nvidia.com/gfd.timestamp": str(1_730_000_000 + index), "nvidia.com/gpu.compute.major": "9",
            "nvidia.com/gpu.compute.minor": "0", "nvidia.com/gpu.count": node["status"]["allocatable"]["nvidia.com/gpu"],
            "nvidia.com/gpu.family": "hopper", "nvidia.com/gpu.machine": "gpu-server", "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": f"NVIDIA-{labels['pool'].upper()}-80GB-HBM3", "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "single",
            "nvidia.com/mps.capable": "false", "nvidia.com/vgpu.present": "false",
        })  # fmt: skip
    else:
        labels.update({"amd.com/gpu.cu-count": "304", "amd.com/gpu.device-id": "74a1", "amd.com/gpu.family": "AI",
                       "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM", "amd.com/gpu.simd-count": "1216", "amd.com/gpu.driver-version": "6.8.5"})  # fmt: skip
    node["metadata"].update({
        "uid": f"{index:08x}-1111-2222-3333-444444444444", "resourceVersion": str(10_000_000 + index), "creationTimestamp": "2025-05-01T08:00:00Z",
    })  # fmt: skip
    node["metadata"]["annotations"].update({
        "csi.volume.kubernetes.io/nodeid": json.dumps({"secrets-store.csi.k8s.io": node["metadata"]["name"]}),
        "nfd.node.kubernetes.io/feature-labels": ",".join(k.split("/", 1)[1] for k in labels if k.startswith("feature.node.kubernetes.io/")),
        "nfd.node.kubernetes.io/master.version": "v0.16.6", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "projectcalico.org/IPv4Address": f"10.{index // 250}.{index % 250}.10/16",
    })  # fmt: skip
    node["spec"].update({"podCIDR": f"10.244.{index % 250}.0/24", "podCIDRs": [f"10.244.{index % 250}.0/24"], "providerID": f"cloud://region-1/{zone}/node-{index}"})
    status = node["status"]
    for part in ("allocatable", "capacity"):
        status[part].update({"hugepages-1Gi": "0", "hugepages-2Mi": "0"})
    for cond in status["conditions"]:
        cond.update({"lastHeartbeatTime": NOW, "reason": f"Kubelet{'Ready' if cond['type'] == 'Ready' else 'Has' + cond['type'].replace('Pressure', '')}",
                     "message": "kubelet is posting ready status" if cond["type"] == "Ready" else f"kubelet has no {cond['type']}"})  # fmt: skip
    status.update({
        "addresses": [{"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250}"}, {"type": "Hostname", "address": node["metadata"]["name"]},
                      {"type": "InternalDNS", "address": f"{node['metadata']['name']}.region-1.compute.internal"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": [{"names": [f"{name}@sha256:{rng.getrandbits(256):064x}", name], "sizeBytes": rng.randint(10**7, 9 * 10**9)} for name in IMAGES],
        "nodeInfo": {**status["nodeInfo"], "architecture": "amd64", "bootID": f"{rng.getrandbits(128):032x}", "kernelVersion": "5.15.0-1071-nvidia",
                     "kubeProxyVersion": "v1.31.2", "machineID": f"{rng.getrandbits(128):032x}", "operatingSystem": "linux",
                     "osImage": "Ubuntu 22.04.5 LTS", "systemUUID": f"{rng.getrandbits(128):032x}"},
    })  # fmt: skip
    return node


WAIT_GCS_READY = """
					SECONDS=0
					while true; do
						if (( SECONDS <= 120 )); then
							if ray health-check --address {head}:6379 > /dev/null 2>&1; then
								echo "GCS is ready."
								break
							fi
							echo "$SECONDS seconds elapsed: Waiting for GCS to be ready."
						else
							if ray health-check --address {head}:6379; then
								echo "GCS is ready. Any error messages above can be safely ignored."
								break
							fi
							echo "$SECONDS seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, refer to the FAQ at https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html."
						fi
						sleep 5
					done
				"""


def kubectl_pod(pod: dict, index: int, rng: random.Random) -> dict:
    """`pod` as a KubeRay worker pod the API server returns: KubeRay's labels, env, init container and probes, the server's defaults."""
    meta, spec = pod["metadata"], pod["spec"]
    cluster = f"job-{index}"
    head = f"{cluster}-head-svc.{meta['namespace']}.svc.cluster.local"
    meta.update({"generateName": f"{cluster}-gpu-worker-", "resourceVersion": str(20_000_000 + index)})
    meta["labels"].update({"app.kubernetes.io/created-by": "kuberay-operator", "app.kubernetes.io/name": "kuberay", "ray.io/cluster": cluster,
                           "ray.io/group": "gpu", "ray.io/identifier": f"{cluster}-worker", "ray.io/is-ray-node": "yes", "ray.io/node-type": "worker",
                           "ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": cluster})  # fmt: skip
    meta["annotations"].update({"ray.io/ft-enabled": "false", "pod-group-name": f"pg-{cluster}-{rng.getrandbits(32):08x}"})
    meta["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster, "uid": f"{index:08x}-aaaa-bbbb-cccc-dddddddddddd",
                                "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    token_volume = f"kube-api-access-{rng.getrandbits(20):05x}"
    token_mount = {"name": token_volume, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}  # the server's
    user_mounts, user_env = spec["containers"][0].get("volumeMounts", []), spec["containers"][0].get("env", [])
    mounts = [*user_mounts, {"name": "shared-mem", "mountPath": "/dev/shm"}, token_mount]
    start = (f"ray start  --address={head}:6379  --block  --dashboard-agent-listen-port=52365  --memory=8589934592  "
             "--metrics-export-port=8080  --num-cpus=2  --num-gpus=0 ")
    env = [
        {"name": "FQ_RAY_IP", "value": head}, {"name": "RAY_IP", "value": f"{cluster}-head-svc"},
        {"name": "RAY_CLUSTER_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['ray.io/cluster']"}}},
        {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
        {"name": "RAY_CLOUD_INSTANCE_ID", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "RAY_NODE_TYPE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['ray.io/group']"}}},
        {"name": "KUBERAY_GEN_RAY_START_CMD", "value": start}, {"name": "RAY_PORT", "value": "6379"},
        {"name": "RAY_ADDRESS", "value": f"{head}:6379"}, {"name": "RAY_USAGE_STATS_KUBERAY_IN_USE", "value": "1"},
        {"name": "RAY_USAGE_STATS_EXTRA_TAGS", "value": "kuberay_version=v1.5.2;kuberay_crd=RayJob"},
        {"name": "REDIS_PASSWORD", "value": ""}, {"name": "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "value": "1"},
        {"name": "RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S", "value": "600"}, *user_env,
    ]  # fmt: skip

    def probe(initial: int, failures: int) -> dict:
        command = "wget --tries 1 -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"
        return {"exec": {"command": ["bash", "-c", command]}, "initialDelaySeconds": initial, "timeoutSeconds": 2,
                "periodSeconds": 5, "successThreshold": 1, "failureThreshold": failures}  # fmt: skip

    ray = spec["containers"][0]
    image = ray["image"]
    ray.update({
        "name": "ray-worker", "command": ["/bin/bash", "-lc", "--"], "args": [f"ulimit -n 65536; {start}"], "env": env,
        "ports": [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}], "volumeMounts": mounts,
        "resources": {"limits": {"cpu": "2", "memory": "8Gi"}, "requests": {"cpu": "2", "memory": "8Gi"}},
        "livenessProbe": probe(30, 120), "readinessProbe": probe(10, 10),
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
    })  # fmt: skip
    init = {
        "name": "wait-gcs-ready", "image": image, "command": ["/bin/bash", "-lc", "--"], "args": [WAIT_GCS_READY.format(head=head)],
        # The user's env and mounts as the template had them (copied before KubeRay adds its own), then FQ_RAY_IP and RAY_IP.
        "env": [*user_env, env[0], env[1]], "volumeMounts": [*user_mounts, token_mount],
        "resources": {"limits": {"cpu": "200m", "memory": "256Mi"}, "requests": {"cpu": "200m", "memory": "256Mi"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
    }  # fmt: skip
    spec.update({
        "initContainers": [init], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {}, "priority": 0,
        "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
    })  # fmt: skip
    spec["volumes"] = [{"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}, *spec["volumes"], {
        "name": token_volume, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}]  # fmt: skip
    spec["tolerations"].insert(1, {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    pod["status"]["qosClass"] = "Guaranteed"
    for cond in pod["status"]["conditions"]:
        cond["lastProbeTime"] = None
    return pod


def child_environment(pycache: Path) -> dict[str, str]:
    """This environment, with bytecode caches written to and read from `pycache` (see the docstring)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system) for one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=str(ROOT), env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-500:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(shape: str, args: argparse.Namespace) -> dict:
    """Write the files in `shape`, run every process alternately, and return the medians and the plan."""
    rng = random.Random(args.seed)
    nodes, pods = make_nodes(args.nodes, rng), make_pods(args.pods, rng)
    if shape == "kubectl":
        detail = random.Random(args.seed + 1)
        nodes = [kubectl_node(node, i, detail) for i, node in enumerate(nodes)]
        pods = [kubectl_pod(pod, i, detail) for i, pod in enumerate(pods)]
    tmp = Path(tempfile.mkdtemp(prefix=f"rb-adjuster-{shape}-"))
    try:
        pods_file, nodes_file = tmp / "pods.json", tmp / "nodes.json"
        nodes_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}, indent=4))  # as kubectl indents
        pods_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}, indent=4))
        load = f"json.load(open({str(pods_file)!r})); json.load(open({str(nodes_file)!r}))"
        commands = {
            "load the JSON files": [sys.executable, "-c", f"import json; {load}"],
            "load the JSON files, GC off": [sys.executable, "-c", f"import json, gc; gc.disable(); {load}"],
            "adjuster plan": [sys.executable, "-m", "raybridge", "adjuster", "plan", "--pods", str(pods_file), "--nodes", str(nodes_file), "--now", NOW, "-o", "json"],
            "startup only: adjuster plan --help": [sys.executable, "-m", "raybridge", "adjuster", "plan", "--help"],
        }
        env = child_environment(tmp / "pycache")
        plan_text = subprocess.run(commands["adjuster plan"], capture_output=True, text=True, cwd=str(ROOT), env=env, check=True).stdout
        for command in commands.values():  # warm-up: page cache, bytecode caches
            timed(command, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                wall, used = timed(command, env)
                samples[name].append(wall)
                cpu[name].append(used)
        return {
            "shape": shape,
            "size_mb": (pods_file.stat().st_size + nodes_file.stat().st_size) / 1e6,
            "pod_kb": pods_file.stat().st_size / args.pods / 1e3,
            "node_kb": nodes_file.stat().st_size / args.nodes / 1e3,
            "wall": {name: statistics.median(values) for name, values in samples.items()},
            "cpu": {name: statistics.median(values) for name, values in cpu.items()},
            "plan_text": plan_text,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # 200 MB of files per shape


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shape", choices=("kubectl", "lean", "both"), default="both")
    args = parser.parse_args()
    shapes = ("kubectl", "lean") if args.shape == "both" else (args.shape,)
    results = [measure(shape, args) for shape in shapes]
    if len(results) == 2 and results[0]["plan_text"] != results[1]["plan_text"]:
        raise SystemExit("the two shapes gave different plans: the kubectl shape changed what the planner reads")
    plan = json.loads(results[0]["plan_text"])
    methods = sorted({g["method"] for g in plan["groups"]})
    print(f"{args.pods} pods, {args.nodes} nodes; {len(plan['placeholders'])} placeholders, "
          f"{plan['totalGpus']} GPUs, {len(plan['groups'])} groups ({', '.join(methods)}), {len(plan['ignored'])} ignored")  # fmt: skip
    print(f"| shape | process | median wall time ({args.runs} runs) | median CPU time |")
    print("|---|---|---|---|")
    for r in results:
        where = f"{r['shape']} ({r['size_mb']:.1f} MB: {r['pod_kb']:.1f} KB a pod, {r['node_kb']:.1f} KB a node)"
        for name, median in r["wall"].items():
            print(f"| {where} | {name} | {median:.3f} s | {r['cpu'][name]:.3f} s |")
    status = 0
    for r in results:
        honest = r["wall"]["adjuster plan"] / r["wall"]["load the JSON files, GC off"]
        honest_cpu = r["cpu"]["adjuster plan"] / r["cpu"]["load the JSON files, GC off"]
        with_gc = r["wall"]["adjuster plan"] / r["wall"]["load the JSON files"]
        print(f"{r['shape']}: ratio adjuster plan / load, the GC off on both sides: {honest:.2f} wall, {honest_cpu:.2f} CPU"
              f"{' (target < 2)' if r['shape'] == 'kubectl' else ' (reference)'}; against a loader with the GC on: {with_gc:.2f} wall")  # fmt: skip
        if r["shape"] == "kubectl" and honest >= 2:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
