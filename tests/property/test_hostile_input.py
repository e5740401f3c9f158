"""Property-based: every offline command, every file option, hostile input; exit 0 or 2, bounded, valid output.

Hypothesis draws hostile files (deep nesting, long integers, alias bombs, binary and odd
encodings, special files) and hostile values in node lists, specs and queue files, and runs the
command in this process as `python -m raybridge` would. Each example must end with exit 0 or 2
(never "internal error"), within `DEADLINE` and `MEMORY_BYTES` more address space (a MemoryError
beyond it would be an internal error), and when it
succeeds its JSON must be JSON (no NaN or Infinity) and its YAML must parse into the kinds the
command makes (no injected document). `adjuster plan` must also count each pod once: listed
again or reordered, the same plan, each pod in one placeholder or among those not planned for.

The default run draws `EXAMPLES` examples per test (about a minute in all); set
RAYBRIDGE_PROPERTY_EXAMPLES=2000 (say) for a longer search.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import resource
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raybridge.cli.main import main
from tests.helpers import EXAMPLES as EXAMPLES_DIR

EXAMPLES = int(os.environ.get("RAYBRIDGE_PROPERTY_EXAMPLES", "25"))
DEADLINE = timedelta(seconds=10)
MEMORY_BYTES = 512 * 1024**2
NODES = json.loads((EXAMPLES_DIR / "cluster" / "nodes.json").read_text())
QUEUE_EXAMPLE = (EXAMPLES_DIR / "queues" / "node-pool-a.yaml").read_text()
#: What `queues generate` makes; anything else in its output was injected.
GENERATED_KINDS = {"Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "AdmissionCheck",
                   "ProvisioningRequestConfig", "Queue"}  # fmt: skip
RENDERED_KINDS = {"RayJob", "RayCluster", "Job", "Service", "Deployment", "ConfigMap"}

run_settings = settings(
    max_examples=EXAMPLES,
    deadline=DEADLINE,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    derandomize=os.environ.get("RAYBRIDGE_PROPERTY_EXAMPLES") is None,  # the default run is the same every time
)


def _address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def memory_bound(extra: int = MEMORY_BYTES) -> Iterator[None]:
    """While inside, this process may grow its address space by at most `extra` bytes (MemoryError beyond)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + extra
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run(argv: list[str]) -> tuple[int, str, str]:
    """The CLI in this process: (exit status, stdout, stderr), its memory bounded."""
    out, err = io.StringIO(), io.StringIO()
    with memory_bound(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's own exit 2
            status = int(exc.code or 0)
    return status, out.getvalue(), err.getvalue()


def check(argv: list[str], output: Optional[str] = None, kinds: Optional[set[str]] = None) -> tuple[int, str, str]:
    status, out, err = run(argv)
    assert "internal error" not in err and "Traceback" not in err, (argv, err[-800:])
    assert status in (0, 2), (argv, status, err[-800:])
    if status == 0 and output == "json":
        json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    if status == 0 and output == "yaml":
        documents = [d for d in yaml.safe_load_all(out) if d is not None]
        if kinds is not None:
            assert {d.get("kind") for d in documents if isinstance(d, dict)} <= kinds, out[:2000]
    return status, out, err


# --- hostile files ----------------------------------------------------------------------------

depths = st.integers(min_value=1, max_value=5000)
HOSTILE_QUANTITIES = ["1e400", "1e99999999", "-5", "-5Gi", "1e-400", "٣", "３", "1\n", " 1", "NaN", "Infinity", "0x10",
                      "1_000", "9" * 5000, "", "1e18", "1000000007", "0.5", "2^63", "1.5Ki", "1e-31", "1e-30",
                      "9223372036854775807"]  # fmt: skip

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40), st.sampled_from(HOSTILE_QUANTITIES),
    st.text(alphabet="\n\r\x1b\x00\u2028\x85-#:{}[]&*!|>'\"%@` ", max_size=20),
)  # fmt: skip
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=12)


