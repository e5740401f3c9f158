"""`python -m testcluster up`: a real Kubernetes cluster on this machine, until Ctrl-C.

Why: to try raybridge (or kubectl) by hand against the same programs the tests use:
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes, the KubeRay
operator and Kueue, built from their Go modules on first use. It creates the example
cluster's nodes, starts a local Ray head that every RayCluster's head pod stands for
(with Ray's token authentication on, reached through the stack's door: stack.py),
writes the kubeconfig (a new owner-only file renamed into place: no file that another
user made or linked there receives the admin key), says `ready`, and runs until
interrupted; then it stops everything it started and removes its temp directory.

What it does not do: no detaching (it runs in the foreground), no second cluster in one
process, no upgrade of a running cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import NoReturn, Optional

from testcluster.private_files import replace_privately
from testcluster.processes import StartError
from testcluster.programs import PROGRAMS, RELEASES, BuildError, GoMissing, ensure_built
from testcluster.stack import DEFAULT_OPERATORS, OPERATORS, Stack, StackOptions

EXAMPLE_NODES = Path(__file__).resolve().parent.parent / "examples" / "cluster" / "nodes.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m testcluster", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a cluster and run until interrupted")
    up.add_argument("--kubeconfig", required=True, type=Path, help="where to write the admin kubeconfig (a file of your own, in a directory no other user may write to; made if missing)")
    up.add_argument("--with", dest="operators", default=",".join(DEFAULT_OPERATORS), help=f"operators to start, comma-separated, of {','.join(OPERATORS)} (default {','.join(DEFAULT_OPERATORS)}; '' for none)")
    up.add_argument("--nodes", type=Path, default=EXAMPLE_NODES, help="a Node list (JSON or YAML) to create as kwok nodes (default: the example cluster's)")
    up.add_argument("--ray-dashboard", metavar="HOST:PORT", help="the Ray head every head pod stands for (default: start a local one)")
    up.add_argument("--no-ray", action="store_true", help="start no Ray head: head pods answer nothing")
    build = commands.add_parser("build", help="build the programs missing from the cache, and exit")
    build.add_argument("programs", nargs="*", help=f"programs to build, every release of each (default all: {', '.join(PROGRAMS)})")
    return parser


def _refuse(message: str) -> NoReturn:
    """Bad input: one line on stderr, status 2, nothing started."""
    print(f"python -m testcluster: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def _operators(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in OPERATORS]
    if unknown:
        _refuse(f"--with: unknown operator {unknown[0]!r} (choose from {', '.join(OPERATORS)})")
    return names


def _nodes(path: Path) -> list[dict]:
    import yaml

    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        _refuse(f"--nodes {path}: {exc}")
    items = loaded.get("items", []) if isinstance(loaded, dict) and loaded.get("kind") == "List" else loaded
    if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("metadata", {}).get("name") for i in items):
        _refuse(f"--nodes {path}: not a list of Nodes")
    return items


def _kubeconfig_destination(path: Path) -> Path:
    """Where `up` may write the admin kubeconfig, or a refusal (status 2) saying why not, before anything starts.

    The file must never be one that another user made, or can swap: not a symbolic link, not an existing file of
    another user's (one made in a shared directory such as /tmp before `up` ran would receive the admin key while
    its owner reads it), in a directory that no other user may write to unless it is sticky (as /tmp is: there no
    other user can replace a file of this one's). A missing directory is made, owner-only."""
    prefix = f"--kubeconfig {path}"
    if path.is_symlink():
        _refuse(f"{prefix}: is a symbolic link; give the path of a file of your own")
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        _refuse(f"{prefix}: {exc.strerror}")
    if info is not None and (not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid()):
        whose = "is not a regular file" if not stat.S_ISREG(info.st_mode) else f"belongs to user id {info.st_uid}, not to you"
        _refuse(f"{prefix}: {whose}; give a path in a directory of your own (e.g. ~/.kube/testcluster)")
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder_info = folder.stat()
    except OSError as exc:
        _refuse(f"{prefix}: cannot make its directory: {exc.strerror}")
    if folder_info.st_uid not in (os.getuid(), 0):
        _refuse(f"{prefix}: its directory belongs to user id {folder_info.st_uid}; give a path in a directory of your own")
    if folder_info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not folder_info.st_mode & stat.S_ISVTX:
        _refuse(f"{prefix}: other users may write to its directory; give a path in a directory of your own")
    return path


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _up(args: argparse.Namespace) -> int:
    operators = _operators(args.operators)
    nodes = _nodes(args.nodes) if args.nodes else []
    kubeconfig = _kubeconfig_destination(args.kubeconfig.expanduser())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Ctrl-C stops the stack even where `up` was started with SIGINT ignored (a shell's background job inherits
    # that): it is the documented way to stop it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        options = StackOptions(
            operators=operators, ray_dashboard=args.ray_dashboard, start_ray_head=not args.no_ray, nodes=nodes, progress=_say,
        )  # fmt: skip
        with Stack(options) as stack:
            try:
                replace_privately(kubeconfig, stack.kubeconfig.read_bytes())
            except OSError as exc:
                _say(f"error: --kubeconfig {kubeconfig}: cannot write it: {exc.strerror}")
                return 1
            try:  # from the moment `ready` is said, Ctrl-C is a stop, not an interrupted start
                _say(f"ready: {stack.server}, kubeconfig {kubeconfig}, {len(nodes)} nodes, logs in {stack.workdir / 'logs'} (Ctrl-C stops everything)")
                while not stop.wait(0.5):
                    dead = [p.name for p in stack.processes if not p.running()]
                    if dead:
                        _say(f"error: {dead[0]} exited; see its log: {stack.workdir / 'logs' / (dead[0] + '.log')}")
                        return 1
            except KeyboardInterrupt:
                _say("stopping ...")
        killed = stack.killed_at_stop
        _say(f"stopped; killed after the grace: {', '.join(killed)}" if killed else "stopped")
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
