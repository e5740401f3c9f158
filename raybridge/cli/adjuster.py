"""`adjuster ...`: the node-scale-adjuster's commands, `adjuster plan` (offline) and `adjuster run` (in the cluster).

`adjuster plan` reads `kubectl get pods -A -o json` output (and nodes, and KAI
PodGroups when given), calls the pure planner `core.adjuster.plan_placeholders`
and prints what the adjuster would ask for. The settings flags and
`settings_from_args` are shared by every command of the group, so a flag means
the same offline and in the cluster.

`adjuster run` validates its settings (flags, else `RAYBRIDGE_ADJUSTER_*`
environment variables; exit 2 on a bad one), sets up logging (text or JSON),
connects, and runs `raybridge.adjuster.Controller` until SIGTERM or Ctrl-C.

It imports neither ray nor (outside `run`) kubernetes, and decides nothing itself.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Optional

from raybridge.cli.args import Parser, add_cluster_args, add_output_arg, described, seconds
from raybridge.cli.process import end_process_without_finalizing
from raybridge.core.consts import ADJUSTER_DEFAULT_GRACE_SECONDS, ADJUSTER_DEFAULT_VENDOR, VENDORS
from raybridge.kai.names import ADJUSTER_DEFAULT_MEMORY_FRACTION, KAI_GPU_MEMORY_LABEL, KAI_SCALE_ADJUST_NAMESPACE, KAI_SCHEDULER_NAME
from raybridge.errors import EXIT_BAD_INPUT, EXIT_OK

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
    g = p.add_argument_group("input (files, `-` for standard input, or the cluster)")
    source = g.add_mutually_exclusive_group(required=True)
    source.add_argument("--pods", metavar="FILE", help="`kubectl get pods -A -o json` output (JSON or YAML), with the "
                        "ResourceClaims the pods name where their GPUs come through claims")
    source.add_argument("--from-cluster", action="store_true",
                        help="read the pods, nodes, KAI PodGroups and DRA objects of the current context's cluster (--kubeconfig, --context)")
    g.add_argument("--nodes", metavar="FILE", help="`kubectl get nodes -o json` output: GPU memory, vendor and GPUs per node; with "
                   "the ResourceSlices and DeviceClasses where nodes publish GPUs as DRA devices")
    g.add_argument("--podgroups", metavar="FILE", help="`kubectl get podgroups -A -o json` output: KAI's quota verdicts")
    c = p.add_argument_group("cluster (with --from-cluster)")
    c.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    c.add_argument("--context", help="kubeconfig context (default: the kubeconfig's current context)")
    c.add_argument("--request-timeout", type=seconds, default=None, metavar="SECONDS", help="bound on each Kubernetes API call (default: 30)")
    g.add_argument("--now", metavar="TIME", help="RFC 3339 time to judge the grace period against (default: now)")
    add_settings_args(p)
    add_output_arg(p, None, shown_default="table; yaml with --manifests")
    from raybridge.adjuster.decision import consts
    from raybridge.adjuster.decision.settings import MODES

    m = p.add_argument_group("manifests (what `adjuster run` would create)")
    m.add_argument("--manifests", action="store_true", help="print the placeholder pods (or ProvisioningRequests and their "
                   "PodTemplates) `adjuster run` would create for these pods and nodes, exactly as it creates them, for "
                   "`kubectl apply --dry-run=server -f -` (-o yaml: documents; json: a v1 List)")
    m.add_argument("--mode", choices=MODES, default="placeholder", help="as `adjuster run --mode` (default: placeholder)")
    m.add_argument("-n", "--namespace", default=consts.DEFAULT_NAMESPACE, help=f"as `adjuster run --namespace` (default: {consts.DEFAULT_NAMESPACE})")
    m.add_argument("--priority-class", default=consts.DEFAULT_PRIORITY_CLASS, help="as `adjuster run --priority-class`")
    m.add_argument("--placeholder-image", default=consts.DEFAULT_PLACEHOLDER_IMAGE, help="as `adjuster run --placeholder-image`")
    m.add_argument("--provisioning-class", default=consts.DEFAULT_PROVISIONING_CLASS, help="as `adjuster run --provisioning-class`")
    p.set_defaults(handler=cmd_plan)
    _register_run(commands)


def _group_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_BAD_INPUT


# --- settings shared by the group's commands ------------------------------------------------
# The flag types below only read the text as a number; what range each value must be in is checked once, in
# `adjuster/decision/settings.py` (AdjusterSettings.problems, RunSettings.problems), for flags and
# RAYBRIDGE_ADJUSTER_* variables alike.


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def _whole(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _fraction(text: str) -> Any:
    from decimal import Decimal, InvalidOperation
    from fractions import Fraction

    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a decimal number: {text!r}") from None
    if not value.is_finite():  # a Fraction holds no NaN or infinity
        raise argparse.ArgumentTypeError(f"not a finite decimal number: {text!r}")
    return Fraction(value)


def add_settings_args(p: argparse.ArgumentParser, env: Optional[Callable[[str], str]] = None) -> None:
    """The planner's settings; `env`, for `adjuster run`, names the variable each flag falls back to ('' for none)."""
    env_of = env or (lambda flag: "")
    g = p.add_argument_group("adjuster settings")
    g.add_argument("--policy", choices=("exact", "kai"), default="exact", help=described(
        "exact: bin packing per constraint group; kai: KAI's node-scale-adjuster rule, one pass", "exact", env_of("policy")))
    g.add_argument("--scheduler-name", default=KAI_SCHEDULER_NAME, help=described(
        "pods of this scheduler count", KAI_SCHEDULER_NAME, env_of("scheduler-name")))
    g.add_argument("--grace-period", type=_seconds, default=float(ADJUSTER_DEFAULT_GRACE_SECONDS), metavar="SECONDS", help=described(
        "a pod counts once it has been Unschedulable this long", f"{ADJUSTER_DEFAULT_GRACE_SECONDS}, as KAI; `adjuster run` "
        "also waits for a burst to settle (--batch-idle-duration)", env_of("grace-period")))
    g.add_argument("--memory-fraction", type=_fraction, default=None, metavar="F", help=described(
        "a gpu-memory pod's fraction where its nodes' GPU memory is unknown", f"{ADJUSTER_DEFAULT_MEMORY_FRACTION}, as KAI", env_of("memory-fraction")))
    g.add_argument("--max-gpus", type=_whole, default=None, metavar="N", help=described(
        "at most N placeholder GPUs in all; what is cut is reported", "no limit", env_of("max-gpus")))
    g.add_argument("--default-vendor", choices=VENDORS, default=ADJUSTER_DEFAULT_VENDOR, help=described(
        "vendor of pods whose annotation (raybridge.io/gpu-vendor) and nodes do not say", ADJUSTER_DEFAULT_VENDOR, env_of("default-vendor")))
    g.add_argument("--node-gpus", type=_whole, default=None, metavar="N", help=described(
        "GPUs per node where no node of a group is known", "the group's largest pod", env_of("node-gpus")))
    g.add_argument("--gpu-memory-label", default=KAI_GPU_MEMORY_LABEL, metavar="LABEL", help=described(
        "the node label (MiB per GPU) a placeholder for gpu-memory pods requires their memory by, so the autoscaler "
        "brings a node type whose GPUs hold them; it must know the label of each type ('' for none)", KAI_GPU_MEMORY_LABEL + ", KAI's",
        env_of("gpu-memory-label")))
    g.add_argument("--autoscaler-reads-dra", choices=("true", "false"), default="false", help=described(
        "true where the autoscaler reads pods' ResourceClaims itself (Karpenter --ignore-dra-requests=false, cluster-autoscaler "
        "--enable-dynamic-resource-allocation): pods whose GPUs come through claims are then left to it; false: placeholders "
        "ask for their devices as the device plugin's resource", "false", env_of("autoscaler-reads-dra")))
    g.add_argument("--kai-namespace", default=KAI_SCALE_ADJUST_NAMESPACE, help=described(
        "--policy kai: namespace of KAI's scaling pods", KAI_SCALE_ADJUST_NAMESPACE, env_of("kai-namespace")))


