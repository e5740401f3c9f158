"""A real `kubectl` and raybridge against the real API server (testcluster) over TLS.

Why: the README says `render` prints manifests `kubectl apply -f -` takes (valid, accepted by the webhooks);
this pipes `python -m raybridge render` into the `kubectl` these machines carry
(the oldest and the newest of 1.27 to 1.33 when the versioned binaries are
there), server-side and client-side, into the session's real cluster (kube-apiserver
with the real KubeRay and Kueue, whose webhooks see each object), and reads the
objects back with `kubectl get`. It also runs raybridge's own commands through the
kubeconfig forms real clusters hand out: a CA file (absolute and relative to the
kubeconfig), inline CA data, and an exec credential plugin (client.authentication.k8s.io
v1 and v1beta1) handing out a ServiceAccount's token, including one that fails.

What it deliberately does not do: wait for what the controllers make of the applied
objects (each test's namespace is deleted after it), or test kubectl itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.helpers import EXAMPLES, ROOT, cli_env

pytestmark = pytest.mark.e2e


def _kubectl_binaries() -> list[str]:
    """The oldest and newest versioned kubectl next to the one on PATH (`kubectl.1.27` ...), else `kubectl`."""
    found = shutil.which("kubectl")
    if found is None:
        return []
    versioned = sorted(Path(found).resolve().parent.glob("kubectl.1.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
    if not versioned:
        return [found]
    return sorted({str(versioned[0]), str(versioned[-1])})


KUBECTLS = _kubectl_binaries()
if not KUBECTLS:
    pytest.skip("no kubectl on PATH", allow_module_level=True)


#: The example cluster's nodes (three 8-GPU AMD nodes among them), so that examples/train-gpu.yaml (gpuVendor: amd)
#: sizes to two 8-GPU workers; the session's cluster has NVIDIA nodes only.
NODES = EXAMPLES / "cluster" / "nodes.json"


@pytest.fixture(scope="module")
def server(real_cluster) -> Iterator[Any]:
    """The admin's client of the session's real cluster."""
    client = real_cluster.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def namespace(server) -> Iterator[str]:
    """A fresh namespace, with a ServiceAccount `kubectl-user` bound to cluster-admin for the exec plugin's token;
    deleted after the test with everything applied into it."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    server.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    server.create_object({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kubectl-user", "namespace": name}})
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": f"{name}-kubectl-user"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": "kubectl-user", "namespace": name}]}  # fmt: skip
    server.create_object(binding)
    try:
        yield name
    finally:
        server.delete_object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", binding["metadata"]["name"])
        server.delete_object("v1", "Namespace", name)


def kubeconfig(server: Any, folder: Path, namespace: str, form: str) -> Path:
    """A kubeconfig of one form: `ca-file`, `ca-data`, `ca-relative` (the admin's certificate), `exec-v1`,
    `exec-v1beta1` (the ServiceAccount's token through an exec plugin)."""
    path = folder / f"config-{form}"
    if form.startswith("exec-"):
        token = server.service_account_token(namespace, "kubectl-user")
        return server.write_kubeconfig(path, namespace, token=token, certificate_authority="data",
                                       exec_api_version=f"client.authentication.k8s.io/{form.split('-', 1)[1]}")  # fmt: skip
    server.write_kubeconfig(path, namespace, certificate_authority="file" if form != "ca-data" else "data")
    if form == "ca-relative":  # as kubectl resolves it: relative to the kubeconfig's folder
        config = yaml.safe_load(path.read_text())
        config["clusters"][0]["cluster"]["certificate-authority"] = f"{path.name}.ca.crt"
        path.write_text(yaml.safe_dump(config))
    return path


