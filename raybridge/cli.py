"""`python -m raybridge ...`: the command line.

Parses flags, calls the services, prints results, and maps raybridge errors
onto exit statuses (0 done, 1 job failed or stopped, 2 bad input, 3 cluster
unreachable or not admitted in time, 130 interrupted). It imports nothing
heavy at module level, so `--help` answers at once; ray and kubernetes are
imported by the handlers that need them.

It does not decide anything itself: sizing is `raybridge.core`, launching is
`raybridge.launch`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Optional, Sequence

from raybridge.core.consts import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"error: {message}\n(see '{self.prog} --help')\n")


# --- argument groups -------------------------------------------------------------------------


def _cluster_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    g.add_argument("--context", help="kubeconfig context")
    g.add_argument("-n", "--namespace", help="namespace (default: the context's, else 'default')")


def _inventory_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("inventory")
    g.add_argument("--nodes", metavar="FILE", help="read Nodes from `kubectl get nodes -o json` output instead of the API")
    g.add_argument("--pods", metavar="FILE", help="read Pods from `kubectl get pods -A -o json` output (free GPUs per node)")


def _spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", nargs="?", metavar="SPEC", help="job spec YAML file (flags override its fields)")
    g = p.add_argument_group("job spec (flags win over the file)")
    g.add_argument("--name", help="object name (DNS-1035; RayJob <= 47 characters, RayCluster <= 53)")
    g.add_argument("--entrypoint", help="command to run (or give it after --)")
    g.add_argument("--working-dir", help="local directory uploaded as the job's working_dir")
    g.add_argument("--image", help="container image (default: per GPU vendor)")
    g.add_argument("--gpus", metavar="N", help="total GPUs")
    g.add_argument("--replicas", metavar="N", help="Ray worker replicas (or Deployment replicas)")
    g.add_argument("--gpus-per-replica", metavar="N", help="GPUs per replica; a fraction below 1 uses KAI GPU sharing")
    g.add_argument("--gpu-vendor", metavar="V", help="amd or nvidia (default: the vendor present)")
    g.add_argument("--no-ray", action="store_true", default=None, help="a plain Kubernetes workload (with --kind job|service)")
    g.add_argument("--kind", help="RayJob (default) or RayCluster; with --no-ray: job or service")
    g.add_argument("--queue", help="Kueue LocalQueue (KAI queue for fractional GPUs)")
    g.add_argument("--priority-class", help="Kueue WorkloadPriorityClass")


def _output_arg(p: argparse.ArgumentParser, default: str, choices: Sequence[str] = ("table", "json", "yaml")) -> None:
    p.add_argument("-o", "--output", choices=choices, default=default, help=f"output format (default: {default})")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="raybridge",
        description="Run Ray jobs on Kubernetes GPU clusters (AMD and NVIDIA) through KubeRay and Kueue, or on a local Ray.",
        epilog="Exit status: 0 done, 1 job failed or stopped, 2 bad input, 3 cluster unreachable or not admitted in time.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("discover", help="GPU inventory per node (cluster, node list file, Ray cluster or this machine)")
    _inventory_args(p)
    p.add_argument("--ray-address", metavar="ADDR", help="probe every node of this Ray cluster ('auto' for RAY_ADDRESS or the local one)")
    _cluster_args(p)
    _output_arg(p, "table")
    p.set_defaults(handler=cmd_discover)

    p = sub.add_parser("plan", help="size the worker group and print the decision")
    _spec_args(p)
    _inventory_args(p)
    _cluster_args(p)
    _output_arg(p, "json")
    p.set_defaults(handler=cmd_plan)

    p = sub.add_parser("render", help="print the manifests as YAML, ready for `kubectl apply -f -`")
    _spec_args(p)
    _inventory_args(p)
    _cluster_args(p)
    _output_arg(p, "yaml", ("yaml", "json"))
    p.set_defaults(handler=cmd_render)

    p = sub.add_parser("submit", help="run a Ray job end to end: size, admit, submit, stream logs, clean up")
    _spec_args(p)
    _inventory_args(p)
    _cluster_args(p)
    g = p.add_argument_group("submission")
    g.add_argument("--backend", choices=("local", "kubernetes"), help="default: kubernetes when a kubeconfig or in-cluster config exists, else local")
    g.add_argument("--address", help="local backend: an existing Ray cluster (default: $RAY_ADDRESS, else a private local head)")
    g.add_argument("--dashboard-address", help="kubernetes backend: reach the Ray dashboard here instead of the head service or a port-forward")
    g.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="give up waiting for admission and the cluster after this long (default: 1800)")
    g.add_argument("--keep", action="store_true", help="keep the RayJob/RayCluster after the run")
    g.add_argument("--no-wait", action="store_true", help="return once the job is submitted (kubernetes: objects are kept)")
    g.add_argument("--submission-id", help="Ray submission id (default: generated)")
    g.add_argument("--dry-run", action="store_true", help="print what would be created and exit")
    _output_arg(p, "table", ("table", "json", "yaml"))
    p.set_defaults(handler=cmd_submit)

    for name, helptext in (
        ("status", "status of a job raybridge created, with why it is pending"),
        ("logs", "the Ray job's logs"),
        ("stop", "stop the Ray job (the objects stay until delete)"),
        ("delete", "delete the RayJob/RayCluster and everything it owns"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("name", metavar="NAME")
        _cluster_args(p)
        p.add_argument("--dashboard-address", help="reach the Ray dashboard here instead of the head service or a port-forward")
        if name == "logs":
            p.add_argument("-f", "--follow", action="store_true", help="stream until the job ends")
        if name == "status":
            _output_arg(p, "table")
        p.set_defaults(handler=_lifecycle(f"run_{name}"))

    p = sub.add_parser("list", help="jobs and clusters raybridge created")
    _cluster_args(p)
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    _output_arg(p, "table")
    p.set_defaults(handler=_lifecycle("run_list"))
    return parser


# --- helpers ----------------------------------------------------------------------------------


def _spec_from_args(args: argparse.Namespace, entrypoint: Optional[str]) -> Any:
    from raybridge.core.spec import load_spec

    overrides = {
        "name": args.name,
        "namespace": getattr(args, "namespace", None),
        "entrypoint": entrypoint or args.entrypoint,
        "working_dir": os.path.abspath(args.working_dir) if args.working_dir and "://" not in args.working_dir else args.working_dir,
        "image": args.image,
        "gpus": args.gpus,
        "replicas": args.replicas,
        "gpus_per_replica": args.gpus_per_replica,
        "gpu_vendor": args.gpu_vendor,
        "ray": False if args.no_ray else None,
        "kind": args.kind,
        "queue": args.queue,
        "priority_class": args.priority_class,
    }
    if entrypoint and args.entrypoint:
        from raybridge.errors import BadInput

        raise BadInput("give the entrypoint either with --entrypoint or after --, not both")
    return load_spec(args.spec, overrides)


def _inventory(args: argparse.Namespace, spec: Any = None) -> Any:
    from raybridge.discovery import discover_inventory

    return discover_inventory(
        nodes_file=args.nodes,
        pods_file=args.pods,
        ray_address=getattr(args, "ray_address", None),
        kubeconfig=args.kubeconfig,
        context=args.context,
        tolerations=spec.tolerations if spec is not None else (),
    )


def _print_warnings(decision: Any) -> None:
    from raybridge.output import note, warn

    for text in decision.notes:
        note(text)
    for text in decision.warnings:
        warn(text)


def _namespace(args: argparse.Namespace, spec: Any) -> str:
    from raybridge.core.consts import DEFAULT_NAMESPACE

    return spec.namespace or args.namespace or DEFAULT_NAMESPACE


# --- commands ---------------------------------------------------------------------------------


def cmd_discover(args: argparse.Namespace, entrypoint: Optional[str]) -> int:
    from raybridge.output import dump, note, table

    inventory = _inventory(args)
    if args.output != "table":
        dump(inventory.to_dict(), args.output)
        return EXIT_OK
    rows = []
    for n in inventory.nodes:
        free = n.free if n.free is not None else None
        memory = f"{n.memory_mib} MiB" if n.memory_mib else None
        state = "yes" if n.eligible else "no: " + ", ".join(n.reasons)
        rows.append((n.name, n.vendor or "none", n.gpus, free, n.model, memory, state))
    table(f"GPU inventory ({inventory.source})", ("NODE", "VENDOR", "GPUS", "FREE", "MODEL", "MEMORY/GPU", "SCHEDULABLE"), rows)
    for vendor, total in inventory.vendors(eligible_only=False).items():
        cap = inventory.capacity(vendor)
        nodes = f"{cap.nodes} node{'s' if cap.nodes != 1 else ''}"
        print(f"{vendor}: {cap.total} schedulable GPUs on {nodes} (smallest node {cap.min_per_node}, largest {cap.max_per_node}); {total} in all")
    for text in inventory.notes:
        note(text)
    return EXIT_OK


def cmd_plan(args: argparse.Namespace, entrypoint: Optional[str]) -> int:
    from raybridge.output import dump, table
    from raybridge.planning import plan_job

    spec = _spec_from_args(args, entrypoint)
    decision = plan_job(spec, _inventory(args, spec))
    data = decision.to_dict()
    if args.output == "table":
        rows = [(k, v) for k, v in data.items() if k not in ("warnings", "notes")]
        table("Sizing decision", ("FIELD", "VALUE"), rows)
        _print_warnings(decision)
    else:
        dump(data, args.output)
    return EXIT_OK


def cmd_render(args: argparse.Namespace, entrypoint: Optional[str]) -> int:
    from raybridge.output import dump
    from raybridge.planning import DEFAULT_RENDER_NAME, plan_job, render_job

    spec = _spec_from_args(args, entrypoint)
    decision = plan_job(spec, _inventory(args, spec))
    _print_warnings(decision)
    objects = render_job(spec, decision, name=spec.name or DEFAULT_RENDER_NAME, namespace=_namespace(args, spec))
    if args.output == "json":
        dump({"apiVersion": "v1", "kind": "List", "items": objects}, "json")
    else:
        from raybridge.core.manifests import to_yaml

        sys.stdout.write(to_yaml(objects))
    return EXIT_OK


def cmd_submit(args: argparse.Namespace, entrypoint: Optional[str]) -> int:
    from raybridge.launch.cli import run_submit

    spec = _spec_from_args(args, entrypoint)
    return run_submit(args, spec)


def _lifecycle(function: str) -> Callable[[argparse.Namespace, Optional[str]], int]:
    """A handler that imports `raybridge.launch.cli` (and so ray) only when the command runs."""

    def handler(args: argparse.Namespace, entrypoint: Optional[str]) -> int:
        import importlib

        return int(getattr(importlib.import_module("raybridge.launch.cli"), function)(args))

    return handler


# --- entry point ------------------------------------------------------------------------------


def _split_entrypoint(argv: list[str]) -> tuple[list[str], Optional[str]]:
    """Everything after the first `--` is the entrypoint command."""
    if "--" not in argv:
        return argv, None
    i = argv.index("--")
    rest = argv[i + 1 :]
    if not rest:
        return argv[:i], None
    import shlex

    return argv[:i], shlex.join(rest)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv, entrypoint = _split_entrypoint(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from raybridge import __version__

        print(f"raybridge {__version__}")
        return EXIT_OK
    handler: Optional[Callable[[argparse.Namespace, Optional[str]], int]] = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    if entrypoint and args.command not in ("plan", "render", "submit"):
        parser.error(f"'{args.command}' takes no command after --")
    from raybridge.errors import RaybridgeError

    try:
        return handler(args, entrypoint)
    except RaybridgeError as exc:
        for problem in exc.problems:
            sys.stderr.write(f"error: {problem}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug: one line, the traceback only on request
        if os.environ.get("RAYBRIDGE_DEBUG"):
            raise
        sys.stderr.write(f"error: internal error: {type(exc).__name__}: {exc} (set RAYBRIDGE_DEBUG=1 for the traceback)\n")
        return EXIT_JOB_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