def settings_from_args(args: argparse.Namespace) -> Any:
    from raybridge.adjuster.decision.settings import AdjusterSettings
    from raybridge.errors import BadInput

    if args.autoscaler_reads_dra not in ("true", "false"):  # a RAYBRIDGE_ADJUSTER_ variable is not checked by argparse
        raise BadInput(f"--autoscaler-reads-dra must be true or false (got {args.autoscaler_reads_dra!r})")
    values: dict[str, Any] = {
        "policy": args.policy,
        "scheduler_name": args.scheduler_name,
        "grace_period_seconds": args.grace_period,
        "max_total_gpus": args.max_gpus,
        "default_vendor": args.default_vendor,
        "node_gpus": args.node_gpus,
        "kai_namespace": args.kai_namespace,
        "gpu_memory_label": args.gpu_memory_label,
        "autoscaler_reads_dra": args.autoscaler_reads_dra == "true",
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
    from raybridge.core.kubeobjects import parse_rfc3339
    from raybridge.errors import BadInput

    parsed = parse_rfc3339(text)
    if parsed is None:
        raise BadInput(f"--now {text!r} is not an RFC 3339 time (e.g. 2025-01-31T12:00:00Z)")
    return parsed


# --- adjuster plan -------------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace) -> int:
    import gc

    # Everything imported and loaded lives until the command exits: the cyclic collector would only
    # walk the new objects again and again (about half the time of loading a large pod list).
    gc.disable()
    from raybridge.adjuster import offline
    from raybridge.cli.adjuster_inputs import plan_inputs
    from raybridge.cli.render import dump, note, warn

    settings = settings_from_args(args)
    now = _now(args.now)
    inputs = plan_inputs(args)
    for text in inputs.notes:
        warn(text)
    if args.manifests:
        return _print_manifests(args, settings, inputs, now)
    args.output = args.output or "table"
    plan = offline.plan(inputs, settings, now)
    for text in plan.warnings:
        warn(text)
    if args.output != "table":
        dump(plan.to_dict(), args.output)
        return EXIT_OK
    _print_tables(plan)
    for text in plan.notes:
        note(text)
    return EXIT_OK


def _print_manifests(args: argparse.Namespace, settings: Any, inputs: Any, now: Any) -> int:
    """What one pass of `adjuster run` would create now (`adjuster/offline.py` `manifests`), as YAML or JSON documents,
    and on stderr why pods get none."""
    from raybridge.adjuster import offline
    from raybridge.adjuster.decision.settings import RunSettings
    from raybridge.cli.render import dump_documents, note, warn
    from raybridge.errors import BadInput

    run = RunSettings(planner=settings, namespace=args.namespace, mode=args.mode, priority_class=args.priority_class,
                      placeholder_image=args.placeholder_image, provisioning_class=args.provisioning_class)
    problems = [p for p in run.problems() if p.startswith(("--namespace", "--mode", "--priority-class", "--placeholder-image",
                                                            "--provisioning-class", "adjuster run plans"))]
    if problems:
        raise BadInput(*problems)
    if args.output == "table":
        raise BadInput("--manifests prints objects: -o yaml or -o json")
    args.output = args.output or "yaml"
    preview = offline.manifests(inputs, run, now)
    for text in [*preview.plan.warnings, *preview.left_out()]:
        warn(text)
    for text in preview.plan.notes:
        note(text)
    dump_documents(list(preview.objects), args.output)
    return EXIT_OK


def _approximate(value: Any) -> str:
    """The exact decimal when there is a short one, else three places with a tilde (-o json has it exact)."""
    from raybridge.core.quantity import format_fraction

    text = format_fraction(value)
    return text if len(text) <= 8 and "/" not in text else f"~{float(value):.3f}"


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
        trimmed = "".join(f"; the placeholder of {group} trimmed from {planned} to {kept} GPUs" for group, planned, kept in plan.cap.trimmed)
        print(f"capped at {plan.cap.limit} GPUs: {plan.cap.requested} asked for, {plan.cap.cut_gpus} cut ({len(plan.cap.cut_pods)} pods wait){trimmed}")
    if plan.skipped:
        print("not pending: " + ", ".join(f"{n} {code}" for code, n in sorted(plan.skipped.items())))


# --- adjuster run ----------------------------------------------------------------------------------

def _bind_address(text: str) -> tuple[str, int]:
    from raybridge.adjuster.decision.settings import parse_bind_address

    try:
        return parse_bind_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _metrics_port(text: str) -> int:
    from raybridge.adjuster.decision.settings import parse_port

    try:
        return parse_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: The shared settings flags (above) whose defaults an environment variable may set for `run`.
_ENV_SETTINGS = ("scheduler-name", "grace-period", "memory-fraction", "max-gpus", "default-vendor", "node-gpus", "gpu-memory-label",
                 "autoscaler-reads-dra")
#: The cluster flags whose defaults an environment variable may set for `run`.
_ENV_CLUSTER = ("kubeconfig", "context", "namespace", "request-timeout")


def _register_run(commands: Any) -> None:
    from raybridge.adjuster.decision import consts
    from raybridge.adjuster.decision.settings import LOG_FORMATS, MODES
    from raybridge.adjuster.env import env_default, env_name

    p = commands.add_parser(
        "run",
        help="run the node-scale-adjuster in the cluster: placeholders for pending fractional-GPU pods",
        description="Watch pending GPU-sharing pods and keep whole-GPU placeholder pods that make the cluster "
        "autoscaler add the nodes they need. A flag named with an env variable below can also come from it (the flag wins).",
    )

    def env_of(name: str) -> str:
        return env_name(name) if name in _ENV_SETTINGS or name in _ENV_CLUSTER else ""

    add_settings_args(p, env=env_of)
    p.set_defaults(**{flag.replace("-", "_"): env_default(flag) for flag in _ENV_SETTINGS if env_default(flag) is not None})

    def flag(name: str, default: Any, help_text: str, shown: Any = None, **kwargs: Any) -> None:
        """A controller flag, its default (`shown` where the default is decided later) and its variable."""
        section.add_argument(f"--{name}", default=env_default(name, default),
                             help=described(help_text, shown if shown is not None else default, env_name(name)), **kwargs)

    section = p.add_argument_group("controller")
    flag("mode", "placeholder", "placeholder or provisioning-request", choices=MODES)
    flag("priority-class", consts.DEFAULT_PRIORITY_CLASS, "PriorityClass of the placeholders: below every workload, not below the autoscaler's cutoff")
    flag("expendable-pods-priority-cutoff", str(consts.DEFAULT_EXPENDABLE_CUTOFF), "the cluster autoscaler's flag of that name: "
         "placeholders below it never cause a scale-up, so a PriorityClass below it is refused",
         shown=f"{consts.DEFAULT_EXPENDABLE_CUTOFF}, the autoscaler's", type=_whole, metavar="PRIORITY")
    flag("placeholder-image", consts.DEFAULT_PLACEHOLDER_IMAGE, f"image of the placeholders: it must have /bin/true and /bin/sleep; a placeholder exits at once, or after {consts.KEEP_APART_SECONDS} s for replicas that must not share a host", metavar="IMAGE")
    flag("provision-timeout", _seconds_text(consts.DEFAULT_PROVISION_TIMEOUT_SECONDS), "seconds capacity a placeholder brought up counts for its pods before they must land", type=_seconds, metavar="SECONDS")
    flag("provisioning-class", consts.DEFAULT_PROVISIONING_CLASS, "--mode provisioning-request: the requests' class", metavar="CLASS")
    flag("failed-backoff", _seconds_text(consts.DEFAULT_FAILED_BACKOFF_SECONDS), "--mode provisioning-request: seconds a Failed request waits before it is asked for again", type=_seconds, metavar="SECONDS")
    flag("resync", _seconds_text(consts.DEFAULT_RESYNC_SECONDS), "seconds between reconciles without an event", type=_seconds, metavar="SECONDS")
    flag("debounce", _seconds_text(consts.DEFAULT_DEBOUNCE_SECONDS), "quiet seconds after an event before reconciling", type=_seconds, metavar="SECONDS")
    flag("batch-idle-duration", _seconds_text(consts.DEFAULT_BATCH_IDLE_SECONDS), "new placeholders wait while GPU-sharing pods "
         "the scheduler has not looked at yet exist, and until none has been created for this many seconds",
         type=_seconds, metavar="SECONDS")
    flag("batch-max-duration", _seconds_text(consts.DEFAULT_BATCH_MAX_SECONDS), "... but no longer than until a pod they are for has "
         "waited this many seconds (0: no waiting at all)", type=_seconds, metavar="SECONDS")
    flag("log-format", "text", "text or json", choices=LOG_FORMATS)
    flag("metrics-bind-address", None, "HOST:PORT of /metrics (and /healthz and /readyz): 127.0.0.1:8080 for this machine "
         "alone, :8080 for every interface, 0 for no server",
         shown=f":{consts.DEFAULT_METRICS_PORT} in a pod, {consts.LOOPBACK_HOST}:{consts.DEFAULT_METRICS_PORT} elsewhere",
         type=_bind_address, metavar="HOST:PORT")
    flag("metrics-port", None, "--metrics-bind-address on its default host (every interface in a pod, else 127.0.0.1) "
         "and this PORT (0: off)", shown="that of --metrics-bind-address", type=_metrics_port, metavar="PORT")
    flag("health-probe-bind-address", None, "HOST:PORT of /healthz and /readyz alone, for the kubelet's probes: a port "
         "no metrics client can fill; :8081 for every interface, 0 for none",
         shown=f":{consts.DEFAULT_PROBE_PORT} in a pod, 0 (none: nothing probes) elsewhere", type=_bind_address, metavar="HOST:PORT")
    section = p.add_argument_group("leader election")
    flag("leader-election", "true", "true or false: only the holder of the Lease acts", choices=("true", "false"))
    flag("lease-name", consts.DEFAULT_LEASE_NAME, "name of the coordination.k8s.io Lease", metavar="NAME")
    flag("lease-duration", str(consts.DEFAULT_LEASE_DURATION_SECONDS), "seconds a standby waits before taking over", type=_whole, metavar="SECONDS")
    flag("renew-deadline", str(consts.DEFAULT_RENEW_DEADLINE_SECONDS), "seconds the leader tries to renew before giving up", type=_whole, metavar="SECONDS")
    flag("retry-period", str(consts.DEFAULT_RETRY_PERIOD_SECONDS), "seconds between Lease attempts", type=_whole, metavar="SECONDS")
    flag("identity", "", "this replica's name in the Lease", shown="host name and a random suffix", metavar="NAME")
    add_cluster_args(
        p, namespace_help="namespace of the placeholders and the Lease", namespace_default=consts.DEFAULT_NAMESPACE,
        request_timeout_default=_seconds_text(consts.DEFAULT_REQUEST_TIMEOUT_SECONDS), env=env_of,
    )  # fmt: skip
    p.set_defaults(
        namespace=env_default("namespace", consts.DEFAULT_NAMESPACE),
        request_timeout=env_default("request-timeout", str(consts.DEFAULT_REQUEST_TIMEOUT_SECONDS)),
        kubeconfig=env_default("kubeconfig"),
        context=env_default("context"),
        handler=cmd_run,
    )


def _seconds_text(value: float) -> str:
    """300.0 -> '300', 0.1 -> '0.1': a default as a user would type it."""
    return f"{value:g}"


def run_settings_from_args(args: argparse.Namespace) -> Any:
    from raybridge.adjuster.decision import consts
    from raybridge.adjuster.decision.settings import RunSettings
    from raybridge.errors import BadInput
    from raybridge.kube.config import in_pod

    if args.metrics_bind_address is not None and args.metrics_port is not None:
        raise BadInput("give --metrics-bind-address or --metrics-port, not both (flags or RAYBRIDGE_ADJUSTER_ variables)")
    # In a pod, every interface of the pod's own network: the kubelet and Prometheus connect to the pod's address.
    # Elsewhere, this machine alone: nothing listens beyond loopback unless told to.
    pod = in_pod()
    default_host = consts.DEFAULT_METRICS_HOST if pod else consts.LOOPBACK_HOST
    if args.metrics_bind_address is not None:
        metrics_host, metrics_port = args.metrics_bind_address
    elif args.metrics_port is not None:
        metrics_host, metrics_port = default_host, args.metrics_port
    else:
        metrics_host, metrics_port = default_host, consts.DEFAULT_METRICS_PORT
    if args.health_probe_bind_address is not None:
        probe_host, probe_port = args.health_probe_bind_address
    else:
        probe_host, probe_port = consts.DEFAULT_PROBE_HOST, consts.DEFAULT_PROBE_PORT if pod else 0
    settings = RunSettings(
        planner=settings_from_args(args),
        namespace=args.namespace,
        mode=args.mode,
        priority_class=args.priority_class,
        expendable_cutoff=args.expendable_pods_priority_cutoff,
        placeholder_image=args.placeholder_image,
        provision_timeout=args.provision_timeout,
        provisioning_class=args.provisioning_class,
        failed_backoff=args.failed_backoff,
        resync=args.resync,
        debounce=args.debounce,
        batch_idle=args.batch_idle_duration,
        batch_max=args.batch_max_duration,
        request_timeout=args.request_timeout,
        kubeconfig=args.kubeconfig,
        log_format=args.log_format,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        probe_host=probe_host,
        probe_port=probe_port,
        leader_election=args.leader_election == "true",
        lease_name=args.lease_name,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        identity=args.identity,
    )
    problems = settings.problems()
    if problems:
        raise BadInput(*problems)
    return settings


def _setup_logging(log_format: str) -> None:
    import json
    import logging
    import sys

    class JsonFormatter(logging.Formatter):
        _standard = set(vars(logging.makeLogRecord({})))

        def format(self, record: logging.LogRecord) -> str:
            entry = {
                "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
                "level": record.levelname.lower(),
                "logger": record.name,
                "msg": record.getMessage(),
            }
            entry.update({k: v for k, v in vars(record).items() if k not in self._standard and k not in ("message", "asctime")})
            if record.exc_info:
                entry["error"] = self.formatException(record.exc_info).splitlines()[-1]
            return json.dumps(entry, default=str)

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    for name in ("raybridge.adjuster", "leaderelection"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _preflight(kube: Any, settings: Any) -> None:
    """The start-up checks (adjuster/preflight.py): said once, warned of, or refused (exit 2; unreachable: exit 3).

    Their failures are mapped as every call's (`kube.calls.api_call`): refusals and unreachable servers alike."""
    import logging

    from raybridge.adjuster.preflight import check, device_choices
    from raybridge.errors import BadInput
    from raybridge.kube.calls import api_call

    findings = api_call("the start-up checks", check, kube, mode=settings.mode, priority_class=settings.priority_class,
                        cutoff=settings.expendable_cutoff, request_timeout=settings.request_timeout,
                        namespace=settings.namespace)
    assert findings is not None  # api_call's None is for not_found_ok alone
    if findings.problems:
        raise BadInput(*findings.problems)
    log = logging.getLogger("raybridge.adjuster")
    planner = settings.planner
    for note in (*findings.notes, *device_choices(planner.gpu_memory_label, planner.autoscaler_reads_dra)):
        log.info(note)
    for warning in findings.warnings:
        log.warning(warning)


def cmd_run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from raybridge.adjuster.controller import Controller
    from raybridge.adjuster.metrics import EndpointServer, Metrics, metrics_server, probe_server
    from raybridge.adjuster.decision.settings import bind_address_text
    from raybridge.errors import BadInput
    from raybridge.kube.client import connect

    settings = run_settings_from_args(args)
    _setup_logging(settings.log_format)
    # The handler only records the signal: setting an Event there could deadlock on the Event's lock
    # if the signal lands while this thread holds it. The main thread polls and stops the controller
    # (installed first: a signal during the start-up checks stops the run as soon as it starts).
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    kube = connect(settings.kubeconfig, args.context, request_timeout=settings.request_timeout)
    _preflight(kube, settings)
    metrics = Metrics()
    controller = Controller(settings, kube, metrics)
    servers: list[EndpointServer] = []
    wanted: list[tuple[str, str, int, Callable[[str, int], EndpointServer]]] = [
        ("--metrics-bind-address", settings.metrics_host, settings.metrics_port,
         lambda host, port: metrics_server(metrics, controller.healthy, controller.ready, port, host)),
        ("--health-probe-bind-address", settings.probe_host, settings.probe_port,
         lambda host, port: probe_server(controller.healthy, controller.ready, port, host)),
    ]
    for flag, host, port, serve in wanted:
        if not port:
            continue
        try:
            servers.append(serve(host, port).start())
        except OSError as exc:
            for server in servers:
                server.stop()
            raise BadInput(f"{flag} {bind_address_text(host, port)}: {exc.strerror or exc}") from None

    failures: list[BaseException] = []

    def run() -> None:
        try:
            controller.run()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which reports it
            failures.append(exc)

    runner = threading.Thread(target=run, name="adjuster-controller", daemon=True)
    runner.start()
    try:
        while runner.is_alive() and not received:
            runner.join(0.2)
    finally:
        controller.stop.set()
        runner.join(30)
        for server in servers:
            server.stop()
        # The official leader election module has no cancel: its daemon thread goes on (renewing, or finding the
        # Lease released) and may write to stderr while the interpreter shuts down, which then aborts (SIGABRT,
        # exit -6). Nothing is logged after the controller has stopped, and the process ends without finalizing.
        logging.disable(logging.CRITICAL)
        end_process_without_finalizing()
    if failures:
        raise failures[0]
    return EXIT_OK
