"""Kueue in a test cluster (sigs.k8s.io/kueue): operator `"kueue"` of a Stack.

Why: raybridge's queues, admission and eviction are judged against Kueue itself. Its controller manager runs as a
process with the stack's admin kubeconfig and its release's own default Configuration (pointed at loopback: health,
metrics and webhook servers on 127.0.0.1), its CRDs from the module with the conversion webhook its kustomization
patches in, its webhooks called by `url: https://127.0.0.1:PORT/...` with the stack's CA, as Kueue's envtest does
(`updateClientConfig` in its pkg/util/testing envtest); the stack records it as the Deployment its Helm chart makes.

Kueue's visibility API (the queue positions of pending Workloads, an aggregated API) is served where a stack turns on
the VisibilityOnDemand gate (`StackOptions.kueue_feature_gates`), on a release that can bind it to an address
(`visibilityServer.bindAddress`, v0.17 on): the server listens on 127.0.0.1, with a certificate of the stack's CA it
reads from the fixed `/visibility` (pkg/visibility/server.go `certDir`), which exists in Kueue's own root only (a
tmpfs root of the host's top-level folders bound in, and /visibility); its APIServices (the module's
config/components/visibility) name a Service that is an ExternalName for 127.0.0.1, which the API server's aggregator
dials as it is (k8s.io/apiserver pkg/util/proxy `ResolveCluster`; no endpoints, so no IP beyond loopback).

What this does not do: no internal certificate management, no leader election, no visibility API on a release that
would listen on every interface (v0.13: StartError).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import yaml

from testcluster.processes import StartError, free_port, http_ok, wait_until
from testcluster.sources import crd_files, module_dir, yaml_documents

if TYPE_CHECKING:
    from testcluster.stack import Stack

__all__ = ["KUEUE_NAMESPACE", "VISIBILITY_SERVICE", "kueue_record", "start_kueue"]

KUEUE_NAMESPACE = "kueue-system"
#: The Service Kueue's APIServices name (its kustomization's `kueue-` prefix on config/components/visibility's).
VISIBILITY_SERVICE = "kueue-visibility-server"
VISIBILITY_GATE = "VisibilityOnDemand"


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
    wanted = {VISIBILITY_GATE: False, **stack.options.kueue_feature_gates}
    visibility_certs, visibility_port = None, 0
    if wanted[VISIBILITY_GATE]:
        visibility_certs, visibility_port = _visibility_certificate(stack, source), free_port()
        config["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": visibility_port}
    config_path = stack.workdir / "kueue" / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    gates = "--feature-gates=" + ",".join(f"{gate}={str(on).lower()}" for gate, on in wanted.items())
    kueue_argv = [str(stack.binaries["kueue"]), f"--config={config_path}", f"--kubeconfig={stack.kubeconfig}", gates, "--zap-log-level=info"]
    argv = _in_mount_namespace(etc_layer, kueue_argv, visibility_certs, stack.workdir / "kueue" / "root")
    env = dict(os.environ, KUBECONFIG=str(stack.kubeconfig), POD_NAMESPACE=KUEUE_NAMESPACE)
    process = stack.start_process("kueue", argv, env)
    process.wait_ready(lambda: http_ok(f"http://127.0.0.1:{probe}/readyz"), 120)
    stack.apply(_webhooks(stack, source, webhook_port))
    stack.apply(kueue_record(kueue.version, config, [gates]))
    if visibility_port:
        _serve_visibility(stack, source, visibility_port)


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


def _visibility_certificate(stack: "Stack", source: Path) -> Path:
    """The visibility server's certificate, for the name the aggregator checks (`<service>.<namespace>.svc`:
    kube-aggregator pkg/apiserver/handler_proxy.go `updateAPIService`), in a folder of its own: /visibility to Kueue.
    StartError on a release whose Configuration cannot bind the server to an address."""
    types = (source / "apis" / "config").glob("*/configuration_types.go")
    if not any("VisibilityServerConfiguration" in path.read_text() and "BindAddress" in path.read_text() for path in types):
        raise StartError(f"Kueue {stack.programs['kueue'].version} cannot bind its visibility server to 127.0.0.1 (no visibilityServer.bindAddress): no {VISIBILITY_GATE} here")
    assert stack.pki is not None
    pair = stack.pki.serving("kueue-visibility", ("127.0.0.1", "localhost", f"{VISIBILITY_SERVICE}.{KUEUE_NAMESPACE}.svc"))
    folder = stack.workdir / "kueue" / "visibility"
    folder.mkdir(parents=True)
    shutil.copy(pair.cert, folder / "tls.crt")
    shutil.copy(pair.key, folder / "tls.key")
    return folder


def _serve_visibility(stack: "Stack", source: Path, port: int) -> None:
    """The Service (an ExternalName for 127.0.0.1) and the release's APIServices for the server on `port`, verified
    with the stack's CA; waits until the API server's aggregator finds each Available."""
    assert stack.pki is not None
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": VISIBILITY_SERVICE, "namespace": KUEUE_NAMESPACE},
               "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}  # fmt: skip
    services = [doc for path in sorted((source / "config" / "components" / "visibility").glob("apiservice_*.yaml")) for doc in yaml_documents(path)]
    for api_service in services:
        api_service["spec"].pop("insecureSkipTLSVerify", None)
        api_service["spec"]["caBundle"] = stack.pki.ca_data
        api_service["spec"]["service"] = {"name": VISIBILITY_SERVICE, "namespace": KUEUE_NAMESPACE, "port": port}
    stack.apply([service, *services])
    from kubernetes import client

    api = stack.api_client()
    try:
        registration = client.ApiregistrationV1Api(api)

        def available() -> bool:
            for api_service in services:
                found = registration.read_api_service(api_service["metadata"]["name"], _request_timeout=10)
                if not any(c.type == "Available" and c.status == "True" for c in (found.status.conditions or [])):
                    return False
            return True

        wait_until(available, 60, "Kueue's visibility APIServices did not become Available")
    finally:
        api.close()


#: Kueue's mount namespace (`_in_mount_namespace`): /etc with a layer over it; with a folder of certificates, a root
#: of its own (a tmpfs with each top-level entry of the host's bound in, recursively, and /visibility), entered by chroot.
_MOUNT_SCRIPT = """set -e
layer=$1 certs=$2 root=$3
shift 3
mount -t overlay testcluster-etc -o "lowerdir=$layer:/etc" /etc
[ -n "$certs" ] || exec "$@"
mount -t tmpfs -o mode=0755 testcluster-root "$root"
for entry in /*; do
  if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "$root$entry"
  elif [ -d "$entry" ]; then mkdir "$root$entry" && mount --rbind "$entry" "$root$entry"
  else touch "$root$entry" && mount --bind "$entry" "$root$entry"; fi
done
mkdir "$root/visibility" && mount --bind "$certs" "$root/visibility"
exec chroot "$root" "$@"
"""


def _in_mount_namespace(layer: Path, argv: list[str], certs: Optional[Path], root: Path) -> list[str]:
    """`argv` run in a mount namespace of its own whose /etc is the host's with `layer` over it (read-only
    overlay), and where `certs` is given, in a root of its own where they are /visibility: nothing is written to the
    host's /etc or /. Root uses a plain mount namespace, others a user namespace mapped to root (Linux 5.11 or later)."""
    unshare = ["unshare", "--mount", "--propagation", "private"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]
    if certs is not None:
        root.mkdir(parents=True)
    return unshare + ["sh", "-c", _MOUNT_SCRIPT, "sh", str(layer), str(certs or ""), str(root)] + argv
