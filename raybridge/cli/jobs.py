"""discover, plan, render, submit: the commands that size and run one job.

Turns flags into a spec and `SubmitOptions`, calls the services
(`raybridge.jobs`) and the pure preview path (`raybridge.jobs.decision.planning`),
and prints what they return. During `submit` it streams the job's logs to the
terminal and turns SIGTERM into the same clean-up as Ctrl-C.

Nothing heavy is imported at module level: `--help` must not load ray or
kubernetes. It decides nothing itself.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import replace
from typing import Any, Optional, Sequence

from raybridge.cli.args import DOCUMENT_FORMATS, add_cluster_args, add_entrypoint_usage, add_inventory_args, add_output_arg, cluster_target, orphan_seconds, seconds
from raybridge.kuberay.names import RAYCLUSTER_NAME_MAX, RAYJOB_NAME_MAX
from raybridge.errors import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK
from raybridge.core.printable import one_line


def register(sub: Any) -> None:
    p = sub.add_parser("discover", help="GPU inventory per node (cluster, node list file, Ray cluster or this machine)")
    add_inventory_args(p)
    p.add_argument("--address", dest="ray_address", metavar="ADDR", help="probe every node of this Ray cluster ('auto' for RAY_ADDRESS or the local one)")
    p.add_argument("--ray-address", dest="ray_address", help=argparse.SUPPRESS)  # the earlier name
    add_cluster_args(p)
    add_output_arg(p, "table")
    p.set_defaults(handler=cmd_discover)

    p = sub.add_parser("plan", help="size the worker group and print the decision")
    _spec_args(p)
    add_inventory_args(p)
    add_cluster_args(p)
    add_output_arg(p, "table")
    p.set_defaults(handler=cmd_plan, takes_entrypoint=True)

    p = sub.add_parser("render", help="print the manifests as YAML, ready for `kubectl apply -f -`")
    _spec_args(p)
    add_inventory_args(p)
    add_cluster_args(p)
    p.add_argument(
        "--submission-mode", choices=("InteractiveMode", "K8sJobMode"), default="InteractiveMode",
        help="InteractiveMode (default, what submit creates): raybridge submits the entrypoint; "
        "K8sJobMode: the RayJob runs by itself after `kubectl apply`",
    )  # fmt: skip
    add_output_arg(p, "yaml", DOCUMENT_FORMATS)
    p.set_defaults(handler=cmd_render, takes_entrypoint=True)

    p = sub.add_parser("submit", help="run a Ray job end to end: size, admit, submit, stream logs, clean up")
    _spec_args(p)
    add_inventory_args(p)
    add_cluster_args(p)
    g = p.add_argument_group("submission")
    g.add_argument("--backend", choices=("local", "kubernetes"), help="default: kubernetes when a kubeconfig or in-cluster config exists, else local")
    g.add_argument("--address", help="local backend: an existing Ray cluster (default: $RAY_ADDRESS, else a private local head)")
    g.add_argument("--dashboard-address", help="kubernetes backend: reach the Ray dashboard here instead of the head service or a port-forward")
    g.add_argument(
        "--timeout", type=seconds, default=None, metavar="SECONDS",
        help="give up waiting for admission and the cluster (locally: the private head's start and the submission) after this long (default: 1800)",
    )  # fmt: skip
    g.add_argument(
        "--orphan-timeout", type=orphan_seconds, default=None, metavar="SECONDS",
        help="kubernetes: if raybridge dies (or loses the cluster), its RayJob fails and frees its GPUs and quota "
        "within this long; renewed while raybridge runs, so it never cuts a run short (default: 1800)",
    )  # fmt: skip
    g.add_argument("--keep", action="store_true", help="keep the RayJob/RayCluster after the run")
    g.add_argument(
        "--no-wait", action="store_true",
        help="kubernetes: return once the RayJob exists; it runs by itself when Kueue admits it, and again after each "
        "readmission (K8sJobMode; a local working dir travels in a ConfigMap, at most 1 MiB zipped)",
    )  # fmt: skip
    g.add_argument("--submission-id", help="Ray submission id (default: generated)")
    g.add_argument("--dry-run", action="store_true", help="print what would be created and exit")
    add_output_arg(p, "table")
    p.set_defaults(handler=cmd_submit, takes_entrypoint=True)
    for name in ("plan", "render", "submit"):
        add_entrypoint_usage(sub.choices[name])


def _spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", nargs="?", metavar="SPEC", help="job spec YAML file (flags override its fields)")
    g = p.add_argument_group("job spec (flags win over the file)")
    g.add_argument("--name", help=f"object name (DNS-1035; RayJob <= {RAYJOB_NAME_MAX} characters, RayCluster <= {RAYCLUSTER_NAME_MAX})")
    g.add_argument("--entrypoint", help="command to run (or give it after --)")
    g.add_argument("--working-dir", help="local directory uploaded as the job's working_dir")
    g.add_argument("--image", help="container image (default: per GPU vendor)")
    g.add_argument("--gpus", metavar="N", help="total GPUs")
    g.add_argument("--replicas", metavar="N", help="Ray worker replicas (or Deployment replicas)")
    g.add_argument("--gpus-per-replica", metavar="N", help="GPUs per replica; a fraction below 1 uses KAI GPU sharing")
    g.add_argument("--gpu-vendor", metavar="V", help="amd or nvidia (default: the vendor present)")
    g.add_argument("--gpu-model", metavar="M", help="only GPUs of this model (e.g. H100, MI300X)")
    g.add_argument("--gpu-memory", metavar="Q", help="only GPUs with at least this memory each (e.g. 80Gi)")
    g.add_argument("--no-ray", action="store_true", default=None, help="a plain Kubernetes workload (with --kind job|service)")
    g.add_argument("--kind", help="RayJob (default) or RayCluster; with --no-ray: job or service")
    g.add_argument("--queue", help="Kueue LocalQueue (KAI queue for fractional GPUs)")
    g.add_argument("--priority-class", help="Kueue WorkloadPriorityClass")


# --- helpers ----------------------------------------------------------------------------------


def _spec_from_args(args: argparse.Namespace, purpose: str, submission_id: Optional[str] = None, checked: bool = True) -> Any:
    """The spec from the file and flags, refused (exit 2) unless it can serve `purpose` (`core.spec.Purpose`);
    `checked=False` leaves that to the caller (submit's `prepare_submit` checks it, once)."""
    from raybridge.core.runtime_env import is_uri
    from raybridge.jobs.spec_file import load_spec
    from raybridge.jobs.options import check_runnable

    entrypoint = getattr(args, "entrypoint_after_dashdash", None)
    if entrypoint and args.entrypoint:
        from raybridge.errors import BadInput

        raise BadInput("give the entrypoint either with --entrypoint or after --, not both")
    overrides = {
        "name": args.name,
        "namespace": getattr(args, "namespace", None),
        "entrypoint": entrypoint or args.entrypoint,
        "working_dir": os.path.abspath(args.working_dir) if args.working_dir and not is_uri(args.working_dir) else args.working_dir,
        "image": args.image,
        "gpus": args.gpus,
        "replicas": args.replicas,
        "gpus_per_replica": args.gpus_per_replica,
        "gpu_vendor": args.gpu_vendor,
        "gpu_model": args.gpu_model,
        "gpu_memory": args.gpu_memory,
        "ray": False if args.no_ray else None,
        "kind": args.kind,
        "queue": args.queue,
        "priority_class": args.priority_class,
    }
    spec = load_spec(args.spec, overrides)
    if checked:
        check_runnable(spec, submission_id, purpose)
    return spec


def _inventory(args: argparse.Namespace, spec: Any = None) -> Any:
    from raybridge.jobs.discovery import discover_inventory
    from raybridge.jobs.preview import without_library_notes

    inventory = discover_inventory(
        nodes_file=args.nodes,
        pods_file=args.pods,
        ray_address=getattr(args, "ray_address", None),
        cluster=cluster_target(args),
        tolerations=spec.tolerations if spec is not None else (),
    )
    return without_library_notes(inventory)


def _print_warnings(decision: Any, more: Sequence[str] = ()) -> list[str]:
    """The decision's notes and warnings and `more` warnings on stderr; returns every warning said (for -o json)."""
    from raybridge.cli.render import note, warn

    for text in decision.notes:
        note(text)
    warnings = [*decision.warnings, *more]
    for text in warnings:
        warn(text)
    return warnings


def _namespace(args: argparse.Namespace, spec: Any) -> str:
    """-n (or the spec's namespace), else the kubeconfig context's, else `default`: what submit would use."""
    from raybridge.kube.target import ClusterTarget

    return ClusterTarget(args.kubeconfig, args.context, spec.namespace or args.namespace).resolved_namespace()


# --- discover, plan, render -----------------------------------------------------------------


def _unused_discover_flags(args: argparse.Namespace) -> list[str]:
    """Cluster flags the inventory source never reads: said, not silently dropped."""
    from raybridge.jobs.discovery import choose_inventory_source, unused_cluster_flags

    source = choose_inventory_source(nodes_file=args.nodes, pods_file=args.pods, ray_address=args.ray_address, kubeconfig=args.kubeconfig)
    given = {
        "--namespace": bool(args.namespace),
        "--kubeconfig": bool(args.kubeconfig),
        "--context": bool(args.context),
        "--request-timeout": args.request_timeout is not None,
    }
    unused, why = unused_cluster_flags(source, given)
    return [f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} ignored: {why}"] if unused else []


def cmd_discover(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, note, table, warn

    inventory = _inventory(args)
    warnings = [*_unused_discover_flags(args), *inventory.warnings]
    for text in warnings:
        warn(text)
    if args.output != "table":
        dump({**inventory.to_dict(), "warnings": warnings}, args.output)
        return EXIT_OK
    rows = []
    # Where the GPUs come from is shown once a node publishes any as DRA devices (a device-plugin cluster's table is unchanged).
    with_source = any("dra" in n.sources for n in inventory.nodes)
    for n in inventory.nodes:
        memory = f"{n.memory_mib} MiB" if n.memory_mib else None
        state = "yes" if n.eligible else "no: " + ", ".join(n.reasons)
        row = (n.name, n.vendor or "none", n.gpus, n.free, n.model, memory, state)
        rows.append(row[:3] + (_source_shown(n.sources, n.device_class),) + row[3:] if with_source else row)
    columns = ("NODE", "VENDOR", "GPUS", "FREE", "MODEL", "MEMORY/GPU", "SCHEDULABLE")
    table(f"GPU inventory ({inventory.source})", columns[:3] + ("SOURCE",) + columns[3:] if with_source else columns, rows)
    for vendor, total in inventory.vendors(eligible_only=False).items():
        cap = inventory.capacity(vendor)
        nodes = f"{cap.nodes} node{'s' if cap.nodes != 1 else ''}"
        print(f"{one_line(vendor)}: {cap.total} schedulable GPUs on {nodes} (smallest node {cap.min_per_node}, largest {cap.max_per_node}); {total} in all")
    for text in inventory.notes:
        note(text)
    return EXIT_OK


def _source_shown(sources: tuple[str, ...], device_class: Optional[str]) -> Optional[str]:
    """Where a node's GPUs come from, in the inventory table: "device plugin", "DRA (class gpu.nvidia.com)", or both."""
    shown = ["device plugin" if s == "device-plugin" else f"DRA (class {device_class or 'none'})" for s in sources]
    return " + ".join(shown) or None


def cmd_plan(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, table
    from raybridge.jobs.decision.planning import plan_job
    from raybridge.jobs.preview import unpinned_image_warnings

    spec = _spec_from_args(args, "size")
    decision = plan_job(spec, _inventory(args, spec))
    data = decision.to_dict()
    data["warnings"] = _print_warnings(decision, unpinned_image_warnings(spec, decision))
    if args.output == "table":
        rows = [(k, v) for k, v in data.items() if k not in ("warnings", "notes")]
        table("Sizing decision", ("FIELD", "VALUE"), rows)
    else:
        dump(data, args.output)
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump
    from raybridge.jobapi.ray_import import installed_ray_version, local_python
    from raybridge.jobs.decision.planning import DEFAULT_RENDER_NAME, plan_job, render_job
    from raybridge.jobs.preview import unpinned_image_warnings

    spec = _spec_from_args(args, "render")
    decision = plan_job(spec, _inventory(args, spec))
    _print_warnings(decision, [*_queue_of_another_namespace(args, spec), *unpinned_image_warnings(spec, decision)])
    _say_where_the_entrypoint_goes(spec)
    objects = render_job(
        spec, decision, name=spec.name or DEFAULT_RENDER_NAME, namespace=_namespace(args, spec), submission_mode=args.submission_mode,
        ray_version=installed_ray_version(), python=local_python(),
    )
    _say_what_it_is_for(objects)
    if args.output == "json":
        dump({"apiVersion": "v1", "kind": "List", "items": objects}, "json")
    else:
        from raybridge.jobs.decision.manifests import to_yaml

        sys.stdout.write(to_yaml(objects))
    return EXIT_OK


def _queue_of_another_namespace(args: argparse.Namespace, spec: Any) -> list[str]:
    """-n moved the job out of the spec's namespace while the spec's queue (a namespaced LocalQueue) stayed."""
    from raybridge.jobs.spec_file import load_spec

    if not (args.spec and args.namespace and spec.queue and not args.queue):
        return []
    written_for = load_spec(args.spec).namespace
    if not written_for or written_for == args.namespace:
        return []
    return [
        f"the spec's queue {spec.queue} is a LocalQueue of namespace {written_for}; -n {args.namespace} renders the job "
        f"into {args.namespace}, where Kueue looks for a LocalQueue {spec.queue} (--queue names another)"
    ]


def _say_where_the_entrypoint_goes(spec: Any) -> None:
    from raybridge.cli.render import note
    from raybridge.jobs.decision.spec import entrypoint_note

    text = entrypoint_note(spec)
    if text:
        note(text)


def _say_what_it_is_for(objects: list[dict[str, Any]]) -> None:
    from raybridge.cli.render import note

    for obj in objects:
        spec = obj.get("spec") or {}
        mode = spec.get("submissionMode")
        if obj.get("kind") == "RayJob" and mode == "InteractiveMode":
            bound = spec.get("activeDeadlineSeconds")
            note(
                "this RayJob is what `raybridge submit` creates, in InteractiveMode: KubeRay starts its cluster and waits "
                "for the entrypoint, which `raybridge submit` submits"
                + (f"; applied alone with `kubectl apply`, nothing submits it and it fails after {bound}s "
                   "(activeDeadlineSeconds: the orphan bound `raybridge submit` renews while it runs)" if bound else "")
                + "; for a RayJob that runs by itself, render with --submission-mode K8sJobMode"
            )
        elif obj.get("kind") == "RayJob":
            note("this RayJob runs by itself after `kubectl apply`: KubeRay's submitter Job submits the entrypoint")
            if "working_dir" not in str(spec.get("runtimeEnvYAML") or ""):
                note(
                    f"no working dir travels with it: {str(spec.get('entrypoint') or '').strip()!r} runs in the image's own "
                    "working directory, so the image must hold what it names (or give workingDir a URI: s3://, gs://, https://)"
                )
        elif obj.get("kind") == "RayCluster":
            note("this RayCluster holds its Kueue quota until it is deleted")


# --- submit -----------------------------------------------------------------------------------


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt()


def _options_from_args(args: argparse.Namespace) -> Any:
    from raybridge.cli.render import progress
    from raybridge.kube.config import DEFAULT_REQUEST_TIMEOUT
    from raybridge.jobs import DEFAULT_TIMEOUT, SubmitOptions

    return SubmitOptions(
        backend=args.backend,
        address=args.address,
        dashboard_address=args.dashboard_address,
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespace=args.namespace,
        nodes_file=args.nodes,
        pods_file=args.pods,
        timeout=args.timeout if args.timeout is not None else DEFAULT_TIMEOUT,
        keep=args.keep or args.no_wait,
        submission_id=args.submission_id,
        request_timeout=args.request_timeout or DEFAULT_REQUEST_TIMEOUT,
        progress=progress,
        **({"orphan_bound": args.orphan_timeout} if args.orphan_timeout is not None else {}),
    )


def _check_flags_for_backend(args: argparse.Namespace, request: Any) -> None:
    """Refuse a flag the chosen backend cannot honour; warn about one it would silently ignore."""
    from raybridge.cli.render import warn
    from raybridge.errors import BadInput
    from raybridge.jobs.options import ray_address

    options = request.options
    if request.backend == "kubernetes":
        if args.address:
            raise BadInput("--address is for the local backend (a Ray cluster to submit to); on Kubernetes use --dashboard-address")
        return
    if args.dashboard_address:
        raise BadInput("--dashboard-address is for the kubernetes backend; locally use --address")
    address = ray_address(args.address)
    checked = bool(address and address != "auto" and not args.dry_run)
    if checked:
        # Ray itself retries a GCS address that refuses or never answers for about 40 s, writing its C++
        # warnings to stderr: --request-timeout bounds this check instead.
        from raybridge.gpu.ray_probe import check_reachable

        check_reachable(address, options.request_timeout)
    ignored = [  # flags only: a spec written for a cluster runs locally as it is
        flag
        for flag, given in (
            ("--namespace", args.namespace),
            ("--kubeconfig", args.kubeconfig),
            ("--context", args.context),
            ("--request-timeout", args.request_timeout is not None and not checked),
            ("--queue", args.queue),
            ("--priority-class", args.priority_class),
            ("--nodes", args.nodes),
            ("--pods", args.pods),
        )
        if given
    ]
    if ignored:
        warn(f"{', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} ignored by the local backend (no Kubernetes, no Kueue)")
    if args.keep and not ray_address(args.address):
        warn("--keep is ignored: the private local head ends with this command (start one with `ray start --head` to keep it)")


def _dry_run(request: Any, output: str, reason: Optional[str] = None) -> int:
    from raybridge.cli.render import dump, progress, warn
    from raybridge.jobs.preview import preview_submit

    progress("dry run, nothing is created")  # the backend and why it was chosen are in the document, said once
    preview = preview_submit(request, reason)
    for text in preview.warnings:
        warn(text)
    for line in preview.upload_lines:
        progress(line)
    dump(preview.document, "json" if output == "json" else "yaml")
    return EXIT_OK


def cmd_submit(args: argparse.Namespace) -> int:
    from raybridge.cli.render import progress
    from raybridge.jobs.options import ray_address
    from raybridge.jobs.service import launch, prepare_submit
    from raybridge.noise import JobOutput

    spec = _spec_from_args(args, "submit", args.submission_id, checked=False)  # prepare_submit checks it
    cluster_target(args)  # a --kubeconfig that does not exist is exit 2 whatever the backend; missing KUBECONFIG files are said
    options = _options_from_args(args)
    reason = None
    if args.dry_run and (args.nodes or args.pods) and not (args.backend or ray_address(args.address)):
        # The nodes of a cluster were given: preview what would be created on them, as plan and render do.
        options, reason = replace(options, backend="kubernetes"), f"{'--nodes' if args.nodes else '--pods'} describes a cluster"
    # The spec checked, what it uploads (refusing what Ray would refuse) and the backend: decided once, here.
    request = prepare_submit(spec, options)
    _check_flags_for_backend(args, request)
    if args.dry_run:
        return _dry_run(request, args.output, reason)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    # A process started with SIGINT ignored (a parent that ignores it: a test runner's worker, `nohup`) keeps
    # it ignored in Python, and Ctrl-C would then never stop the job: submit always handles it.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    handle = None
    machine = args.output in ("json", "yaml")
    log_stream = sys.stderr if machine else sys.stdout
    try:
        if spec.resolved_kind == "RayCluster" and spec.ray:
            return _create_cluster(request, args.output)
        if args.no_wait and request.backend == "kubernetes":
            return _queue(request, args.output)
        handle = launch(request)
        if args.no_wait:
            if handle.owns_private_head:
                progress("--no-wait with a private local head: the head ends with this command, so waiting anyway")
            else:
                _report(handle, "SUBMITTED", args.output)
                for note in handle.detach():
                    progress(f"note: {note}")
                return EXIT_OK
        progress(f"streaming logs of {handle.submission_id} (Ctrl-C stops the job and cleans up)")
        output = JobOutput(lambda text: (log_stream.write(text), log_stream.flush()), plain=not log_stream.isatty(), entrypoint=handle.entrypoint)
        try:
            status = handle.stream_logs(output, raw=True)  # JobOutput filters as -v says
        finally:
            output.close()
        _report(handle, status, args.output, handle.outcome() if status != "SUCCEEDED" else None)
        return EXIT_OK if status == "SUCCEEDED" else EXIT_JOB_FAILED
    except KeyboardInterrupt:
        progress("interrupted: stopping the job and cleaning up")
        if handle is not None:
            handle.stop()
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        if handle is not None:
            handle.close()


def _queue(request: Any, output: str) -> int:
    """`--no-wait` on Kubernetes: the RayJob is created to run by itself (jobs/queued.py); said, then exit 0."""
    from raybridge.cli.render import progress
    from raybridge.jobs.service import queue

    queued = queue(request)
    for text in queued.notes:
        progress(text if text.startswith("orphan protection") or text.startswith("working dir") else f"note: {text}")
    where = f"{queued.name} -n {queued.namespace}"
    progress(f"follow it with `raybridge status {where}` and `raybridge logs {where} -f`; `raybridge delete {where}` removes it")
    if output in ("json", "yaml"):
        _report(queued, "SUBMITTED", output)
    else:
        progress(f"job {queued.submission_id} queued")
    return EXIT_OK


def _create_cluster(request: Any, output: str) -> int:
    from raybridge.cli.render import dump, progress
    from raybridge.errors import BadInput

    if request.backend != "kubernetes":
        raise BadInput("kind RayCluster needs the kubernetes backend; locally, start one with `ray start --head`")
    request.options.progress(f"backend: kubernetes ({request.why})")
    from raybridge.jobs.kubernetes import create_cluster

    info = create_cluster(request.spec, request.options)
    if output in ("json", "yaml"):
        dump(info, output)
    else:
        progress(f"RayCluster {info['namespace']}/{info['name']} is {info['state']}; reach it with:")
        for line in info["reach"]:
            print(f"  {one_line(line)}")
    return EXIT_OK


def _report(handle: Any, status: str, output: str, outcome: Any = None) -> None:
    from raybridge.cli.render import dump, progress

    result = {
        "name": handle.name,
        "namespace": handle.namespace,
        "backend": handle.backend,
        "submissionId": handle.submission_id,
        "status": status,
        "dashboard": handle.dashboard_url,
        "allocation": handle.decision.to_dict(),
    }
    if outcome is not None:
        result["message"] = outcome.message
        result["exitCode"] = outcome.exit_code
    if output in ("json", "yaml"):
        dump(result, output)
    else:
        progress(f"job {handle.submission_id} {outcome.describe() if outcome is not None else status.lower()}")