def _alias_bomb(levels: int, width: int) -> str:
    lines = ['l0: &l0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


hostile_texts = st.one_of(
    depths.map(lambda d: "[" * d + "]" * d),
    depths.map(lambda d: "{\"a\": " * d + "1" + "}" * d),
    depths.map(lambda d: "a:\n" + "".join("  " * i + "- \n" for i in range(1, d))),
    st.integers(min_value=1, max_value=6000).map(lambda n: '{"kind": "List", "items": [], "x": ' + "9" * n + "}"),
    st.integers(min_value=1, max_value=6000).map(lambda n: "kind: List\nitems: []\nx: " + "9" * n + "\n"),
    st.tuples(st.integers(1, 10), st.integers(2, 10)).map(lambda t: _alias_bomb(*t)),
    st.text(max_size=200),
    values.map(lambda v: json.dumps(v)),
    values.map(lambda v: yaml.safe_dump(v)),
    # PyYAML's explicit tags on texts they do not fit: its constructors raise AttributeError, KeyError, ValueError
    st.tuples(st.sampled_from(["timestamp", "bool", "int", "float", "binary", "null", "set", "omap", "pairs", "str"]),
              st.sampled_from(["x", "", "1", "2025-13-45", "@@", "[1]", "{a: 1}"]),
              st.sampled_from(["name", "gpus", "kind", "items", "entrypoint"])).map(lambda t: f"{t[2]}: !!{t[0]} {t[1]}\n"),
)  # fmt: skip
hostile_bytes = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=50).map(lambda t: t.encode("utf-16")),
    st.just(b"\xff\xfe\x00k\x00i\x00n\x00d"),
    st.just(b"kind: List\x00\nitems: []\n"),
)
SPECIAL_PATHS = ["/dev/zero", "/dev/null", "/", "/nonexistent/file", "fifo", "dir", "loop", "dangling"]


def _write(directory: Path, content: Any) -> str:
    """A file (or special path) holding `content`, in `directory`."""
    if isinstance(content, str) and content in SPECIAL_PATHS:
        path = directory / content
        if content == "fifo":
            os.mkfifo(path)
        elif content == "dir":
            path.mkdir()
        elif content == "loop":
            path.symlink_to(path)
        elif content == "dangling":
            path.symlink_to(directory / "nowhere")
        else:
            return content
        return str(path)
    path = directory / "input"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, errors="surrogatepass")
    return str(path)


hostile_files = st.one_of(hostile_texts, hostile_bytes, st.sampled_from(SPECIAL_PATHS))


def _with_dir(body: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory() as name:
        body(Path(name))


# --- hostile content -------------------------------------------------------------------------

NODE_FIELDS = [
    ("metadata", "name"), ("metadata", "labels"), ("status", "allocatable"), ("status", "capacity"), ("status", "conditions"),
    ("spec", "taints"), ("spec", "unschedulable"), ("metadata",), ("status",), ("spec",), ("kind",),
]  # fmt: skip
LABEL_KEYS = ["nvidia.com/gpu.memory", "nvidia.com/gpu.product", "amd.com/gpu.vram", "amd.com/gpu.product-name", "kubernetes.io/hostname"]
RESOURCE_KEYS = ["nvidia.com/gpu", "amd.com/gpu", "cpu", "memory", "pods"]


@st.composite
def node_lists(draw: Any) -> Any:
    document = json.loads(json.dumps(NODES))
    for _ in range(draw(st.integers(1, 4))):
        node = draw(st.sampled_from(document["items"]))
        where = draw(st.sampled_from(NODE_FIELDS + [("labels",), ("allocatable",)] * 3))
        if where in (("labels",), ("allocatable",)):
            outer, inner, keys = ("metadata", "labels", LABEL_KEYS) if where == ("labels",) else ("status", "allocatable", RESOURCE_KEYS)
            holder = node.setdefault(outer, {})
            mapping = holder.setdefault(inner, {}) if isinstance(holder, dict) else None
            if isinstance(mapping, dict):
                mapping[draw(st.sampled_from(keys))] = draw(scalars)
        else:
            target: Any = node
            for key in where[:-1]:
                target = target.setdefault(key, {}) if isinstance(target, dict) else None
            if isinstance(target, dict):
                target[where[-1]] = draw(values)
    if draw(st.booleans()):
        document["items"] = document["items"] * draw(st.integers(1, 3))  # the same node listed again
    if draw(st.integers(0, 9)) == 0:
        document["kind"] = draw(values)
    return document


SPEC_FIELDS = ["name", "namespace", "entrypoint", "workingDir", "runtimeEnv", "image", "gpus", "replicas", "gpusPerReplica",
               "gpuVendor", "queue", "priorityClass", "cpusPerGpu", "memoryPerGpu", "head", "worker", "authMode", "authSecret",
               "maxRunSeconds", "nodeSelector", "tolerations", "env", "kind", "ray"]  # fmt: skip


@st.composite
def specs(draw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"entrypoint": "python main.py", "gpus": draw(st.integers(0, 16))}
    for field in draw(st.lists(st.sampled_from(SPEC_FIELDS), max_size=4)):
        spec[field] = draw(values)
    return spec


@st.composite
def queue_files(draw: Any) -> str:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e-1", "A", "a\n", ""]), min_size=1, max_size=6))
    numbers = st.one_of(st.sampled_from([-1, 0, 1, 1e308, -1e308, 2.0**53, 2.0**60, -5]), st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**20), 10**20))
    docs = []
    for name in names:
        resources = {r: {"quota": draw(numbers), "limit": draw(numbers), "overQuotaWeight": draw(numbers)} for r in draw(st.lists(st.sampled_from(["gpu", "cpu", "memory"]), max_size=3, unique=True))}
        spec: dict[str, Any] = {"resources": resources}
        parent = draw(st.one_of(st.none(), st.sampled_from(names)))
        if parent is not None:
            spec["parentQueue"] = parent
        docs.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec})
    return yaml.safe_dump_all(docs)


