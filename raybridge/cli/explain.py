"""`explain NAME`: why a job or pod is waiting, in words or as data.

Connects with the flags' kubeconfig, context and namespace, calls
`raybridge.queues.explain.explain`, and prints its sentences (default), its
facts as JSON/YAML (`-o json|yaml`), or a picture of the queue tree with the
job's path highlighted and the sentences under it (`-o svg`); `-o text`, the
earlier name of the default, still works and warns. Deciding what NAME is and
reading the cluster is the service's job; imports kubernetes only in the handler.
"""

from __future__ import annotations

import argparse
from typing import Any

from raybridge.cli.args import OUTPUT_FORMATS, PICTURE_FORMATS, add_cluster_args, add_output_arg, cluster_target
from raybridge.errors import EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="why a job or pod is waiting: Kueue (RayJob, RayCluster) or KAI (PodGroup, pod)",
        description=(
            "Why NAME is waiting. NAME is looked up in this order: a RayJob, a RayCluster (queued by Kueue), "
            "a KAI PodGroup, a Pod (a KAI pod, explained through its PodGroup and queue)."
        ),
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "-f", "--filename", action="append", metavar="FILE", default=[],
        help="read the objects from `kubectl get -o yaml|json` output instead of a cluster (repeatable): the RayJob, "
        "its Workload, LocalQueue, ClusterQueue, ResourceFlavors, Nodes; or a KAI PodGroup or Pod, the Queues, Nodes and pods",
    )  # fmt: skip
    add_cluster_args(p, namespace_default="the context's, else 'default'; with -f, the namespace NAME is in")
    add_output_arg(p, "table", choices=(*OUTPUT_FORMATS, *PICTURE_FORMATS), deprecated={"text": "table"})
    p.set_defaults(handler=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, warn
    from raybridge.core.printable import one_line
    from raybridge.queues.explain import explain

    result = explain(_source(args), args.name)
    if args.output == "svg":
        import sys

        from raybridge.queues.decision.queue_svg import kai_explain_svg, kueue_explain_svg

        if result.kueue is not None:
            sys.stdout.write(kueue_explain_svg(result.kueue))
        elif result.kai is not None:
            sys.stdout.write(kai_explain_svg(result.kai, f"{result.kind} {result.namespace}/{result.name}"))
        for text in result.warnings:
            warn(text)
    elif args.output == "table":
        for line in result.lines():
            print(one_line(line))
        for text in result.warnings:
            warn(text)
    else:
        dump(result.to_dict(), args.output)
    return EXIT_OK


def _source(args: argparse.Namespace) -> Any:
    """The cluster of the flags, or the objects of the -f files (which talk to no cluster, so take no cluster flags)."""
    if not args.filename:
        return cluster_target(args).connect()
    from raybridge.errors import BadInput
    from raybridge.queues.explain_sources import FileObjects, read_object_files

    cluster_flags = [flag for flag, value in (("--kubeconfig", args.kubeconfig), ("--context", args.context)) if value]
    if cluster_flags:
        raise BadInput(f"-f reads the objects from files and talks to no cluster: leave out {' and '.join(cluster_flags)}")
    objects, notes = read_object_files(args.filename)
    where = ", ".join(args.filename)
    source = FileObjects(objects, args.namespace or "default", where)
    if not args.namespace:
        found = source.namespaces_of(args.name)
        if len(found) > 1:
            raise BadInput(f"{args.name!r} is in namespaces {', '.join(found)} of {where}: say which with -n")
        source.namespace = found[0] if found else "default"  # the files' objects are indexed once, whatever the namespace
    from raybridge.cli.render import note

    for text in notes:
        note(text)
    return source
