"""What `adjuster plan` plans from: the objects of its files (`--pods`, `--nodes`, `--podgroups`, `-` for standard
input) or of the current context's cluster (`--from-cluster`), in one shape either way.

Why it exists: the two sources must give the planner the same objects (pods, nodes, KAI PodGroups and the DRA
objects: ResourceSlices, DeviceClasses, ResourceClaims) so that a plan from files and one from the cluster agree;
and a flag of one source given with the other is refused rather than ignored.

What it deliberately does not do: read the files or the cluster (`adjuster/offline.py` does, for the CLI and the
Python API alike), or plan.
"""

from __future__ import annotations

import argparse
from typing import Any


def plan_inputs(args: argparse.Namespace) -> Any:
    """The `adjuster/offline.py` PlanInputs of the flags' source: `--pods` (and `--nodes`, `--podgroups`) files, or
    `--from-cluster`; a flag of the other source is refused, not ignored."""
    from raybridge.adjuster.offline import inputs_from_cluster, inputs_from_files

    if not args.from_cluster:
        _no_cluster_flags(args)
        return inputs_from_files(args.pods, args.nodes, args.podgroups)
    from raybridge.errors import BadInput
    from raybridge.kube.config import DEFAULT_REQUEST_TIMEOUT
    from raybridge.kube.target import ClusterTarget

    given = [flag for flag, value in (("--nodes", args.nodes), ("--podgroups", args.podgroups)) if value]
    if given:
        raise BadInput(f"--from-cluster reads the nodes and PodGroups too: leave out {' and '.join(given)}")
    return inputs_from_cluster(ClusterTarget(args.kubeconfig, args.context, None, args.request_timeout or DEFAULT_REQUEST_TIMEOUT).connect())


def _no_cluster_flags(args: argparse.Namespace) -> None:
    """Files talk to no cluster: the cluster flags are refused rather than ignored."""
    from raybridge.errors import BadInput

    given = [flag for flag, value in (("--kubeconfig", args.kubeconfig), ("--context", args.context), ("--request-timeout", args.request_timeout)) if value]
    if given:
        raise BadInput(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for --from-cluster; --pods reads a file")


__all__ = ["plan_inputs"]
