"""Kueue in a test cluster (sigs.k8s.io/kueue): operator `"kueue"` of a Stack.

Why: raybridge's queues, admission and eviction are judged against Kueue itself. Its controller manager runs as a
process with the stack's admin kubeconfig and its release's own default Configuration (pointed at loopback: health,
metrics and webhook servers on 127.0.0.1), its CRDs from the module with the conversion webhook its kustomization
patches in, its webhooks called by `url: https://127.0.0.1:PORT/...` with the stack's CA, as Kueue's envtest does
(`updateClientConfig` in its pkg/util/testing envtest); the stack records it as the Deployment its Helm chart makes.

What this does not do: no visibility API (its server reads certificates from a fixed `/visibility` and is reached
only through a Service's endpoints), no internal certificate management, no leader election.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import yaml

from testcluster.processes import free_port, http_ok
from testcluster.sources import crd_files, module_dir, yaml_documents

if TYPE_CHECKING:
    from testcluster.stack import Stack

__all__ = ["KUEUE_NAMESPACE", "kueue_record", "start_kueue"]

KUEUE_NAMESPACE = "kueue-system"


def _certificates(stack: "Stack") -> tuple[Path, Path]:
    """The webhook serving certificate (in certDir) and the metrics certificate Kueue reads from the
    fixed /etc/kueue/metrics/certs (cmd/kueue/main.go): laid in a directory that an overlay puts over /etc."""
    assert stack.pki is not None
    webhook = stack.pki.serving("kueue-webhook", ("127.0.0.1", "localhost"))
    cert_dir = stack.workdir / "kueue" / "webhook-certs"
    cert_dir.mkdir(parents=True)
    shutil.copy(webhook.cert, cert_dir / "tls.crt")
    shutil.copy(webhook.key, cert_dir / "tls.key")
    etc_layer = stack.workdir / "kueue" / "etc"
    metrics_dir = etc_layer / "kueue" / "metrics" / "certs"
    metrics_dir.mkdir(parents=True)
    shutil.copy(webhook.cert, metrics_dir / "tls.crt")
    shutil.copy(webhook.key, metrics_dir / "tls.key")
    return cert_dir, etc_layer


def _webhooks(stack: "Stack", source: Path, port: int) -> list[dict]:
    """Kueue's webhook configurations (config/components/webhook), called by URL with the stack's CA,
    with the namespace selectors its kustomization adds for pods, deployments and statefulsets."""
    assert stack.pki is not None
    folder = source / "config" / "components" / "webhook"
    selectors: dict[str, dict] = {}
    for patch in yaml.safe_load((folder / "kustomization.yaml").read_text()).get("patches", []):
        for hook in yaml.safe_load(patch.get("patch", "{}") or "{}").get("webhooks", []):
            selectors[hook["name"]] = hook["namespaceSelector"]
    configurations = []
    for document in yaml_documents(folder / "manifests.yaml"):
        document["metadata"]["name"] = "kueue-" + document["metadata"]["name"]
        for hook in document.get("webhooks", []):
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": stack.pki.ca_data}
            if hook["name"] in selectors:
                hook["namespaceSelector"] = selectors[hook["name"]]
        configurations.append(document)
    return configurations


def _crds(stack: "Stack", source: Path, port: int) -> list[dict]:
    """Kueue's CRDs, with the conversion webhook on those its kustomization patches (config/components/crd:
    the `webhook_in_*` patches its kustomization.yaml lists; the folder holds more, such as ResourceFlavors',
    whose types have no conversion, so a webhook there fails every read in the other version)."""
    assert stack.pki is not None
    crd_folder = source / "config" / "components" / "crd"
    listed = [entry["path"] for entry in yaml.safe_load((crd_folder / "kustomization.yaml").read_text()).get("patches") or []]
    patches = [crd_folder / path for path in listed if Path(path).name.startswith("webhook_in_")]
    converted = {doc["metadata"]["name"] for path in patches for doc in yaml_documents(path)}
    crds = [doc for path in crd_files("kueue", source) for doc in yaml_documents(path)]
    for crd in crds:
        if crd["metadata"]["name"] in converted:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {"clientConfig": {"url": f"https://127.0.0.1:{port}/convert", "caBundle": stack.pki.ca_data}, "conversionReviewVersions": ["v1"]},
            }
    return crds


def start_kueue(stack: "Stack") -> None:
    """Kueue's namespace, CRDs (with their conversion webhook), the controller manager, its webhooks, its record."""
    kueue = stack.programs["kueue"]
    source = module_dir(kueue.upstream_module(), kueue.module_dir)
    webhook_port, probe, metrics = free_port(), free_port(), free_port()
    cert_dir, etc_layer = _certificates(stack)
    stack.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}])
    stack.install_crds(_crds(stack, source, webhook_port))
    config = _default_config(source)
    config.update({
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics}"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
    })  # fmt: skip
    config.update(stack.options.kueue_config)
    config_path = stack.workdir / "kueue" / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    wanted = {"VisibilityOnDemand": False, **stack.options.kueue_feature_gates}
    gates = "--feature-gates=" + ",".join(f"{gate}={str(on).lower()}" for gate, on in wanted.items())
    kueue_argv = [str(stack.binaries["kueue"]), f"--config={config_path}", f"--kubeconfig={stack.kubeconfig}", gates, "--zap-log-level=info"]
    argv = _with_etc_layer(etc_layer, kueue_argv)
    env = dict(os.environ, KUBECONFIG=str(stack.kubeconfig), POD_NAMESPACE=KUEUE_NAMESPACE)
    process = stack.start_process("kueue", argv, env)
    process.wait_ready(lambda: http_ok(f"http://127.0.0.1:{probe}/readyz"), 120)
    stack.apply(_webhooks(stack, source, webhook_port))
    stack.apply(kueue_record(kueue.version, config, [gates]))


