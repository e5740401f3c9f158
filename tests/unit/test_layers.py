"""Every import in raybridge follows the layer diagram in docs/architecture.md.

Layers, bottom up: `errors.py`; `core/` (what every domain shares, pure);
what raybridge knows of each upstream system, pure, one package each (`kueue/`,
`kai/`, `kuberay/`); each domain's pure `decision/` packages (`jobs/`, `queues/`, `adjuster/`, plus
the adjuster's names in its `decision/consts.py`); the adapters (`kube/`, `gpu/`, `jobapi/`, `files.py`,
`noise.py`); the services (the rest of `jobs/`, `queues/`, `adjuster/`); `cli/`
and the package's entry points on top. A module may import only from its own
layer's allowed set below it. Imports inside functions count too: a lazy import
is still a dependency.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "raybridge"

#: What a pure layer (core/, decision/) may not import: the clients of the outside world, and what reads
#: the machine (the clock, randomness, the environment, package metadata). Such a value is passed in.
PURE_FORBIDDEN = {"ray", "kubernetes", "prometheus_client", "pynvml", "amdsmi", "urllib3", "requests",
                  "socket", "subprocess", "threading", "http", "urllib", "shutil", "tempfile", "random",
                  "importlib.metadata", "time", "os", "secrets", "uuid"}


def layer(module: str) -> str:
    parts = module.split(".")
    if module in {"raybridge", "raybridge.__main__"}:
        return "entry"
    if module == "raybridge.errors":
        return "errors"
    if parts[1] == "core":
        return "core"
    if parts[1] in UPSTREAM:
        return "upstream"
    if len(parts) > 2 and parts[2] == "decision":
        return "decision"
    if parts[1] in {"kube", "gpu", "jobapi", "files", "noise"}:
        return "adapter"
    if parts[1] in {"jobs", "queues", "adjuster"}:
        return "service"
    if parts[1] == "cli" or module in {"raybridge", "raybridge.__main__"}:
        return "entry"
    raise AssertionError(f"{module} is in no layer of the diagram")


#: One package per upstream system: what raybridge knows of it, pure, below every domain.
UPSTREAM = {"kueue", "kai", "kuberay", "autoscalers"}

ALLOWED = {
    "errors": set(),
    "core": {"errors", "core"},
    "upstream": {"errors", "core", "upstream"},
    "decision": {"errors", "core", "upstream", "decision"},
    "adapter": {"errors", "core", "upstream", "adapter"},
    "service": {"errors", "core", "upstream", "decision", "adapter", "service"},
    "entry": {"errors", "core", "upstream", "decision", "adapter", "service", "entry"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's tree, parsed once per test process: six tests read every module (read only)."""
    return ast.parse(path.read_text())


@functools.cache
def imports_of(path: Path) -> tuple[tuple[int, str], ...]:
    tree = parsed(path)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from raybridge.adjuster.decision import consts` imports the module raybridge.adjuster.decision.consts
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                      if (PACKAGE.parent / (f"{node.module}.{a.name}".replace(".", "/") + ".py")).exists()]
    return tuple(found)


def own_domain(module: str) -> str:
    return module.split(".")[1]


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_follow_the_layers(path):
    me = module_name(path)
    mine = layer(me)
    wrong = []
    for line, target in imports_of(path):
        top = target.split(".")[0]
        if top != "raybridge":
            if mine in {"core", "upstream", "decision", "errors"} and (top in PURE_FORBIDDEN or target in PURE_FORBIDDEN
                                                          or target.startswith("importlib.metadata.")):
                wrong.append(f"line {line}: {target} (I/O in a pure layer)")
            continue
        if target == "raybridge" or (me.startswith(target + ".") and target.count(".") == 1 and not (PACKAGE.parent / (target.replace(".", "/") + ".py")).exists()):
            continue  # a package's own __init__ path prefix
        theirs = layer(target)
        if theirs not in ALLOWED[mine]:
            wrong.append(f"line {line}: {target} ({mine} -> {theirs})")
        elif mine == theirs and mine in ("decision", "upstream") and own_domain(target) != own_domain(me):
            wrong.append(f"line {line}: {target} (one {'domain' if mine == 'decision' else 'upstream system'} reaching into another's)")
    assert not wrong, f"{me} breaks the layer diagram:\n" + "\n".join(wrong)


def test_no_private_helper_is_imported_across_modules():
    wrong = []
    for path in MODULES:
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("raybridge"):
                wrong += [f"{module_name(path)} line {node.lineno}: {node.module}.{a.name}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not wrong, "\n".join(wrong)


def test_no_two_modules_import_each_other_even_through_others():
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        me = module_name(path)
        graph[me] = {target for _, target in imports_of(path)
                     if target.startswith("raybridge.") and target != me and not me.startswith(target + ".")
                     and (PACKAGE.parent / (target.replace(".", "/") + ".py")).exists()}
    cycles = []
    for start in graph:
        seen, stack = set(), [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    cycles.append(" -> ".join(path + [start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    assert not cycles, "\n".join(sorted(set(cycles))[:10])


def test_no_two_packages_import_each_other():
    """Package by package (`gpu` and `jobapi`, `kube` and `jobs`, ...): dependencies point one way, lazy imports included."""
    edges = package_edges()
    both = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert not both, "\n".join(both)


def package_edges() -> set[tuple[str, str]]:
    """(from, to) per pair of raybridge packages (modules at the top count as packages) one imports from the other."""
    edges: set[tuple[str, str]] = set()
    for path in MODULES:
        mine = module_name(path).split(".")
        if len(mine) < 2:
            continue
        for _, target in imports_of(path):
            theirs = target.split(".")
            if theirs[0] == "raybridge" and len(theirs) > 1 and theirs[1] != mine[1]:
                edges.add((mine[1], theirs[1]))
    return edges


def test_the_architecture_picture_is_the_import_graph():
    """docs/architecture.md draws every package's arrows (those into core/ and errors.py, which all import, left out)."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    block = doc.split("```mermaid", 1)[1].split("```", 1)[0]
    drawn = {(a, b) for a, b in (line.strip().split(" --> ") for line in block.splitlines() if " --> " in line)}
    actual = {(a, b) for a, b in package_edges() if b not in ("core", "errors") and a != "__main__"}
    assert drawn == actual, f"drawn, not imported: {sorted(drawn - actual)}; imported, not drawn: {sorted(actual - drawn)}"


#: What a pure layer may not read of the interpreter: facts of the machine it runs on, handed in instead.
MACHINE_FACTS = ("sys.version_info", "sys.platform", "sys.argv", "sys.stdin", "sys.stdout", "sys.stderr", "sys.executable")


@pytest.mark.parametrize("path", [p for p in MODULES if layer(module_name(p)) in ("core", "upstream", "decision")],
                         ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_a_pure_module_reads_no_fact_of_the_machine(path):
    """`sys` itself is allowed (recursion limits, the interpreter's int bounds); what it says of this machine is not."""
    used = sorted({ast.unparse(node) for node in ast.walk(parsed(path))
                   if isinstance(node, ast.Attribute) and ast.unparse(node) in MACHINE_FACTS})
    assert not used, f"{module_name(path)} reads {', '.join(used)}: take it as a parameter"