capacities = st.one_of(
    st.sampled_from(["gpu=40", "gpu=1e400", "gpu=-1", "gpu=NaN", "gpu=٣", "gpu=40,gpu=2", "cpu=1e99999999", "memory=1e18", "gpu=" + "9" * 500,
                     "gpu=9223372036854775807", "gpu=9007199254740993", "memory=1e16"]),
    st.text(max_size=30),
)


# --- the properties --------------------------------------------------------------------------


@run_settings
@given(content=hostile_files, command=st.sampled_from(["discover", "plan", "render", "queues-generate", "queues-generate-kai"]))
def test_every_nodes_file_option_takes_hostile_files(content: Any, command: str) -> None:
    def body(directory: Path) -> None:
        path = _write(directory, content)
        argv = {
            "discover": ["discover", "--nodes", path, "-o", "json"],
            "plan": ["plan", "--nodes", path, "-o", "json", "--", "python", "x.py"],
            "render": ["render", "--nodes", path, "-o", "json", "--", "python", "x.py"],
            "queues-generate": ["queues", "generate", "--nodes", path, "-o", "json"],
            "queues-generate-kai": ["queues", "generate", "--kai", "--nodes", path, "-o", "json"],
        }[command]
        check(argv, "json")

    _with_dir(body)


@run_settings
@given(content=hostile_files, option=st.sampled_from(["spec", "queues", "demand", "pods"]))
def test_every_other_file_option_takes_hostile_files(content: Any, option: str) -> None:
    def body(directory: Path) -> None:
        path = _write(directory, content)
        nodes = str(EXAMPLES_DIR / "cluster" / "nodes.json")
        argv = {
            "spec": ["plan", path, "--nodes", nodes, "-o", "json"],
            "queues": ["queues", "fairshare", "--queues", path, "--capacity", "gpu=40", "-o", "json"],
            "demand": ["queues", "fairshare", "--queues", str(EXAMPLES_DIR / "queues" / "node-pool-a.yaml"), "--capacity", "gpu=40", "--demand", path, "-o", "json"],
            "pods": ["adjuster", "plan", "--pods", path, "--nodes", nodes, "-o", "json"],
        }[option]
        check(argv, "json")

    _with_dir(body)


