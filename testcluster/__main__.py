"""`python -m testcluster up`: a real Kubernetes cluster on this machine, until Ctrl-C.

Why: to try raybridge (or kubectl) by hand against the same programs the tests use:
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes, the KubeRay
operator and Kueue, built from their Go modules on first use. It creates the example
cluster's nodes, starts a local Ray head that every RayCluster's head pod stands for,
writes the kubeconfig, says `ready`, and runs until interrupted; then it stops
everything it started and removes its temp directory.

What it does not do: no detaching (it runs in the foreground), no second cluster in one
process, no upgrade of a running cluster.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Optional

from testcluster.processes import StartError
from testcluster.programs import PROGRAMS, RELEASES, BuildError, GoMissing, ensure_built
from testcluster.stack import DEFAULT_OPERATORS, OPERATORS, Stack, StackOptions

EXAMPLE_NODES = Path(__file__).resolve().parent.parent / "examples" / "cluster" / "nodes.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m testcluster", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a cluster and run until interrupted")
    up.add_argument("--kubeconfig", required=True, type=Path, help="where to write the admin kubeconfig")
    up.add_argument("--with", dest="operators", default=",".join(DEFAULT_OPERATORS), help=f"operators to start, comma-separated, of {','.join(OPERATORS)} (default {','.join(DEFAULT_OPERATORS)}; '' for none)")
    up.add_argument("--nodes", type=Path, default=EXAMPLE_NODES, help="a Node list (JSON or YAML) to create as kwok nodes (default: the example cluster's)")
    up.add_argument("--ray-dashboard", metavar="HOST:PORT", help="the Ray head every head pod stands for (default: start a local one)")
    up.add_argument("--no-ray", action="store_true", help="start no Ray head: head pods answer nothing")
    build = commands.add_parser("build", help="build the programs missing from the cache, and exit")
    build.add_argument("programs", nargs="*", help=f"programs to build, every release of each (default all: {', '.join(PROGRAMS)})")
    return parser


def _operators(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in OPERATORS]
    if unknown:
        raise SystemExit(f"python -m testcluster: error: --with: unknown operator {unknown[0]!r} (choose from {', '.join(OPERATORS)})")
    return names


def _nodes(path: Path) -> list[dict]:
    import yaml

    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"python -m testcluster: error: --nodes {path}: {exc}") from None
    items = loaded.get("items", []) if isinstance(loaded, dict) and loaded.get("kind") == "List" else loaded
    if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("metadata", {}).get("name") for i in items):
        raise SystemExit(f"python -m testcluster: error: --nodes {path}: not a list of Nodes")
    return items


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _up(args: argparse.Namespace) -> int:
    operators = _operators(args.operators)
    nodes = _nodes(args.nodes) if args.nodes else []
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        options = StackOptions(
            operators=operators, ray_dashboard=args.ray_dashboard, start_ray_head=not args.no_ray, nodes=nodes, progress=_say,
        )  # fmt: skip
        with Stack(options) as stack:
            args.kubeconfig.write_text(stack.kubeconfig.read_text())
            args.kubeconfig.chmod(0o600)
            _say(f"ready: {stack.server}, kubeconfig {args.kubeconfig}, {len(nodes)} nodes, logs in {stack.workdir / 'logs'} (Ctrl-C stops everything)")
            try:
                while not stop.wait(0.5):
                    dead = [p.name for p in stack.processes if not p.running()]
                    if dead:
                        _say(f"error: {dead[0]} exited; see its log: {stack.workdir / 'logs' / (dead[0] + '.log')}")
                        return 1
            except KeyboardInterrupt:
                _say("stopping ...")
        return 0
    except (GoMissing, BuildError, StartError, TimeoutError) as exc:
        _say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        _say("interrupted while starting; stopped")
        return 130


def _build(args: argparse.Namespace) -> int:
    names = args.programs or list(PROGRAMS)
    unknown = [name for name in names if name not in PROGRAMS]
    if unknown:
        _say(f"python -m testcluster: error: unknown program {unknown[0]!r} (choose from {', '.join(PROGRAMS)})")
        return 2
    try:
        for name in names:
            for version, release in RELEASES[name].items():
                path = ensure_built([release], _say)[name]
                print(json.dumps({"program": name, "version": version, "binary": str(path)}))
    except (GoMissing, BuildError) as exc:
        _say(f"error: {exc}")
        return 1
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    return _up(args) if args.command == "up" else _build(args)


if __name__ == "__main__":
    sys.exit(main())
