"""queues fairshare, queues generate: KAI's fair share, and queue configs sized from the nodes.

Turns flags into calls of `raybridge.queues` and prints what comes back:
fair shares as JSON, YAML, a table with the notes under it or an SVG
picture of the queue tree (`core.queue_svg`); configs as
multi-document YAML (with comment lines saying what they were sized from) or
a JSON List. Nothing heavy is imported at module level.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from raybridge.cli.args import DOCUMENT_FORMATS, OUTPUT_FORMATS, PICTURE_FORMATS, Parser, add_cluster_args, add_output_arg, cluster_target
from raybridge.errors import EXIT_BAD_INPUT, EXIT_OK
from raybridge.core.printable import one_line
from raybridge.kueue.api import VERSION_NOTES, VERSIONS as KUEUE_VERSIONS



def register(sub: Any) -> None:
    group = sub.add_parser("queues", help="KAI fair share; Kueue and KAI queue configs sized from the nodes")
    group.set_defaults(handler=lambda args: _usage(group))
    queues = group.add_subparsers(dest="queues_command", metavar="SUBCOMMAND", parser_class=Parser)

    p = queues.add_parser(
        "fairshare",
        help="what each KAI queue gets, computed exactly as KAI's proportion plugin does",
        description="Fair share per queue and resource, in the queue's units (GPUs in devices, CPU in "
        "millicores, memory in MB = 10^6 bytes), with notes where KAI's number is surprising.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--queues", metavar="FILE", help="scheduling.run.ai/v2 Queue objects (multi-document YAML or a List)")
    source.add_argument("--from-cluster", action="store_true", help="read the cluster's Queues, nodes and KAI pods")
    p.add_argument(
        "--capacity", metavar="SPEC",
        help="what the top level divides, as Kubernetes quantities: gpu=40,cpu=64000m,memory=512000M (left-out "
        "resources are 0); with --from-cluster the default is the Ready nodes' allocatable less other schedulers' pods",
    )  # fmt: skip
    p.add_argument(
        "--demand", metavar="FILE",
        help='JSON/YAML: queue -> requests, e.g. {"p1": {"gpu": 2, "cpu": "8", "memory": "64Gi"}}; default: every '
        "queue wants without bound (with --from-cluster: the KAI pods' requests by their kai.scheduler/queue label)",
    )  # fmt: skip
    _cluster_args(p)
    add_output_arg(p, "table", (*OUTPUT_FORMATS, *PICTURE_FORMATS))
    p.set_defaults(handler=cmd_fairshare)

    p = queues.add_parser(
        "generate",
        help="Kueue flavors, ClusterQueues, LocalQueues, admission check and priority classes (or KAI queues) sized from the nodes",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--nodes", metavar="FILE", help="`kubectl get nodes -o json` output")
    source.add_argument("--from-cluster", action="store_true", help="read the cluster's Nodes")
    p.add_argument("--queues", type=_count, default=2, metavar="N", help="ClusterQueues (with --kai: projects per department); default 2")
    p.add_argument("--names", type=_names, metavar="A,B,...", help="queue names instead of team-1..team-N (DNS labels; also the LocalQueues' namespaces)")
    p.add_argument("--kai", action="store_true", help="a KAI Queue hierarchy, departments then projects, instead of Kueue")
    p.add_argument("--departments", type=_count, default=1, metavar="N", help="with --kai: departments (default 1)")
    g = p.add_argument_group("Kueue")
    g.add_argument(
        "--kueue-api", choices=KUEUE_VERSIONS, default=KUEUE_VERSIONS[0],
        help=" or ".join(f"{v} ({VERSION_NOTES[v]}{', default' if v == KUEUE_VERSIONS[0] else ''})" for v in KUEUE_VERSIONS),
    )  # fmt: skip
    g.add_argument("--cohort", default="gpu", type=_name, help="cohort of the ClusterQueues (default gpu)")
    g.add_argument("--borrowing-limit", type=_percent, default=100, metavar="PERCENT", help="share of the other queues' quota a queue may borrow (default 100)")
    g.add_argument("--no-provisioning", action="store_true", help="no AdmissionCheck/ProvisioningRequestConfig (clusters without ProvisioningRequest support)")
    g.add_argument("--no-namespaces", action="store_true", help="do not emit the LocalQueues' Namespaces")
    _cluster_args(p)
    add_output_arg(p, "yaml", DOCUMENT_FORMATS)
    p.set_defaults(handler=cmd_generate)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_BAD_INPUT


def _cluster_args(p: argparse.ArgumentParser) -> None:
    add_cluster_args(p, "cluster (with --from-cluster)", namespace_help="accepted as everywhere; Queues and Nodes are cluster-wide", namespace_default=None)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 1 and 100 (got {value})")
    return value


def _percent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100 (got {value})")
    return value


def _name(text: str) -> str:
    from raybridge.core.names import dns_label_problem

    problem = dns_label_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r} is not a DNS label: {problem}")
    return text


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one name")
    for name in names:
        _name(name)
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError("names must differ")
    return names


def _kube(args: argparse.Namespace) -> Any:
    return cluster_target(args).connect()


def _warn_unused_cluster_flags(args: argparse.Namespace) -> None:
    """Cluster flags that nothing reads are said, not silently dropped (as `discover` does)."""
    from raybridge.cli.render import warn

    given = [flag for flag, value in (("--kubeconfig", args.kubeconfig), ("--context", args.context),
                                      ("--request-timeout", args.request_timeout)) if value is not None]  # fmt: skip
    if given and not args.from_cluster:
        warn(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} ignored: the input is a file (--from-cluster reads the cluster)")


# --- fairshare -------------------------------------------------------------------------------


def cmd_fairshare(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, warn
    from raybridge.errors import BadInput
    from raybridge.queues.fairshare import cluster_fair_share, file_fair_share

    _warn_unused_cluster_flags(args)
    if args.from_cluster:
        report = cluster_fair_share(_kube(args), args.capacity, args.demand)
    else:
        if not args.capacity:
            raise BadInput("--capacity is required with --queues (e.g. --capacity gpu=40,cpu=64000m,memory=512000M)")
        report = file_fair_share(args.queues, args.capacity, args.demand)
    for warning in report.warnings:
        warn(warning)
    if args.output == "svg":
        from raybridge.queues.decision.queue_svg import fair_share_svg

        sys.stdout.write(fair_share_svg(report.result, report.warnings))
        return EXIT_OK
    if args.output != "table":
        dump(report.to_dict(), args.output)
        return EXIT_OK
    _fairshare_table(report.result)
    return EXIT_OK


def _fairshare_table(result: Any) -> None:
    from raybridge.cli.render import table

    depth: dict[str, int] = {}
    rows = []
    for queue in result.queues:
        depth[queue.name] = depth[queue.parent] + 1 if queue.parent in depth else 0
        shown = [r for r in ("gpu", "cpu", "memory") if _shows(queue.resource(r))]
        for i, resource in enumerate(shown):
            share = queue.resource(resource)
            rows.append(
                [
                    "  " * depth[queue.name] + queue.name if i == 0 else "",
                    queue.priority if i == 0 else "",
                    _UNIT_NAMES[resource],
                    _show(share.quota),
                    _show(share.limit),
                    _show(share.over_quota_weight),
                    "unbounded" if share.request is None else _show(share.request),
                    _show(share.deserved),
                    _show(share.over_quota),
                    _show(share.fair_share),
                ]
            )
    capacity = ", ".join(f"{_UNIT_NAMES[r]} {_show(result.capacity[r])}" for r in ("gpu", "cpu", "memory"))
    columns = ["QUEUE", "PRIO", "RESOURCE", "QUOTA", "LIMIT", "WEIGHT", "REQUEST", "DESERVED", "OVER QUOTA", "FAIR SHARE"]
    table(f"KAI fair share of {capacity} (resources with all zeros not shown)", columns, rows)
    for note in result.notes:
        print(one_line(f"note: {note.queue} {note.resource}: {note.message}"))
    for name, reason in result.dropped:
        print(one_line(f"left out: {name}: {reason}"))


_UNIT_NAMES = {"gpu": "gpu", "cpu": "cpu (m)", "memory": "memory (MB)"}


def _shows(share: Any) -> bool:
    return any(v != 0 for v in (share.quota, share.limit, share.over_quota_weight, share.fair_share))


def _show(value: float) -> str:
    from raybridge.kai.fairshare import number

    shown = number(value)
    return f"{shown:.3f}".rstrip("0").rstrip(".") if isinstance(shown, float) else str(shown)


# --- generate --------------------------------------------------------------------------------


def _command_line(args: argparse.Namespace) -> str:
    """The command that regenerates this output (the flags that differ from the defaults)."""
    import shlex

    words = ["python -m raybridge queues generate"]
    words.append(f"--nodes {shlex.quote(args.nodes)}" if args.nodes else "--from-cluster")
    if args.kai:
        words.append("--kai")
    if args.names:
        words.append("--names " + ",".join(args.names))
    if args.queues != 2:
        words.append(f"--queues {args.queues}")
    if args.kai:
        if args.departments != 1:
            words.append(f"--departments {args.departments}")
        return " ".join(words)
    for flag, value, default in (
        ("--kueue-api", args.kueue_api, KUEUE_VERSIONS[0]),
        ("--cohort", args.cohort, "gpu"),
        ("--borrowing-limit", args.borrowing_limit, 100),
    ):
        if value != default:
            words.append(f"{flag} {value}")
    words += [flag for flag, on in (("--no-provisioning", args.no_provisioning), ("--no-namespaces", args.no_namespaces)) if on]
    return " ".join(words)


def cmd_generate(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump_documents, note
    from raybridge.queues.decision.configs import KaiOptions, KueueOptions
    from raybridge.queues.generate import generate_queue_configs

    options: Any
    if args.kai:
        if args.names and args.departments != 1:
            from raybridge.errors import BadInput

            raise BadInput("--names names the departments with --kai; give either --names or --departments")
        departments = args.names or tuple(f"department-{i + 1}" for i in range(args.departments))
        options = KaiOptions(departments=departments, projects_per_department=args.queues)
    else:
        names = args.names or tuple(f"team-{i + 1}" for i in range(args.queues))
        options = KueueOptions(
            names=names,
            cohort=args.cohort,
            api_version=args.kueue_api,
            borrowing_percent=args.borrowing_limit,
            provisioning=not args.no_provisioning,
            namespaces=not args.no_namespaces,
        )
    _warn_unused_cluster_flags(args)
    kube = _kube(args) if args.from_cluster else None
    generated = generate_queue_configs(options, nodes_file=args.nodes, kube=kube)
    if args.output == "json":
        for line in generated.summary:
            note(line)
    comments = [f"Generated by `{_command_line(args)}`."] + list(generated.summary)
    dump_documents(generated.objects, args.output, comments)
    return EXIT_OK
