"""`explain NAME`: why a job or pod is waiting, in words or as data.

Connects with the flags' kubeconfig, context and namespace, calls
`raybridge.launch.explain.explain`, and prints its sentences (default) or
its facts as JSON/YAML (`-o json|yaml`; `-o text`, the earlier name of the default, still works and warns). Deciding what NAME is and reading
the cluster is the service's job; imports kubernetes only in the handler.
"""

from __future__ import annotations

import argparse
from typing import Any

from raybridge.cli.args import add_cluster_args, add_output_arg, cluster_target
from raybridge.core.consts import EXIT_OK


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
    add_cluster_args(p)
    add_output_arg(p, "table", deprecated={"text": "table"})
    p.set_defaults(handler=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, warn
    from raybridge.core.printable import message_lines
    from raybridge.launch.explain import explain

    result = explain(cluster_target(args).connect(), args.name)
    if args.output == "table":
        for line in result.lines():
            print(message_lines(line))
        for text in result.warnings:
            warn(text)
    else:
        dump(result.to_dict(), args.output)
    return EXIT_OK