@run_settings
@given(document=node_lists(), command=st.sampled_from(["discover", "plan", "render", "queues-generate", "queues-generate-kai"]))
def test_hostile_node_lists(document: Any, command: str) -> None:
    def body(directory: Path) -> None:
        path = directory / "nodes.json"
        path.write_text(json.dumps(document))
        argv, output, kinds = {
            "discover": (["discover", "--nodes", str(path), "-o", "json"], "json", None),
            "plan": (["plan", "--nodes", str(path), "-o", "json", "--gpus", "3", "--", "python", "x.py"], "json", None),
            "render": (["render", "--nodes", str(path), "--gpus", "2", "--", "python", "x.py"], "yaml", RENDERED_KINDS),
            "queues-generate": (["queues", "generate", "--nodes", str(path)], "yaml", GENERATED_KINDS),
            "queues-generate-kai": (["queues", "generate", "--kai", "--nodes", str(path)], "yaml", GENERATED_KINDS),
        }[command]
        status, out, _ = check(argv, output, kinds)
        if status == 0 and output == "yaml":
            header = [line for line in out.split("\n") if line.startswith("#")]
            assert all("\r" not in line and "\x1b" not in line for line in header)

    _with_dir(body)


@run_settings
@given(spec=specs(), command=st.sampled_from(["plan", "render"]))
def test_hostile_specs(spec: dict[str, Any], command: str) -> None:
    def body(directory: Path) -> None:
        path = directory / "spec.json"
        path.write_text(json.dumps(spec))
        nodes = str(EXAMPLES_DIR / "cluster" / "nodes.json")
        check([command, str(path), "--nodes", nodes, "-o", "json"], "json")

    _with_dir(body)


@run_settings
@given(queues=queue_files(), capacity=capacities)
def test_hostile_queue_files_and_capacities(queues: str, capacity: str) -> None:
    def body(directory: Path) -> None:
        path = directory / "queues.yaml"
        path.write_text(queues)
        check(["queues", "fairshare", "--queues", str(path), "--capacity", capacity, "-o", "json"], "json")

    _with_dir(body)


@run_settings
@given(
    flag=st.sampled_from(["--replicas", "--gpus", "--gpus-per-replica", "--name", "--queue", "--priority-class", "--namespace"]),
    value=st.one_of(st.integers(min_value=-(10**400), max_value=10**400).map(str), st.text(max_size=30), st.sampled_from(["1" + "0" * 400, "1e400", "nan", "inf", "-0", "0x10", "team-a\n"])),
    command=st.sampled_from(["plan", "render"]),
)
def test_hostile_flags(flag: str, value: str, command: str) -> None:
    nodes = str(EXAMPLES_DIR / "cluster" / "nodes.json")
    check([command, "--nodes", nodes, f"{flag}={value}", "-o", "json", "--", "python", "x.py"], "json")


# --- adjuster plan: each pod counted once ------------------------------------------------------

ADJUSTER_NOW = "2025-06-01T12:00:00Z"


@st.composite
def pending_pods(draw: Any) -> list[dict[str, Any]]:
    """Distinct pending GPU-sharing pods: names repeat across namespaces, fractions and devices vary."""
    from tests.unit.adjuster_objects import pod

    count = draw(st.integers(min_value=1, max_value=24))
    keys = draw(st.lists(st.tuples(st.sampled_from(["team-a", "team-b"]), st.sampled_from([f"p{i}" for i in range(16)])),
                         min_size=count, max_size=count, unique=True))  # fmt: skip
    pods = []
    for namespace, name in keys:
        fraction = draw(st.sampled_from(["0.1", "0.25", "0.3", "0.5", "0.6", "0.75", "0x1p-2", "0.2_5"]))
        devices = draw(st.sampled_from([None, None, "2", "4", "65", "300000"]))
        waited = draw(st.sampled_from([600, 60, 5]))  # 5 s: still inside the grace period
        made = pod(name, fraction, devices=devices, namespace=namespace, waited=None)
        made["metadata"]["uid"] = f"uid-{namespace}-{name}"
        made["status"]["conditions"][0]["lastTransitionTime"] = _ago(waited)
        pods.append(made)
    return pods


