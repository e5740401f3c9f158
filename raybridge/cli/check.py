"""`check`: what the current context's cluster offers a job, and what is missing, before the first submit.

Connects with the kubectl-style flags, calls `raybridge.jobs.check.check_cluster`,
and prints its rows as a table (default) or as data (`-o json|yaml`). Exit 0
when nothing is missing, 1 when something a submit needs is missing, 3 when
the API server does not answer. Imports kubernetes only in the handler.
"""

from __future__ import annotations

import argparse
from typing import Any

from raybridge.cli.args import add_cluster_args, add_output_arg, cluster_target, orphan_seconds
from raybridge.errors import EXIT_JOB_FAILED, EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="before the first submit: does the current context reach a cluster, with which KubeRay and Kueue, and what is missing",
        description=(
            "Checks the cluster of the current kubeconfig context (or --context) for a job: the API server, the namespace, "
            "KubeRay's API, RayJob CRD and operator release, Kueue's API and release, the LocalQueue and "
            "WorkloadPriorityClass the job would name, and the orphan bound a job gets on that KubeRay release. "
            "Exit 0 when nothing is missing, 1 when something is, 3 when the API server does not answer."
        ),
    )
    p.add_argument("spec", nargs="?", metavar="SPEC", help="a job spec: its namespace, queue and priorityClass are checked (flags win)")
    p.add_argument("--queue", help="the Kueue LocalQueue the job would name")
    p.add_argument("--priority-class", help="the Kueue WorkloadPriorityClass the job would name")
    p.add_argument("--orphan-timeout", type=orphan_seconds, default=None, metavar="SECONDS", help="the orphan bound to describe (default: 1800)")
    add_cluster_args(p)
    add_output_arg(p, "table")
    p.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, table
    from raybridge.core.consts import ORPHAN_BOUND_SECONDS
    from raybridge.jobs.check import check_cluster

    from raybridge.jobs.spec_file import load_spec

    spec = load_spec(args.spec, {"queue": args.queue, "priority_class": args.priority_class, "namespace": args.namespace})
    kube = cluster_target(args, spec.namespace).connect()
    result = check_cluster(kube, spec.queue, spec.priority_class, args.orphan_timeout or ORPHAN_BOUND_SECONDS)
    if args.output == "table":
        title = f"{result.context or 'in-cluster'} ({result.server}), namespace {result.namespace}"
        table(title, ("check", "status", "detail"), [(r.check, r.status, r.detail) for r in result.rows])
    else:
        dump(result.to_dict(), args.output)
    return EXIT_OK if not result.missing else EXIT_JOB_FAILED
