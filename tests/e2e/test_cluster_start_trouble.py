"""What a user is told when the cluster cannot run the job: no KubeRay, no Kueue, an operator that does not run,
an image that cannot be pulled, a crash loop. On the real programs (testcluster), stacks of this module's own.

Why this module exists: each of these used to look like a slow start. Without KubeRay a submit ended in exit 3
with the API server's "404 page not found"; with the operator stopped, `check` said ok and a submit waited out its
whole timeout saying "waiting for KubeRay to start the Ray cluster"; a head pod whose image cannot be pulled, or
that crashes over and over, looked the same as one being pulled; and `check` on a cluster without Kueue passed a
priority class nothing there knows, repeated its queue note and described evictions that cannot happen.

The pods' troubles are kwok Stages that give pods of a chosen image the status a kubelet writes (kwok runs no
container: kubesim/FIDELITY.md): `ImagePullBackOff` (kubernetes@v1.34.4 pkg/kubelet/images/types.go
ErrImagePullBackOff), `InvalidImageName`, and `CrashLoopBackOff` with its restarts (pkg/kubelet/container
sync_result.go). A stopped operator is its process stopped; an operator the cluster cannot run is its recorded
Deployment asking for a replica that no node takes (the stack records the operators' Deployments with no
replica, as the processes run outside: testcluster/stack.py kuberay_operator_record).

What it deliberately does not do: the queue arithmetic (test_kube_preflight.py) or a Kueue that manages every
job (test_kueue_manages_every_job.py).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Iterator

import pytest

from tests.builders import h100_node
from tests.helpers import cli_env, run_cli

pytestmark = pytest.mark.xdist_group("testcluster-cluster-start-trouble")  # the stacks below, one of each per run

#: Images whose pods get a kubelet's trouble from this module's kwok Stages.
NOT_PULLED = "registry.invalid/ray:no-such-tag"
INVALID = "registry.invalid/NoSuchRepo:1"
CRASHES = "registry.invalid/ray:crashes"


def _waiting_stage(name: str, image: str, reason: str, message: str, phase: str = "Pending", restarts: int = 0) -> dict:
    """A kwok Stage: a pod whose first container has `image` gets a container waiting for `reason`, as a kubelet
    writes it; its weight puts it before kwok's pod-ready (which then never makes the pod ready)."""
    last = '\n    lastState: {terminated: {exitCode: 1, reason: Error}}' if restarts else ""
    template = (
        f"phase: {phase}\n"
        "conditions:\n- {type: PodScheduled, status: \"True\"}\n- {type: Ready, status: \"False\", reason: ContainersNotReady}\n"
        "containerStatuses:\n{{ range .spec.containers }}\n"
        "- name: {{ .name | Quote }}\n  image: {{ .image | Quote }}\n  ready: false\n"
        f"  restartCount: {restarts}\n  state:\n    waiting:\n      reason: {reason}\n      message: {json.dumps(message)}{last}\n"
        "{{ end }}\n"
    )
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "weight": 1000,
            "selector": {"matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                {"key": ".spec.nodeName", "operator": "Exists"},
                {"key": ".spec.containers.[0].image", "operator": "In", "values": [image]},
            ]},
            "next": {"statusTemplate": template},
        },
    }  # fmt: skip


STAGES = [
    _waiting_stage("image-not-pulled", NOT_PULLED, "ImagePullBackOff", f'Back-off pulling image "{NOT_PULLED}"'),
    _waiting_stage("image-invalid", INVALID, "InvalidImageName", f'Failed to apply default image tag "{INVALID}": couldn\'t parse image name'),
    _waiting_stage("crash-loop", CRASHES, "CrashLoopBackOff", "back-off 40s restarting failed container=ray-head", "Running", restarts=3),
]


@pytest.fixture(scope="module")
def bare() -> Iterator[Any]:
    """A cluster with neither KubeRay nor Kueue."""
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    with own_cluster(StackOptions(operators=(), nodes=[h100_node("gpu-0")])) as started:
        yield started


@pytest.fixture(scope="module")
def kuberay_only() -> Iterator[Any]:
    """KubeRay v1.6.1 without Kueue, the pods' troubles staged, head pods standing for a Ray head of the stack's own:
    `ray start --head` as a Ray cluster's head runs, whose dashboard keeps a connection open for the next request
    (the session's shared head sits behind a front that closes each connection after one request:
    testcluster/head_front.py; the port-forward count below would count the front, not raybridge)."""
    from testcluster.pytest_plugin import own_cluster
    from testcluster.stack import StackOptions

    options = StackOptions(operators=("kuberay",), nodes=[h100_node(f"gpu-{i}") for i in range(2)], start_ray_head=True, stages=STAGES)
    with own_cluster(options) as started:
        yield started


def cli(stack: Any, *args: str, timeout: float = 180) -> Any:
    return run_cli(*args, env=cli_env(KUBECONFIG=str(stack.kubeconfig)), timeout=timeout)


def rows(out: Any) -> list[list[str]]:
    return [re.split(r"\s{3,}", line, maxsplit=2) for line in out.stdout.splitlines()[1:]]


