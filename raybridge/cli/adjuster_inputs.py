"""What `adjuster plan` plans from: the objects of its files (`--pods`, `--nodes`, `--podgroups`, `-` for standard
input) or of the current context's cluster (`--from-cluster`), in one shape either way.

Why it exists: the two sources must give the planner the same objects (pods, nodes, KAI PodGroups and the DRA
objects: ResourceSlices, DeviceClasses, ResourceClaims) so that a plan from files and one from the cluster agree;
and a flag of one source given with the other is refused rather than ignored.

What it deliberately does not do: plan (`adjuster/decision/plan.py`), or read files itself (`files.py`).
"""

from __future__ import annotations

import argparse
from typing import Any


def plan_inputs(args: argparse.Namespace) -> tuple[list[Any], Any, Any, dict[str, Any]]:
    """(pods, nodes or None, PodGroups, DRA objects by `plan_placeholders` keyword) from the flags' source."""
    if args.from_cluster:
        return _from_cluster(args)
    from raybridge.core.dra import CLAIM_KIND, DEVICE_CLASS_KIND, SLICE_KIND
    from raybridge.files import NODE_FILE_KINDS, POD_FILE_KINDS, load_objects, load_objects_of_kinds

    _no_cluster_flags(args)
    pod_file = load_objects_of_kinds(args.pods, "Pod", POD_FILE_KINDS)
    node_file = load_objects_of_kinds(args.nodes, "Node", NODE_FILE_KINDS) if args.nodes else None
    nodes = node_file["Node"] if node_file is not None else None
    # The nodes' GPUs published as DRA devices, the classes that claim them, and the claims pods name.
    dra = {"slices": node_file[SLICE_KIND] if node_file else (), "classes": node_file[DEVICE_CLASS_KIND] if node_file else (),
           "claims": pod_file[CLAIM_KIND]}
    pod_groups = load_objects(args.podgroups, "PodGroup") if args.podgroups else ()
    return pod_file["Pod"], nodes, pod_groups, dra


def _from_cluster(args: argparse.Namespace) -> tuple[list[Any], list[Any], list[Any], dict[str, Any]]:
    """The pods, nodes, PodGroups and DRA objects (ResourceSlices, DeviceClasses, ResourceClaims) of the flags' cluster,
    read as `adjuster run` reads them (every namespace)."""
    from raybridge.errors import BadInput, InfraError
    from raybridge.kube.kai import list_pod_groups
    from raybridge.kube.objects import list_nodes, list_pods_all_namespaces
    from raybridge.kube.target import ClusterTarget
    from raybridge.kube.config import DEFAULT_REQUEST_TIMEOUT
    from raybridge.cli.render import warn
    from raybridge.kube.dra import list_dra_objects

    given = [flag for flag, value in (("--nodes", args.nodes), ("--podgroups", args.podgroups)) if value]
    if given:
        raise BadInput(f"--from-cluster reads the nodes and PodGroups too: leave out {' and '.join(given)}")
    kube = ClusterTarget(args.kubeconfig, args.context, None, args.request_timeout or DEFAULT_REQUEST_TIMEOUT).connect()
    pods = list_pods_all_namespaces(kube)
    if pods is None:
        raise InfraError("listing pods in every namespace: permission denied; the adjuster's plan needs every pending pod (or give --pods FILE)")
    found = list_dra_objects(kube)
    for note in found.notes:
        warn(note)
    dra = {"slices": found.slices, "classes": found.classes, "claims": found.claims or []}
    return pods, list_nodes(kube), list_pod_groups(kube), dra


def _no_cluster_flags(args: argparse.Namespace) -> None:
    """Files talk to no cluster: the cluster flags are refused rather than ignored."""
    from raybridge.errors import BadInput

    given = [flag for flag, value in (("--kubeconfig", args.kubeconfig), ("--context", args.context), ("--request-timeout", args.request_timeout)) if value]
    if given:
        raise BadInput(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for --from-cluster; --pods reads a file")


__all__ = ["plan_inputs"]