def _ago(seconds: int) -> str:
    from datetime import datetime, timezone

    now = datetime.fromisoformat(ADJUSTER_NOW.replace("Z", "+00:00"))
    return (now - timedelta(seconds=seconds)).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plan(directory: Path, pods: list[Any], policy: str, name: str) -> tuple[dict[str, Any], str]:
    path = directory / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    status, out, err = check(["adjuster", "plan", "--pods", str(path), "--nodes", str(EXAMPLES_DIR / "cluster" / "nodes.json"),
                              "--policy", policy, "--now", ADJUSTER_NOW, "-o", "json"], "json")  # fmt: skip
    assert status == 0, err[-800:]
    return json.loads(out), err


@run_settings
@given(pods=pending_pods(), data=st.data(), policy=st.sampled_from(["exact", "kai"]))
def test_adjuster_plan_counts_each_pod_once(pods: list[dict[str, Any]], data: Any, policy: str) -> None:
    """Listed twice or in another order, the pods make the same plan, and each pod is in exactly one
    placeholder or among the pods not planned for (ignored, or cut by the cap)."""
    repeated = data.draw(st.lists(st.sampled_from(pods), max_size=len(pods)), label="listed again")
    shuffled = data.draw(st.permutations(pods + repeated), label="order")

    def body(directory: Path) -> None:
        once, _ = _plan(directory, pods, policy, "once.json")
        again, err = _plan(directory, shuffled, policy, "again.json")
        keys = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods}
        for plan in (once, again):
            placed = [member for placeholder in plan["placeholders"] for member in placeholder["pods"]]
            assert len(placed) == len(set(placed)), f"a pod in two placeholders: {placed}"
            left = [i["pod"] for i in plan["ignored"]] + list((plan.get("capped") or {}).get("cutPods", []))
            assert len(left) == len(set(left)) and not set(placed) & set(left), (placed, left)
            assert set(placed) | set(left) <= keys
            if policy == "exact":
                assert set(placed) | set(left) == keys, keys - set(placed) - set(left)
        assert again["totalGpus"] == once["totalGpus"]
        assert sorted(sorted(p["pods"]) for p in again["placeholders"]) == sorted(sorted(p["pods"]) for p in once["placeholders"])
        assert err.count("listed more than once") == len(repeated)

    _with_dir(body)


# --- hostile kubeconfigs: read by the offline commands too (the namespace) -----------------------

_junk = st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.text(max_size=12), st.none(), st.booleans(),
                  st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


def _child(value: Any, key: Any) -> Any:
    """value[key] where value has it, else None (an earlier replacement may have changed its shape)."""
    if isinstance(value, dict):
        return value.get(key)
    if isinstance(value, list) and isinstance(key, int) and key < len(value):
        return value[key]
    return None


@st.composite
def kubeconfigs(draw: Any) -> str:
    """A kubeconfig with any of its parts replaced by the wrong shape (a number, a list, a mapping, junk)."""
    context = {"name": "c", "context": {"cluster": "k", "user": "u", "namespace": draw(st.sampled_from(["team-a", "Bad_NS", "", "a\nb"]))}}
    config: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "contexts": [context], "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }  # fmt: skip
    for path in draw(st.lists(st.sampled_from([("contexts",), ("clusters",), ("users",), ("current-context",),
                                                ("contexts", 0), ("contexts", 0, "context"), ("contexts", 0, "name"),
                                                ("contexts", 0, "context", "namespace")]), max_size=3)):  # fmt: skip
        target: Any = config
        for key in path[:-1]:
            target = _child(target, key)
        if isinstance(target, dict) or (isinstance(target, list) and isinstance(path[-1], int) and path[-1] < len(target)):
            target[path[-1]] = draw(_junk)
    return yaml.safe_dump(config) if draw(st.booleans()) else json.dumps(config)


@run_settings
@given(kubeconfig=kubeconfigs(), command=st.sampled_from(["plan", "render"]))
def test_hostile_kubeconfigs_in_offline_commands(kubeconfig: str, command: str) -> None:
    """`plan` and `render` read the kubeconfig for the namespace only: a broken one is exit 2 naming it, or ignored."""
    def body(directory: Path) -> None:
        path = directory / "kubeconfig"
        path.write_text(kubeconfig)
        nodes = str(EXAMPLES_DIR / "cluster" / "nodes.json")
        check([command, "--kubeconfig", str(path), "--nodes", nodes, "-o", "json", "--", "python", "x.py"], "json")

    _with_dir(body)
