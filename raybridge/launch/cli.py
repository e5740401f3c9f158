"""The command-line shell around launching: submit and the lifecycle commands.

Turns parsed flags into `SubmitOptions`, streams logs to the terminal, turns
SIGTERM into the same clean-up as Ctrl-C, and returns the exit status. The
work itself is in `raybridge.launch` (submit) and `raybridge.launch.lifecycle`
(status, logs, stop, delete, list).
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any, Optional

from raybridge.core.consts import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK
from raybridge.core.spec import JobSpec
from raybridge.launch import DEFAULT_TIMEOUT, JobHandle, SubmitOptions, choose_backend, submit
from raybridge.output import dump, progress



def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt()


def options_from_args(args: argparse.Namespace) -> SubmitOptions:
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
        progress=progress,
    )


def _dry_run(spec: JobSpec, options: SubmitOptions, output: str) -> int:
    backend, why = choose_backend(options)
    progress(f"backend: {backend} ({why}); dry run, nothing is created")
    from raybridge.discovery import discover_inventory
    from raybridge.planning import DEFAULT_RENDER_NAME, plan_job, render_job

    if backend == "local" and not options.nodes_file:
        from raybridge.gpu import local_inventory

        inventory = local_inventory()
    else:
        inventory = discover_inventory(
            nodes_file=options.nodes_file, pods_file=options.pods_file, kubeconfig=options.kubeconfig,
            context=options.context, tolerations=spec.tolerations, local_fallback=False,
        )  # fmt: skip
    decision = plan_job(spec, inventory)
    result: dict[str, Any] = {"backend": backend, "plan": decision.to_dict(), "entrypoint": spec.entrypoint}
    if backend == "kubernetes":
        namespace = spec.namespace or options.namespace or "default"
        result["objects"] = render_job(spec, decision, name=spec.name or DEFAULT_RENDER_NAME, namespace=namespace)
    dump(result, "json" if output == "json" else "yaml")
    return EXIT_OK


def run_submit(args: argparse.Namespace, spec: JobSpec) -> int:
    options = options_from_args(args)
    if args.dry_run:
        return _dry_run(spec, options, args.output)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    handle: Optional[JobHandle] = None
    machine = args.output in ("json", "yaml")
    log_stream = sys.stderr if machine else sys.stdout
    try:
        if spec.resolved_kind == "RayCluster" and spec.ray:
            return _create_cluster(spec, options, args.output)
        handle = submit(spec, options)
        if args.no_wait:
            if handle.owns_private_head:
                progress("--no-wait with a private local head: the head ends with this command, so waiting anyway")
            else:
                _report(handle, "SUBMITTED", args.output)
                handle.detach()
                return EXIT_OK
        progress(f"streaming logs of {handle.submission_id} (Ctrl-C stops the job and cleans up)")
        status = handle.stream_logs(lambda chunk: (log_stream.write(chunk), log_stream.flush()))
        _report(handle, status, args.output)
        return EXIT_OK if status == "SUCCEEDED" else EXIT_JOB_FAILED
    except KeyboardInterrupt:
        progress("interrupted: stopping the job and cleaning up")
        if handle is not None:
            handle.stop()
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
        if handle is not None:
            handle.close()


def _create_cluster(spec: JobSpec, options: SubmitOptions, output: str) -> int:
    backend, why = choose_backend(options)
    if backend != "kubernetes":
        from raybridge.errors import BadInput

        raise BadInput("kind RayCluster needs the kubernetes backend; locally, start one with `ray start --head`")
    options.progress(f"backend: kubernetes ({why})")
    from raybridge.launch.kube_run import create_cluster

    info = create_cluster(spec, options)
    if output in ("json", "yaml"):
        dump(info, output)
    else:
        progress(f"RayCluster {info['namespace']}/{info['name']} is {info['state']}; reach it with:")
        for line in info["reach"]:
            print(f"  {line}")
    return EXIT_OK


def _report(handle: JobHandle, status: str, output: str) -> None:
    result = {
        "name": handle.name,
        "namespace": handle.namespace,
        "backend": handle.backend,
        "submissionId": handle.submission_id,
        "status": status,
        "dashboard": handle.dashboard_url,
        "allocation": handle.decision.to_dict(),
    }
    if output in ("json", "yaml"):
        dump(result, output)
    else:
        progress(f"job {handle.submission_id} {status.lower()}")


def run_status(args: argparse.Namespace) -> int:
    from raybridge.launch.lifecycle import job_status

    report = job_status(args)
    if args.output == "table":
        for line in report["explanation"]:
            print(line)
    else:
        dump(report, args.output)
    return EXIT_OK


def run_logs(args: argparse.Namespace) -> int:
    from raybridge.launch.lifecycle import job_logs

    return job_logs(args)


def run_stop(args: argparse.Namespace) -> int:
    from raybridge.launch.lifecycle import stop_job

    return stop_job(args)


def run_delete(args: argparse.Namespace) -> int:
    from raybridge.launch.lifecycle import delete_job

    return delete_job(args)


def run_list(args: argparse.Namespace) -> int:
    from raybridge.launch.lifecycle import list_jobs

    return list_jobs(args)
