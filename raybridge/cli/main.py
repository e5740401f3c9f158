"""`python -m raybridge ...`: the parser, built from a table of command groups, and the dispatch.

Each group module (`COMMAND_GROUPS`) adds its parsers with `register(sub)`
and sets `handler(args) -> exit status` on each. `main` runs the handler
and maps raybridge errors onto exit statuses (0 done, 1 job failed or
stopped, 2 bad input, 3 cluster unreachable or not admitted in time, 130
interrupted). Nothing heavy is imported here or by the group modules at
import time, so `--help` answers at once; a command line that names a
command builds (and imports) only the parsers of that command's group.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Callable, Optional, Sequence

from raybridge.cli.args import Parser
from raybridge.cli.process import ending_without_finalizing
from raybridge.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK

#: The command groups, in the order `--help` lists them.
COMMAND_GROUPS: tuple[str, ...] = (
    "raybridge.cli.jobs",
    "raybridge.cli.lifecycle",
    "raybridge.cli.queues",
    "raybridge.cli.adjuster",
    "raybridge.cli.explain",
    "raybridge.cli.check",
    "raybridge.cli.completion",
)

#: The top-level commands each group module registers, so that a command line naming one builds
#: only that group's parsers (start-up time); anything else builds them all.
COMMANDS_OF_GROUP: dict[str, tuple[str, ...]] = {
    "raybridge.cli.jobs": ("discover", "plan", "render", "submit"),
    "raybridge.cli.lifecycle": ("status", "logs", "stop", "delete", "dashboard", "list"),
    "raybridge.cli.queues": ("queues",),
    "raybridge.cli.adjuster": ("adjuster",),
    "raybridge.cli.explain": ("explain",),
    "raybridge.cli.check": ("check",),
    "raybridge.cli.completion": ("completion",),
}


def _groups_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The group modules to register: the one that owns the command argv names first, else all."""
    command = argv[0] if argv else ""
    for module, commands in COMMANDS_OF_GROUP.items():
        if command in commands:
            return (module,)
    return COMMAND_GROUPS


#: The name the package installs for kubectl to find raybridge as a plugin (`kubectl raybridge ...`).
KUBECTL_PLUGIN = "kubectl-raybridge"


def program_name() -> str:
    """`kubectl raybridge` when run as the kubectl plugin, else `raybridge`: what usage and errors call it."""
    return "kubectl raybridge" if os.path.basename(sys.argv[0] or "") == KUBECTL_PLUGIN else "raybridge"


def build_parser(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole parser, or (given the command line) only the parsers of the group it names."""
    parser = Parser(
        prog=prog or program_name(),
        description="Run Ray jobs on Kubernetes GPU clusters (AMD and NVIDIA) through KubeRay and Kueue, or on a local Ray.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="also show Ray's and the clients' own logs and warnings (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMAND_GROUPS if argv is None else _groups_for(argv):
        importlib.import_module(module).register(sub)
    return parser


def _split_entrypoint(argv: list[str]) -> tuple[list[str], Optional[str]]:
    """Everything after the first `--` is the entrypoint command."""
    if "--" not in argv:
        return argv, None
    i = argv.index("--")
    rest = argv[i + 1 :]
    if not rest:
        return argv[:i], None
    import shlex

    return argv[:i], shlex.join(rest)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv, entrypoint = _split_entrypoint(argv)
    verbose = any(a in ("-v", "--verbose") for a in argv)
    argv = [a for a in argv if a not in ("-v", "--verbose")]
    from raybridge.noise import quiet_libraries

    quiet_libraries(verbose)
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the command they were given to, so the message points to its help
        parser.leaf(args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.version:
        from raybridge import __version__

        print(f"raybridge {__version__}")
        return EXIT_OK
    handler: Optional[Callable[[argparse.Namespace], int]] = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    if entrypoint and not getattr(args, "takes_entrypoint", False):
        parser.error(f"'{args.command}' takes no command after --")
    args.entrypoint_after_dashdash = entrypoint
    code = _run(handler, args)
    if ending_without_finalizing():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    from raybridge.core.printable import one_line
    from raybridge.errors import RaybridgeError

    try:
        return handler(args)
    except RaybridgeError as exc:
        for problem in exc.problems:
            sys.stderr.write(f"error: {one_line(problem)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug: one line, the traceback only on request
        if os.environ.get("RAYBRIDGE_DEBUG"):
            raise
        sys.stderr.write(f"error: internal error: {type(exc).__name__}: {one_line(str(exc))} (set RAYBRIDGE_DEBUG=1 for the traceback)\n")
        return EXIT_JOB_FAILED
