"""`adjuster ...`: the node-scale-adjuster's commands (`adjuster plan` now; the controller joins the group).

`adjuster plan` reads `kubectl get pods -A -o json` output (and nodes, and KAI
PodGroups when given), calls the pure planner `core.adjuster.plan_placeholders`
and prints what the adjuster would ask for. The settings flags and
`settings_from_args` are shared by every command of the group, so a flag means
the same offline and in the cluster.

It imports neither ray nor kubernetes, and decides nothing itself.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from raybridge.cli.args import Parser, add_output_arg
from raybridge.core.consts import (
    ADJUSTER_DEFAULT_GRACE_SECONDS,
    ADJUSTER_DEFAULT_MEMORY_FRACTION,
    ADJUSTER_DEFAULT_VENDOR,
    EXIT_BAD_INPUT,
    EXIT_OK,
    KAI_SCALE_ADJUST_NAMESPACE,
    KAI_SCHEDULER_NAME,
    VENDORS,
)

#: Placeholder pods listed per row in the table before "and N more".
_PODS_SHOWN = 4


def register(sub: Any) -> None:
    group = sub.add_parser(
        "adjuster",
        help="the node-scale-adjuster: pending fractional-GPU pods -> whole-GPU scale-up signals",
        description="Turn pending KAI GPU-sharing pods (gpu-fraction, gpu-memory) into whole-GPU requests the cluster autoscaler sees.",
    )
    commands = group.add_subparsers(dest="adjuster_command", metavar="SUBCOMMAND", parser_class=Parser)
    group.set_defaults(handler=lambda args: _group_help(group))

    p = commands.add_parser(
        "plan",
        help="print the placeholder GPUs the adjuster would ask for, from pod and node files",
        description="Print the placeholders the node-scale-adjuster would ask for: exact bin packing by default, or KAI's own rule (--policy kai).",
    )
    g = p.add_argument_group("input")
    g.add_argument("--pods", metavar="FILE", required=True, help="`kubectl get pods -A -o json` output (JSON or YAML)")
    g.add_argument("--nodes", metavar="FILE", help="`kubectl get nodes -o json` output: GPU memory, vendor and GPUs per node")
    g.add_argument("--podgroups", metavar="FILE", help="`kubectl get podgroups -A -o json` output: KAI's quota verdicts")
    g.add_argument("--now", metavar="TIME", help="RFC 3339 time to judge the grace period against (default: now)")
    add_settings_args(p)
    add_output_arg(p, "json")
    p.set_defaults(handler=cmd_plan)


def _group_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_BAD_INPUT


# --- settings shared by the group's commands ------------------------------------------------


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0 (got {text!r})")
    return value


def _whole(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} (got {text!r})")
        return value

    return parse


def _fraction(text: str) -> Any:
    from decimal import Decimal, InvalidOperation
    from fractions import Fraction

    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a decimal number: {text!r}") from None
    if not value.is_finite() or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1 (got {text!r})")
    return Fraction(value)


def add_settings_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("adjuster settings")
    g.add_argument("--policy", choices=("exact", "kai"), default="exact", help="exact: bin packing per constraint group (default); kai: KAI's node-scale-adjuster rule, one pass")
    g.add_argument("--scheduler-name", default=KAI_SCHEDULER_NAME, help=f"pods of this scheduler count (default: {KAI_SCHEDULER_NAME})")
    g.add_argument("--grace-period", type=_non_negative_seconds, default=float(ADJUSTER_DEFAULT_GRACE_SECONDS), metavar="SECONDS",
                   help=f"a pod counts once it has been Unschedulable this long (default: {ADJUSTER_DEFAULT_GRACE_SECONDS}; 0 to compare with KAI)")  # fmt: skip
    g.add_argument("--memory-fraction", type=_fraction, default=None, metavar="F",
                   help=f"a gpu-memory pod's fraction where its nodes' GPU memory is unknown (default: {ADJUSTER_DEFAULT_MEMORY_FRACTION}, as KAI)")  # fmt: skip
    g.add_argument("--max-gpus", type=_whole(0), default=None, metavar="N", help="at most N placeholder GPUs in all; what is cut is reported")
    g.add_argument("--default-vendor", choices=VENDORS, default=ADJUSTER_DEFAULT_VENDOR,
                   help=f"vendor of pods whose annotation ({'raybridge.io/gpu-vendor'}) and nodes do not say (default: {ADJUSTER_DEFAULT_VENDOR})")  # fmt: skip
    g.add_argument("--node-gpus", type=_whole(1), default=None, metavar="N", help="GPUs per node where no node of a group is known")
    g.add_argument("--kai-namespace", default=KAI_SCALE_ADJUST_NAMESPACE, help=f"--policy kai: namespace of KAI's scaling pods (default: {KAI_SCALE_ADJUST_NAMESPACE})")


def settings_from_args(args: argparse.Namespace) -> Any:
    from raybridge.core.adjuster import AdjusterSettings
    from raybridge.errors import BadInput

    values: dict[str, Any] = {
        "policy": args.policy,
        "scheduler_name": args.scheduler_name,
        "grace_period_seconds": args.grace_period,
        "max_total_gpus": args.max_gpus,
        "default_vendor": args.default_vendor,
        "node_gpus": args.node_gpus,
        "kai_namespace": args.kai_namespace,
    }
    if args.memory_fraction is not None:
        values["memory_fallback_fraction"] = args.memory_fraction
    settings = AdjusterSettings(**values)
    problems = settings.problems()
    if problems:
        raise BadInput(*problems)
    return settings


def _now(text: Any) -> Any:
    from datetime import datetime, timezone

    if not text:
        return datetime.now(timezone.utc)
    from raybridge.core.demand import parse_time
    from raybridge.errors import BadInput

    parsed = parse_time(text)
    if parsed is None:
        raise BadInput(f"--now {text!r} is not an RFC 3339 time (e.g. 2025-01-31T12:00:00Z)")
    return parsed


# --- adjuster plan -------------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, note, warn
    from raybridge.core.adjuster import plan_placeholders
    from raybridge.files import load_objects

    settings = settings_from_args(args)
    now = _now(args.now)
    import gc

    # Everything loaded lives until the command exits: the cyclic collector would only walk the
    # new objects again and again (about half the time of loading a large pod list).
    gc.disable()
    pods = load_objects(args.pods, "Pod")
    nodes = load_objects(args.nodes, "Node") if args.nodes else None
    pod_groups = load_objects(args.podgroups, "PodGroup") if args.podgroups else ()
    plan = plan_placeholders(pods, nodes, settings, now, pod_groups)
    for text in plan.warnings:
        warn(text)
    if args.output != "table":
        dump(plan.to_dict(), args.output)
        return EXIT_OK
    _print_tables(plan)
    for text in plan.notes:
        note(text)
    return EXIT_OK


def _approximate(value: Any) -> str:
    """The exact decimal when it is short, else three places with a tilde (the JSON keeps it exact)."""
    from raybridge.core.quantity import format_fraction

    text = format_fraction(value)
    return text if len(text) <= 8 else f"~{float(value):.3f}"


def _short(values: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in dict(values).items()) or "-"


def _tolerations(tolerations: Any) -> str:
    shown = []
    for t in tolerations:
        key = t.get("key") or "*"
        value = f"={t['value']}" if t.get("value") else ""
        shown.append(f"{key}{value}:{t.get('effect') or '*'}")
    return ", ".join(shown) or "-"


def _print_tables(plan: Any) -> None:
    from raybridge.cli.render import table

    rows = []
    for p in plan.placeholders:
        pods = ", ".join(p.pods[:_PODS_SHOWN]) + (f" and {len(p.pods) - _PODS_SHOWN} more" if len(p.pods) > _PODS_SHOWN else "")
        rows.append((p.name or p.group, p.gpus, p.resource_key, _short(p.node_selector), _tolerations(p.tolerations), pods))
    print(f"Placeholders ({plan.policy}): {plan.total_gpus} GPUs in {len(plan.placeholders)} placeholder{'s' if len(plan.placeholders) != 1 else ''}")
    table(None, ("PLACEHOLDER", "GPUS", "RESOURCE", "NODE SELECTOR", "TOLERATIONS", "PODS"), rows, empty="no placeholders: no pending pod needs a new GPU")
    if plan.groups:
        group_rows = [
            (g.group.id, g.pods, _approximate(g.demand), g.gpus, g.lower_bound, g.method, f"{g.node_gpus} ({g.node_gpus_source})", g.gpu_memory_mib)
            for g in plan.groups
        ]
        print()
        table("Constraint groups", ("GROUP", "PODS", "DEMAND", "GPUS", "LOWER BOUND", "METHOD", "GPUS/NODE", "MIB/GPU"), group_rows)
    if plan.ignored:
        print()
        table("Ignored pods", ("POD", "CODE", "REASON"), [(i.pod, i.code, i.reason) for i in plan.ignored])
    if plan.kai is not None:
        deleted = ", ".join(d["name"] for d in plan.kai["deleted"]) or "none"
        print(f"KAI need: {plan.kai['need']} GPUs; created {len(plan.kai['created'])} scaling pods; deleted: {deleted}")
    if plan.cap is not None:
        print(f"capped at {plan.cap.limit} GPUs: {plan.cap.requested} asked for, {plan.cap.cut_gpus} cut ({len(plan.cap.cut_pods)} pods wait)")
    if plan.skipped:
        print("not pending: " + ", ".join(f"{n} {code}" for code, n in sorted(plan.skipped.items())))