def rayjobs(admin: Any) -> list[str]:
    """The RayJobs left in `default` (no Workload can exist here: no Kueue)."""
    return [o["metadata"]["name"] for o in admin.list_objects("ray.io/v1", "RayJob", "default")]


def client(stack: Any) -> Any:
    from testcluster.client import ClusterClient

    return ClusterClient(stack.kubeconfig)


# -- neither KubeRay nor Kueue --------------------------------------------------------------------------------------


def test_check_without_kuberay_or_kueue_says_each_thing_once_and_nothing_of_evictions(bare: Any) -> None:
    out = cli(bare, "check")
    assert out.returncode == 1, out.stderr
    found = rows(out)
    assert ["KubeRay API", "missing", "ray.io is not served: KubeRay is not installed"] in found, out.stdout
    assert ["Kueue API", "note", "kueue.x-k8s.io is not served: jobs are not queued"] in found, out.stdout
    assert [row[0] for row in found].count("queue") == 0, out.stdout  # "not queued" is the Kueue row's to say, once
    assert "evict" not in out.stdout and "orphan bound" not in out.stdout, out.stdout  # no RayJob to bound here
    named = cli(bare, "check", "--queue", "team-a", "--priority-class", "nope")
    assert named.returncode == 1, named.stderr
    missing = {row[0]: row[2] for row in rows(named) if row[1] == "missing"}
    assert missing["queue"].startswith("--queue team-a: Kueue is not installed"), named.stdout
    assert missing["priority class"].startswith("--priority-class nope: Kueue is not installed"), named.stdout