def raybridge(config: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raybridge", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env=cli_env(KUBECONFIG=str(config)), cwd=str(ROOT))


def kubectl(binary: str, config: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    cache = config.parent / f"kubectl-cache-{Path(binary).name}"
    return subprocess.run([binary, "--kubeconfig", str(config), "--cache-dir", str(cache), *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env=cli_env(HOME=str(config.parent)))


def rendered(config: Path, *args: str) -> str:
    out = raybridge(config, "render", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("binary", KUBECTLS, ids=lambda b: Path(b).name)
@pytest.mark.parametrize("form", ["ca-file", "exec-v1"])
def test_render_applies_server_side_and_reads_back(server, namespace, tmp_path, binary, form):
    config = kubeconfig(server, tmp_path, namespace, form)
    manifests = rendered(config, str(EXAMPLES / "train-gpu.yaml"), "-n", namespace, "--nodes", str(NODES))
    applied = kubectl(binary, config, "apply", "--server-side", "-f", "-", stdin=manifests)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "rayjob.ray.io/train-gpu serverside-applied"
    again = kubectl(binary, config, "apply", "--server-side", "-f", "-", stdin=manifests)
    assert again.returncode == 0, again.stderr  # re-applying is a no-op, not a conflict with what Kueue's webhook set

    listed = kubectl(binary, config, "get", "rayjobs")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "JOB", "STATUS"]  # the CRD's printer columns, served as a Table
    assert row.split()[0] == "train-gpu"
    got = kubectl(binary, config, "get", "rayjob", "train-gpu", "-o", "json")
    assert got.returncode == 0, got.stderr
    obj = json.loads(got.stdout)
    worker = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["amd.com/gpu"] == "8"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert obj["spec"]["suspend"] is True  # Kueue's webhook took it: it waits for admission, not for a kubelet
    stored = server.get_object("ray.io/v1", "RayJob", "train-gpu", namespace)
    assert ("kubectl", "Apply") in [(e["manager"], e["operation"]) for e in stored["metadata"]["managedFields"]]


@pytest.mark.parametrize("binary", KUBECTLS, ids=lambda b: Path(b).name)
@pytest.mark.parametrize("kind_args", [
    ("--submission-mode", "K8sJobMode", "--working-dir", "https://example.com/hello.zip"),
    ("--no-ray", "--kind", "job"),
    ("--no-ray", "--kind", "service"),
], ids=["rayjob-k8sjobmode", "job", "service"])
def test_render_applies_client_side_as_the_readme_says(server, namespace, tmp_path, binary, kind_args):
    config = kubeconfig(server, tmp_path, namespace, "ca-data")
    manifests = rendered(config, str(EXAMPLES / "hello.yaml"), "-n", namespace, *kind_args)
    kinds = [doc["kind"] for doc in yaml.safe_load_all(manifests) if doc]
    first = kubectl(binary, config, "apply", "-f", "-", stdin=manifests)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count(" created") == len(kinds), first.stdout
    second = kubectl(binary, config, "apply", "-f", "-", stdin=manifests)
    assert second.returncode == 0, second.stderr
    for doc in yaml.safe_load_all(manifests):
        if doc:
            assert server.get_object(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], namespace) is not None


@pytest.mark.parametrize("form", ["ca-file", "ca-relative", "ca-data", "exec-v1", "exec-v1beta1"])
def test_raybridge_commands_work_through_each_kubeconfig_form(server, namespace, tmp_path, form):
    config = kubeconfig(server, tmp_path, namespace, form)
    probe = yaml.safe_load(rendered(config, str(EXAMPLES / "hello.yaml"), "--name", "probe", "-n", namespace))
    probe["spec"]["suspend"] = True  # listed, not run
    server.create_object(probe)
    listed = raybridge(config, "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert "probe" in listed.stdout
    assert listed.stderr == ""


def test_a_failing_exec_plugin_is_one_line_and_exit_3(server, namespace, tmp_path):
    config = kubeconfig(server, tmp_path, namespace, "exec-v1")
    plugin = Path(yaml.safe_load(config.read_text())["users"][0]["user"]["exec"]["command"])
    plugin.write_text("#!/bin/sh\necho 'token expired: run login' >&2\nexit 1\n")
    out = raybridge(config, "list")
    assert out.returncode == 3, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: kubeconfig {str(config)!r}: getting credentials: exec: process returned 1. token expired: run login"
    ]
