"""status, logs, stop, delete, list: the commands about jobs raybridge already created.

Connects with the flags' kubeconfig, context and namespace, calls
`raybridge.jobs.lifecycle`, and prints what it returns. Without a cluster to
ask it says where a local run's job went (it ended with its `submit`): the
local backend keeps no record of its jobs. Imports ray and
kubernetes only inside the handlers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from raybridge.cli.args import add_cluster_args, add_output_arg, cluster_target, seconds
from raybridge.errors import EXIT_OK
from raybridge.core.printable import one_line


def register(sub: Any) -> None:
    handlers = {"status": cmd_status, "logs": cmd_logs, "stop": cmd_stop, "delete": cmd_delete}  # `dashboard`: below
    for name, helptext in (
        ("status", "status of a job raybridge created, with why it is pending"),
        ("logs", "the Ray job's logs"),
        ("stop", "stop the Ray job (the objects stay until delete)"),
        ("delete", "delete the RayJob/RayCluster and everything it owns"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("name", metavar="NAME")
        add_cluster_args(p)
        if name in ("logs", "stop"):
            p.add_argument("--dashboard-address", help="reach the Ray dashboard here instead of the head service or a port-forward")
        if name == "logs":
            p.add_argument("-f", "--follow", action="store_true", help="stream until the job ends (a queued job: once it starts)")
            p.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                           help="with -f: how long to wait for a job that has not started (default: 1800)")
        if name == "status":
            add_output_arg(p, "table")
        p.set_defaults(handler=handlers[name])

    p = sub.add_parser(
        "dashboard", help="forward a job's Ray dashboard to this machine and say how the plain Ray CLI reaches it there",
        description="Forward 127.0.0.1:PORT to the Ray dashboard of a RayJob's (or RayCluster's) cluster, through the API "
        "server as `kubectl port-forward` does, until Ctrl-C; prints how `ray job status|logs|submit` and a browser reach "
        "it. Listens on loopback only.",
    )  # fmt: skip
    p.add_argument("name", metavar="NAME")
    p.add_argument("--port", type=int, default=8265, help="local port (default: 8265, the dashboard's own; 0: any free one)")
    add_cluster_args(p)
    p.set_defaults(handler=cmd_dashboard)

    p = sub.add_parser("list", help="jobs and clusters raybridge created")
    add_cluster_args(p)
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    add_output_arg(p, "table")
    p.set_defaults(handler=cmd_list)


#: What the user of a local run hears when there is no cluster to ask: where that run's job went.
LOCAL_JOBS = (
    "these commands read the jobs raybridge created on Kubernetes; a local run's job lives only while its `submit` "
    "runs (its private Ray head ends with it): to keep one, start a Ray cluster (`ray start --head`), submit with "
    "--address, and follow the job with `ray job status` and `ray job logs`"
)


def _kube(args: argparse.Namespace) -> Any:
    """The cluster of the flags; without any (no kubeconfig, not in a pod), exit 3 that also says where local jobs went."""
    from raybridge.errors import ClusterUnreachable

    target = cluster_target(args)
    try:
        return target.connect()
    except ClusterUnreachable as exc:
        resolved = target.resolve()
        if resolved.files or resolved.in_cluster:
            raise
        raise ClusterUnreachable(f"{'; '.join(exc.problems)}; {LOCAL_JOBS}") from None


def cmd_status(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump
    from raybridge.jobs.lifecycle import job_status

    report = job_status(_kube(args), args.name)
    if args.output == "table":
        for line in report["explanation"]:
            print(one_line(line))
    else:
        dump(report, args.output)
    return EXIT_OK


def cmd_logs(args: argparse.Namespace) -> int:
    from raybridge.cli.render import progress
    from raybridge.jobs.lifecycle import job_logs

    from raybridge.noise import JobOutput

    output = JobOutput(lambda text: (sys.stdout.write(text), sys.stdout.flush()), plain=not sys.stdout.isatty())
    try:
        job_logs(
            _kube(args), args.name, output, follow=args.follow, dashboard_address=args.dashboard_address, progress=progress,
            entrypoint_seen=output.expect_entrypoint, **({"timeout": args.timeout} if args.timeout is not None else {}),
        )  # fmt: skip
    finally:
        output.close()
    return EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    from raybridge.cli.render import progress
    from raybridge.jobs.lifecycle import stop_job

    result = stop_job(_kube(args), args.name, dashboard_address=args.dashboard_address, progress=progress)
    ended = f" ({result['jobStatus']})" if result.get("jobStatus") else ""
    progress(f"{'stopped' if result['stopped'] else 'already ended:'} Ray job {result['jobId']} of RayJob {args.name}{ended}")
    return EXIT_OK


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Forward, say how to use it, and hold the forward until Ctrl-C or SIGTERM (then exit 0: that is how it ends)."""
    import shlex
    import signal
    import threading

    from raybridge.cli.render import progress
    from raybridge.errors import BadInput
    from raybridge.jobs.lifecycle import forward_dashboard

    if not 0 <= args.port <= 65535:
        raise BadInput(f"--port: {args.port} is not a port (0 to 65535)")
    kube = _kube(args)
    opened = forward_dashboard(kube, args.name, args.port)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        where = f"{opened.kind} {opened.namespace}/{opened.name}"
        progress(f"forwarding {opened.url} -> pod {opened.pod}:8265, the Ray dashboard of {where} (Ctrl-C ends it)")
        print(f"dashboard: {opened.url}")
        if opened.token_secret:
            secret = shlex.quote(opened.token_secret)
            print(f"the cluster demands its token: export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=\"$(kubectl get secret {secret} -n "
                  f"{shlex.quote(opened.namespace)} -o jsonpath='{{.data.auth_token}}' | base64 -d)\"")
        job = shlex.quote(opened.job_id) if opened.job_id else "<submission id>"
        for line in (f"ray job status --address {opened.url} {job}", f"ray job logs --address {opened.url} --follow {job}",
                     f"ray job list --address {opened.url}", f"ray job submit --address {opened.url} --working-dir . -- python my_script.py"):
            print(f"  {line}")
        sys.stdout.flush()
        stop.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        opened.close()
    progress("forward ended")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    from raybridge.cli.render import progress
    from raybridge.jobs.lifecycle import delete_job

    delete_job(_kube(args), args.name, progress)
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from raybridge.cli.render import dump, table
    from raybridge.jobs.lifecycle import list_jobs

    kube = _kube(args)
    rows = list_jobs(kube, all_namespaces=args.all_namespaces)
    if args.output != "table":
        dump(rows, args.output)
        return EXIT_OK
    where = "in any namespace" if args.all_namespaces else f"in {kube.namespace} namespace"
    table(
        None, ("KIND", "NAMESPACE", "NAME", "QUEUE", "STATE", "RAY JOB", "CREATED"), [tuple(r.values()) for r in rows],
        empty=f"No resources found {where}.",
    )  # fmt: skip
    return EXIT_OK