def test_submit_without_kuberay_is_refused_as_check_says_and_creates_nothing(bare: Any) -> None:
    out = cli(bare, "submit", "--name", "x", "--timeout", "60", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert "error: this cluster does not serve RayJob (ray.io/v1): KubeRay is not installed" in out.stderr, out.stderr
    assert "404" not in out.stderr and "nothing was created" in out.stderr
    admin = client(bare)
    try:
        assert admin.list_objects("v1", "Pod", "default") == []
    finally:
        admin.close()


# -- KubeRay without Kueue ------------------------------------------------------------------------------------------


def test_check_without_kueue_refuses_a_priority_class_and_bounds_only_the_crash(kuberay_only: Any) -> None:
    out = cli(kuberay_only, "check", "--priority-class", "nope")
    assert out.returncode == 1, out.stderr
    found = {row[0]: row[1:] for row in rows(out)}
    assert found["priority class"][0] == "missing", out.stdout
    assert found["orphan bound"] == ["ok", "raybridge gone: the RayJob fails within 30m"], out.stdout
    assert "queue" not in found, out.stdout


def test_a_job_without_kueue_is_never_said_to_be_admitted(kuberay_only: Any) -> None:
    out = cli(kuberay_only, "submit", "--name", "plain", "--", "python", "-c", "print('ran')")
    assert out.returncode == 0, out.stderr
    assert "ran" in out.stdout
    assert "admitted" not in out.stderr, out.stderr
    assert "Ray cluster initializing" in out.stderr or "is ready" in out.stderr, out.stderr
    assert "kept RayJob" not in out.stderr and "deleted RayJob default/plain" in out.stderr, out.stderr


def test_an_image_that_cannot_be_pulled_is_said_while_waiting_and_when_giving_up(kuberay_only: Any) -> None:
    out = cli(kuberay_only, "submit", "--name", "nopull", "--image", NOT_PULLED, "--timeout", "20", "--", "python", "-c", "1")
    assert out.returncode == 3, out.stderr
    said = re.search(r"Ray cluster initializing[^\n]*; pod nopull-\S+-head-\S+: ImagePullBackOff \(Back-off pulling image", out.stderr)
    assert said, out.stderr
    assert re.search(r"error: RayJob default/nopull was not ready within 20s: .*ImagePullBackOff", out.stderr), out.stderr
    admin = client(kuberay_only)
    try:
        assert rayjobs(admin) == []
    finally:
        admin.close()


def test_a_crash_loop_is_said_with_its_restarts(kuberay_only: Any) -> None:
    out = cli(kuberay_only, "submit", "--name", "crashes", "--image", CRASHES, "--timeout", "15", "--", "python", "-c", "1")
    assert out.returncode == 3, out.stderr
    assert re.search(r"pod crashes-\S+-head-\S+: CrashLoopBackOff \(back-off 40s restarting failed container=ray-head; 3 restarts\)", out.stderr), out.stderr


def test_an_invalid_image_name_ends_the_wait_at_once_with_exit_2(kuberay_only: Any) -> None:
    started = time.monotonic()
    out = cli(kuberay_only, "submit", "--name", "badname", "--image", INVALID, "--timeout", "300", "--", "python", "-c", "1")
    assert out.returncode == 2, out.stderr
    assert re.search(r"error: RayJob default/badname cannot start: pod badname-\S+: InvalidImageName .*fix the image", out.stderr), out.stderr
    assert time.monotonic() - started < 90
    admin = client(kuberay_only)
    try:
        assert rayjobs(admin) == []
    finally:
        admin.close()


def test_the_operators_release_is_read_from_kuberays_own_kustomize_labels(kuberay_only: Any) -> None:
    """Issue 40, point 3: KubeRay's kustomize install labels the operator app.kubernetes.io/name: kuberay, component
    kuberay-operator, with no version label (kuberay@v1.6.1 ray-operator/config/manager/manager.yaml): the release
    comes from the image's tag. The stack's record is relabelled so, as that install would label it."""
    admin = client(kuberay_only)
    try:
        deployment = admin.get_object("apps/v1", "Deployment", "kuberay-operator", "kuberay-system")
        deployment["metadata"]["labels"] = {"app.kubernetes.io/name": "kuberay", "app.kubernetes.io/component": "kuberay-operator"}
        admin.replace_object(deployment)
        out = cli(kuberay_only, "check")
        row = next(r for r in rows(out) if r[0] == "KubeRay operator")
        assert row[1:] == ["ok", "v1.6.1 (Deployment kuberay-system/kuberay-operator)"], out.stdout
    finally:
        admin.close()


def _port_forwards(stack: Any) -> int:
    """How many port-forward requests the API server has served (its own counter, apiserver_request_total)."""
    import subprocess as sp

    out = sp.run(["kubectl", "--kubeconfig", str(stack.kubeconfig), "get", "--raw", "/metrics"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    total = 0
    for line in out.stdout.splitlines():
        if line.startswith("apiserver_request_total{") and 'subresource="portforward"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def _ticking_job(stack: Any, name: str, seconds: int) -> int:
    """Submit a job that prints a tick a second for `seconds`, check every tick arrived; the port-forwards it cost."""
    before = _port_forwards(stack)
    script = f"import time\nfor i in range({seconds}):\n    print('tick', i, flush=True)\n    time.sleep(1)\n"
    out = cli(stack, "submit", "--name", name, "--timeout", "120", "--", "python", "-c", script, timeout=240)
    assert out.returncode == 0, out.stderr
    assert "port-forwarding 127.0.0.1:" in out.stderr
    assert [line for line in out.stdout.splitlines() if line.startswith("tick")] == [f"tick {i}" for i in range(seconds)]
    return _port_forwards(stack) - before


@pytest.mark.realtime
def test_a_job_costs_a_handful_of_port_forwards_whatever_its_length(kuberay_only: Any) -> None:
    """Issue 40, point 6: each Ray dashboard call opened a port-forward of its own through the API server (about 100
    for a minute-long job, growing with its length). Counted by the API server itself, on this module's own stack
    (its tests run one by one): a 3-second job and a 20-second one (about 33 for it, as it was) cost the same
    handful."""
    short = _ticking_job(kuberay_only, "seconds", 3)
    longer = _ticking_job(kuberay_only, "longer", 20)
    print(f"port-forwards: {short} for a 3-second job, {longer} for a 20-second one")
    assert short <= 5 and longer <= 5, f"{short} port-forwards for a 3-second job, {longer} for a 20-second one"
    assert longer <= short + 1, f"{short} port-forwards for a 3-second job, {longer} for a 20-second one: the count grows with the job"


def test_an_operator_that_does_not_run_is_said_by_check_and_by_submit(kuberay_only: Any) -> None:
    """Last in the module: it stops the stack's operator."""
    admin = client(kuberay_only)
    try:
        # The cluster cannot run the operator's pod: its Deployment asks for a replica no node takes.
        deployment = admin.get_object("apps/v1", "Deployment", "kuberay-operator", "kuberay-system")
        deployment["spec"]["replicas"] = 1
        deployment["spec"]["template"]["spec"]["nodeSelector"] = {"example.com/no-such-pool": "x"}
        admin.replace_object(deployment)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pods = admin.list_objects("v1", "Pod", "kuberay-system")
            if any((c.get("reason") == "Unschedulable") for p in pods for c in (p.get("status") or {}).get("conditions") or []):
                break
            time.sleep(0.5)
        out = cli(kuberay_only, "check")
        assert out.returncode == 1, out.stdout
        row = next(r for r in rows(out) if r[0] == "KubeRay operator")
        assert row[1] == "missing", out.stdout
        assert row[2].startswith("v1.6.1, not running: Deployment kuberay-system/kuberay-operator: 0 of 1 replica available (pod kuberay-operator-"), row
        assert "Unschedulable" in row[2] and row[2].endswith("nothing starts a RayJob's Ray cluster"), row
        # And the operator the stack runs stops.
        next(p for p in kuberay_only.processes if p.name == "kuberay").stop()
        started = time.monotonic()
        waited = cli(kuberay_only, "submit", "--name", "unseen", "--timeout", "30", "--", "python", "-c", "1")
        assert waited.returncode == 3, waited.stderr
        assert "waiting for KubeRay to take it up; KubeRay has not acted on it in 20s: is the KubeRay operator running? (`raybridge check`)" in waited.stderr
        assert time.monotonic() - started < 90
        assert rayjobs(admin) == []
    finally:
        admin.close()
