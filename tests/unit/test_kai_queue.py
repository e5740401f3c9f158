"""KAI Queue objects, --capacity, demand files, and the capacity and requests KAI reads from Nodes and Pods."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from raybridge.core.views import read_pod
from raybridge.kai.fairshare import Amounts, ResourceTerms
from raybridge.kai.queue import (
    kai_allocated,
    kai_capacity,
    kai_requests,
    read_kai_queue,
    parse_capacity,
    parse_demand,
    pod_amounts,
    queue_objects,
    queue_specs,
)
from raybridge.errors import BadInput


def queue(name="a", **spec):
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


OK = {"resources": {"gpu": {"quota": 2, "limit": -1, "overQuotaWeight": 1}}}


def test_a_queue_is_read_with_kai_defaults():
    [spec] = queue_specs([queue("a", parentQueue="p", resources={"gpu": {"quota": 2.5}})])
    assert spec.name == "a" and spec.parent == "p"
    assert spec.priority == 100  # unset priority is 100 (constants.DefaultQueuePriority)
    assert spec.gpu == ResourceTerms(quota=2.5, limit=0, over_quota_weight=0)  # the CRD has no defaults
    assert spec.cpu == ResourceTerms() and spec.memory == ResourceTerms()


def test_lists_and_documents_flatten_and_timestamps_parse():
    docs = [
        {"apiVersion": "v1", "kind": "List", "items": [queue("a", **OK)]},
        None,
        {**queue("b", **OK), "metadata": {"name": "b", "creationTimestamp": "2025-01-02T03:04:05Z"}},
    ]
    specs = queue_specs(queue_objects(docs))
    assert [s.name for s in specs] == ["a", "b"]
    assert specs[1].created == datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


# (case, objects, expected problem fragments)
BAD = [
    ("no queues", [], ["no Queue objects found"]),
    ("not a queue", [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}], ["1 item (1) is a Node, not scheduling.run.ai/v2 Queues"]),
    ("not an object", ["text"], ["not an object"]),
    ("no name", [{"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "spec": OK}], ["metadata.name is required"]),
    ("bad name", [queue("Team A", **OK)], ["must be a DNS-1123 subdomain"]),
    ("old api version", [{**queue("a", **OK), "apiVersion": "scheduling.run.ai/v1"}], ["apiVersion must be scheduling.run.ai/v2"]),
    ("no resources", [queue("a")], ["spec.resources is required (KAI's admission webhook"]),
    ("unknown spec field", [queue("a", parent="x", **OK)], ["spec.parent: unknown field"]),
    ("unknown resource", [queue("a", resources={"gpus": {"quota": 1}})], ["spec.resources.gpus: unknown field"]),
    ("unknown term", [queue("a", resources={"gpu": {"qouta": 1}})], ["spec.resources.gpu.qouta: unknown field"]),
    ("string quota", [queue("a", resources={"gpu": {"quota": "4"}})], ["spec.resources.gpu.quota must be a number (got '4')"]),
    ("boolean weight", [queue("a", resources={"gpu": {"overQuotaWeight": True}})], ["overQuotaWeight must be a number"]),
    ("infinite limit", [queue("a", resources={"gpu": {"limit": float("inf")}})], ["limit must be finite"]),
    ("fractional priority", [queue("a", priority=1.5, **OK)], ["spec.priority must be an integer"]),
    ("parent not a string", [queue("a", parentQueue=3, **OK)], ["spec.parentQueue must be a string"]),
    ("bad timestamp", [{**queue("a", **OK), "metadata": {"name": "a", "creationTimestamp": "yesterday"}}], ["is not an RFC 3339 time"]),
    ("several at once", [queue("a"), queue("b", priority="high", **OK)], ["queue a: spec.resources is required", "queue b: spec.priority"]),
]


@pytest.mark.parametrize("case,objects,fragments", BAD, ids=[r[0] for r in BAD])
def test_bad_queues_are_named(case, objects, fragments):
    with pytest.raises(BadInput) as err:
        queue_specs(objects)
    text = "\n".join(err.value.problems)
    for fragment in fragments:
        assert fragment in text


def test_cluster_objects_are_read_as_kai_reads_them():
    """Objects the API server already holds: unknown fields ignored, no resources meaning zeros."""
    [spec] = queue_specs([queue("a", futureField=1)], strict=False)
    assert spec.gpu == ResourceTerms()


# --- --capacity and demand files ------------------------------------------------------------
CAPACITY = [
    ("the issue's example", "gpu=40,cpu=64000m,memory=512000M", Amounts(gpu=40, cpu=64000, memory=512e9)),
    ("cores and binary memory", "cpu=8, memory=16Gi", Amounts(cpu=8000, memory=16 * 2**30)),
    ("fractional GPUs", "gpu=2.5", Amounts(gpu=2.5)),
]


@pytest.mark.parametrize("case,text,expected", CAPACITY, ids=[r[0] for r in CAPACITY])
def test_capacity(case, text, expected):
    assert parse_capacity(text) == expected


BAD_CAPACITY = [
    ("empty", "", "give at least one of"),
    ("no equals", "gpu40", "'gpu40' is not RESOURCE=QUANTITY"),
    ("unknown resource", "gpus=4", "unknown resource 'gpus'"),
    ("twice", "gpu=4,gpu=5", "gpu is given twice"),
    ("bad quantity", "memory=lots", "memory=lots: not a Kubernetes quantity"),
    ("negative", "cpu=-4", "must not be negative"),
]


@pytest.mark.parametrize("case,text,fragment", BAD_CAPACITY, ids=[r[0] for r in BAD_CAPACITY])
def test_bad_capacity(case, text, fragment):
    with pytest.raises(BadInput) as err:
        parse_capacity(text)
    assert fragment in "\n".join(err.value.problems)


def test_demand_takes_numbers_and_quantities():
    demand = parse_demand({"p1": {"gpu": 100, "cpu": "8", "memory": "64Gi"}, "p2": {"gpu": "0.5"}})
    assert demand == {"p1": Amounts(gpu=100, cpu=8000, memory=64 * 2**30), "p2": Amounts(gpu=0.5)}


@pytest.mark.parametrize(
    "document,fragment",
    [
        ([1, 2], "expected an object mapping queue names"),
        ({"p1": 3}, "p1: expected an object"),
        ({"p1": {"gpus": 1}}, "p1.gpus: unknown resource"),
        ({"p1": {"gpu": True}}, "p1.gpu: not a Kubernetes quantity"),
        ({"p1": {"cpu": "8 cores"}}, "p1.cpu: not a Kubernetes quantity"),
    ],
)
def test_bad_demand(document, fragment):
    with pytest.raises(BadInput) as err:
        parse_demand(document)
    assert fragment in "\n".join(err.value.problems)


# --- capacity from Nodes: proportion_test.go "Get Node Resources" ------------------------------
def node(name="n1", cpu="8000m", memory="10G", ready=True, **extra):
    allocatable = {"cpu": cpu, "memory": memory, **extra}
    return {
        "metadata": {"name": name},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(cpu="1", memory="1G", scheduler="default-scheduler", phase="Running", node_name="n1", labels=None, **meta):
    return {
        "metadata": {"name": "p", "namespace": "default", "labels": labels or {}, **meta},
        "spec": {
            "schedulerName": scheduler,
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
        "status": {"phase": phase},
    }


# (proportion_test.go case, nodes, pods, expected Amounts)
NODE_RESOURCES = [
    ("cpu + memory node", [node()], [], Amounts(cpu=8000, memory=10e9)),
    ("gpu node", [node(**{"nvidia.com/gpu": "2"})], [], Amounts(cpu=8000, memory=10e9, gpu=2)),
    ("ignore extra resources", [node(cpu="0", memory="0", A="4")], [], Amounts()),
    ("Count out resources for non-related pods",
     [node()], [pod("2", "2G", scheduler="kai-scheduler"), pod("1", "1G")], Amounts(cpu=7000, memory=9e9)),
    ("Count out resources for non-related pods - consider reservation pods",
     [node()], [pod("2", "2G", scheduler="kai-scheduler"), pod("1", "1G"), pod("1", "1G", labels={"app": "kai-resource-reservation"})],
     Amounts(cpu=7000, memory=9e9)),
    ("Count out resources for non-related pods - consider scaler pods",
     [node()], [pod("2", "2G", scheduler="kai-scheduler"), pod("1", "1G"), pod("1", "1G", labels={"app": "scaling-pod"})],
     Amounts(cpu=7000, memory=9e9)),
    ("Do not count out resources for non-related pods if non active",
     [node()], [pod(phase="Pending", node_name=None), pod(phase="Succeeded"), pod(phase="Failed")], Amounts(cpu=8000, memory=10e9)),
    # not from KAI's tests: nodes that are not Ready count nothing (getNodeResources: ValidateIsNodeReady)
    ("a node that is not Ready", [node(), node("n2", ready=False)], [], Amounts(cpu=8000, memory=10e9)),
    ("AMD GPUs count as GPUs too (resource_info.go: amd.com/gpu)", [node(**{"amd.com/gpu": "8"})], [], Amounts(cpu=8000, memory=10e9, gpu=8)),
]  # fmt: skip


@pytest.mark.parametrize("case,nodes,pods,expected", NODE_RESOURCES, ids=[f"proportion_test.go: {r[0]}" for r in NODE_RESOURCES])
def test_capacity_from_nodes(case, nodes, pods, expected):
    assert kai_capacity(nodes, pods) == expected


# --- requests from KAI pods ---------------------------------------------------------------------
def kai_pod(queue="p1", phase="Pending", node_name=None, annotations=None, gates=None, gpus=None, **meta):
    p = pod("2", "4Gi", scheduler="kai-scheduler", phase=phase, node_name=node_name, labels={"kai.scheduler/queue": queue} if queue else {})
    p["metadata"]["annotations"] = annotations or {}
    p["metadata"].update(meta)
    if gates:
        p["spec"]["schedulingGates"] = gates
    if gpus:
        p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = gpus
    return p


def test_requests_of_running_bound_and_pending_pods_count():
    pods = [kai_pod(phase="Running", node_name="n1"), kai_pod(phase="Pending", node_name="n1"), kai_pod(gpus="2")]
    requests, notes = kai_requests(pods)
    assert requests == {"p1": Amounts(cpu=6000, memory=3 * 4 * 2**30, gpu=2)} and notes == []


@pytest.mark.parametrize(
    "pods,why",
    [
        ([kai_pod(phase="Succeeded")], "finished"),
        ([kai_pod(gates=[{"name": "g"}])], "gated (KAI: Gated, not Pending)"),
        ([kai_pod(deletionTimestamp="2025-01-01T00:00:00Z", phase="Running", node_name="n1")], "releasing"),
        ([{**kai_pod(), "spec": {**kai_pod()["spec"], "schedulerName": "default-scheduler"}}], "another scheduler"),
    ],
)
def test_pods_kai_does_not_count(pods, why):
    requests, _ = kai_requests(pods)
    assert requests == {}, why


def test_pods_without_a_queue_label_are_named_in_a_note():
    requests, notes = kai_requests([kai_pod(queue=None)])
    assert requests == {} and notes == ["1 kai-scheduler pods have no kai.scheduler/queue label: not counted"]


@pytest.mark.parametrize("label", [["p1"], {"p1": 1}, 7], ids=["a list", "a mapping", "a number"])
def test_a_queue_label_that_is_not_text_reads_as_none(label):
    """The API server takes text alone; a file may hold anything. Such a pod once made a queue of its label
    (TypeError: unhashable, an internal error of `explain`)."""
    requests, notes = kai_requests([kai_pod(queue=label), kai_pod(queue="b")])
    assert set(requests) == {"b"} and notes == ["1 kai-scheduler pods have no kai.scheduler/queue label: not counted"]
    assert kai_allocated([kai_pod(queue=label, phase="Running", node_name="n1")]) == {}


@pytest.mark.parametrize("written", ["nan", "inf", "-Infinity", "1e400", "5", True, None, float("nan")])
def test_a_queue_term_that_is_no_finite_number_reads_as_0(written):
    """As `queue_specs` and the Queue's schema read them: text is no number (float() took "nan" and "1e400",
    and `explain -o json` printed NaN and Infinity, which no JSON reader takes)."""
    read = read_kai_queue(queue(resources={"gpu": {"quota": written, "limit": written, "overQuotaWeight": written}}))
    assert [read.term("gpu", key) for key in ("quota", "limit", "overQuotaWeight")] == [0.0, 0.0, 0.0]
    assert read_kai_queue(queue(resources={"gpu": {"quota": 2.5, "limit": -1}})).term("gpu", "quota") == 2.5


@pytest.mark.parametrize(
    "annotations,min_memory,gpus",
    [
        ({"gpu-fraction": "0.5"}, None, 0.5),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}, None, 1.0),
        ({"gpu-memory": "20000"}, 80000, 0.25),  # numDevices * gpuMemory / MinNodeGPUMemory (proportion.go)
        ({"gpu-memory": "20000"}, None, 0.0),  # no node says its GPU memory: cannot be counted
        # read as KAI's scheduler reads them (pod_info.go updatePodAdditionalFields), as the adjuster's reader does
        ({"gpu-memory": "20000.5"}, 80000, 0.0),  # ParseInt: not a whole number, not counted
        ({"gpu-memory": "2e4"}, 80000, 0.0),
        ({"gpu-fraction": "1"}, None, 1.0),  # 0 < f <= 1
        ({"gpu-fraction": "1.5", "gpu-memory": "40000"}, 80000, 0.5),  # a fraction above 1 does not count: memory decides
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2.0"}, None, 0.5),  # ParseInt fails: one device
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, None, 0.0),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": ""}, None, 0.5),
    ],
)
def test_shared_gpu_requests(annotations, min_memory, gpus):
    assert pod_amounts(read_pod(kai_pod(annotations=annotations)), min_memory).gpu == gpus


def test_what_the_parser_accepts_the_crd_accepts():
    """The example Queue file passes both this parser and the CRD schema."""
    from pathlib import Path

    import yaml

    from testcluster.crd_schemas import schema_errors

    path = Path(__file__).resolve().parents[2] / "examples" / "queues" / "node-pool-a.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert [s.name for s in queue_specs(docs)] == ["department-a", "project-1", "project-2", "project-3"]
    assert all(schema_errors(d) == [] for d in docs)


def test_capacity_left_out():
    from raybridge.kai.queue import capacity_left_out

    assert capacity_left_out("gpu=4") == ["cpu", "memory"]
    assert capacity_left_out("gpu=4,cpu=1,memory=1G") == []


def _containers(*cpus, restart_policy=None):
    return [{"name": f"c{i}", "resources": {"requests": {"cpu": cpu}}, **({"restartPolicy": restart_policy} if restart_policy else {})}
            for i, cpu in enumerate(cpus)]


# (case, pod spec, cpu KAI counts in millicores, cpu kube-scheduler's PodRequests counts in cores)
KAI_COUNTING = [
    ("containers are summed", {"containers": _containers("1", "2")}, 3000, 3),
    ("an init container larger than the sum: the largest", {"containers": _containers("1"), "initContainers": _containers("4")}, 4000, 4),
    ("a sidecar is no more than an init container to KAI; kube adds it to the sum",
     {"containers": _containers("2"), "initContainers": _containers("1", restart_policy="Always")}, 2000, 3),
    ("a limit without a request requests the limit", {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}, 2000, 2),
    ("overhead is added", {"containers": _containers("1"), "overhead": {"cpu": "250m"}}, 1250, 1.25),
    ("pod-level requests are not read by KAI; kube's replace the containers'",
     {"containers": _containers("1"), "resources": {"requests": {"cpu": "3"}}}, 1000, 3),
]


@pytest.mark.parametrize("case,spec,kai_milli,kube_cores", KAI_COUNTING, ids=[r[0] for r in KAI_COUNTING])
def test_kai_counts_a_pod_s_cpu_by_its_own_rule(case, spec, kai_milli, kube_cores):
    from decimal import Decimal

    from raybridge.core.kubeobjects import pod_requests

    assert pod_amounts(read_pod({"spec": spec})).cpu == kai_milli
    assert pod_requests(spec)["cpu"] == Decimal(str(kube_cores))