#: The ConfigMap Kueue's Helm chart keeps the Configuration in, and its key (charts/kueue/templates/manager/manager-config.yaml).
KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"


def kueue_record(version: str, config: Optional[dict] = None, args: Optional[list[str]] = None) -> list[dict]:
    """The Deployment Kueue's Helm chart creates for the controller manager this stack runs as a process, with no
    replicas (charts/kueue/templates/manager/manager.yaml and _helpers.tpl "kueue.controllerManager.labels" at
    v0.17.0), for a client to read Kueue's release from; with `config`, the ConfigMap the chart mounts it from
    (volume `manager-config`) and the process's own `args` (its feature gates), as the chart passes them."""
    selector = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": "kueue", "control-plane": "controller-manager"}
    labels = {**selector, "app.kubernetes.io/version": version, "app.kubernetes.io/component": "controller", "app.kubernetes.io/managed-by": "Helm"}
    container: dict = {"name": "manager", "image": f"registry.k8s.io/kueue/kueue:{version}", "command": ["/manager"]}
    pod: dict = {"containers": [container]}
    objects: list[dict] = []
    if config is not None:
        container["args"] = [f"--config=/{KUEUE_CONFIG_KEY}", *(args or [])]
        container["volumeMounts"] = [{"name": "manager-config", "mountPath": f"/{KUEUE_CONFIG_KEY}", "subPath": KUEUE_CONFIG_KEY}]
        pod["volumes"] = [{"name": "manager-config", "configMap": {"name": KUEUE_CONFIG_MAP}}]
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": KUEUE_CONFIG_MAP, "namespace": KUEUE_NAMESPACE},
                        "data": {KUEUE_CONFIG_KEY: yaml.safe_dump(config)}})  # fmt: skip
    return objects + [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "kueue-controller-manager", "namespace": KUEUE_NAMESPACE, "labels": labels},
         "spec": {"replicas": 0, "selector": {"matchLabels": selector},
                  "template": {"metadata": {"labels": selector}, "spec": pod}}},
    ]  # fmt: skip


def _default_config(source: Path) -> dict:
    """The release's own default Configuration (config/components/manager/controller_manager_config.yaml: its
    API version, integrations and controller settings), which the stack then points at loopback."""
    return yaml.safe_load((source / "config" / "components" / "manager" / "controller_manager_config.yaml").read_text())


def _with_etc_layer(layer: Path, argv: list[str]) -> list[str]:
    """`argv` run in a mount namespace of its own whose /etc is the host's with `layer` over it (read-only
    overlay): nothing is written to the host's /etc. Root uses a plain mount namespace, others a user
    namespace mapped to root (Linux 5.11 or later)."""
    unshare = ["unshare", "--mount", "--propagation", "private"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]
    script = 'mount -t overlay testcluster-etc -o "lowerdir=$1:/etc" /etc && shift && exec "$@"'
    return unshare + ["sh", "-c", script, "sh", str(layer)] + argv
