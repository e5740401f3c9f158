"""Argument groups that several commands share, so a flag means the same everywhere.

Only argparse: adding arguments, nothing else. What a flag's value means is
decided by the services the handlers call.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Mapping, Optional, Sequence

#: `-o` of every command that prints a result: what kubectl's `-o` takes for the same output.
OUTPUT_FORMATS = ("table", "json", "yaml")
#: `-o` of the commands that print Kubernetes objects for `kubectl apply -f -` (no table of objects).
DOCUMENT_FORMATS = ("yaml", "json")
#: Commands whose result is also a picture take these besides OUTPUT_FORMATS.
PICTURE_FORMATS = ("svg",)
#: The flags every command that talks to a cluster takes, as kubectl names them (`add_cluster_args`).
CLUSTER_FLAGS = ("-n", "--namespace", "--context", "--kubeconfig", "--request-timeout")


#: What every command's help ends with.
EXIT_STATUSES = "Exit status: 0 done, 1 job failed or stopped, 2 bad input, 3 cluster unreachable or not admitted in time, 130 interrupted."


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line, with "did you mean", and exit status 2; help ends with the exit statuses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_STATUSES)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        from raybridge.errors import EXIT_BAD_INPUT

        self.exit(EXIT_BAD_INPUT, f"error: {message}{did_you_mean(message, self.option_strings())}\n(see '{self.prog} --help')\n")

    def option_strings(self) -> list[str]:
        return [s for action in self._actions if action.help != argparse.SUPPRESS for s in action.option_strings]

    def leaf(self, args: argparse.Namespace) -> "Parser":
        """The parser of the (sub)command `args` names, so an error points to that command's help."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                child = action.choices.get(getattr(args, action.dest, None) or "")
                if isinstance(child, Parser):
                    return child.leaf(args)
        return self


def add_entrypoint_usage(p: argparse.ArgumentParser) -> None:
    """The usage line says what `main` takes after `--`: the entrypoint."""
    p.usage = p.format_usage().removeprefix("usage: ").rstrip() + " [-- ENTRYPOINT...]"


def did_you_mean(message: str, options: Sequence[str]) -> str:
    """"; did you mean 'submit'?" for argparse's invalid-choice and unrecognized-arguments messages, else ''."""
    import difflib
    import re

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if choice:
        word, candidates = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
    else:
        unknown = re.match(r"unrecognized arguments: (.*)$", message)
        flags = [w.split("=", 1)[0] for w in unknown.group(1).split() if w.startswith("-")] if unknown else []
        if not flags:
            return ""
        word, candidates = flags[0], [o for o in options if o.startswith("--")]
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def seconds(text: str) -> float:
    """An argparse type: a finite, positive number of seconds (a bound must bound)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0 (got {text!r})")
    return value


def orphan_seconds(text: str) -> int:
    """An argparse type: the orphan bound, whole seconds, at least a minute."""
    from raybridge.jobs.decision.orphan_guard import orphan_bound_problem

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text!r}") from None
    problem = orphan_bound_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def add_output_arg(
    p: argparse.ArgumentParser,
    default: Optional[str],
    choices: Sequence[str] = OUTPUT_FORMATS,
    deprecated: Mapping[str, str] = {},
    shown_default: Optional[str] = None,
) -> None:
    """`-o/--output`; a `deprecated` value still works, means its replacement, and says so on stderr."""

    def output_format(text: str) -> str:
        if text in deprecated:
            sys.stderr.write(f"warning: -o {text} is deprecated; use -o {deprecated[text]}\n")
            return deprecated[text]
        return text

    shown = f" (default: {shown_default or default})" if shown_default or default else ""
    p.add_argument("-o", "--output", type=output_format, choices=choices, default=default, help=f"output format{shown}")


def described(text: str, default: Optional[str] = None, env: Optional[str] = None) -> str:
    """A flag's help: what it does, then "(default: D; env VAR)" for whichever of the two it has."""
    parts = ([f"default: {default}"] if default is not None else []) + ([f"env {env}"] if env else [])
    return f"{text} ({'; '.join(parts)})" if parts else text


def add_cluster_args(
    p: argparse.ArgumentParser,
    title: str = "cluster",
    namespace_help: str = "namespace",
    namespace_default: Optional[str] = "the context's, else 'default'",
    request_timeout_default: str = "30",
    env: Optional[Callable[[str], str]] = None,
) -> None:
    """The flags of every command that talks to a cluster (`CLUSTER_FLAGS`), named and meant as kubectl's.

    `env`, where the command reads environment variables too, names the one each flag falls back to."""
    env_of = env or (lambda flag: "")
    g = p.add_argument_group(title)
    g.add_argument("--kubeconfig", help=described("kubeconfig file", "$KUBECONFIG, ~/.kube/config, in-cluster", env_of("kubeconfig")))
    g.add_argument("--context", help=described("kubeconfig context", "the kubeconfig's current context", env_of("context")))
    g.add_argument("-n", "--namespace", help=described(namespace_help, namespace_default, env_of("namespace")))
    g.add_argument(
        "--request-timeout", type=seconds, default=None, metavar="SECONDS",
        help=described("bound on each Kubernetes API call, connect and read", request_timeout_default, env_of("request-timeout")),
    )  # fmt: skip


def cluster_target(args: argparse.Namespace, namespace: "str | None" = None) -> Any:
    """The one `ClusterTarget` of this command line; `namespace` (e.g. the spec's) wins over -n."""
    from raybridge.cli.render import note
    from raybridge.kube.config import DEFAULT_REQUEST_TIMEOUT
    from raybridge.kube.target import ClusterTarget

    target = ClusterTarget(
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespace=namespace or args.namespace,
        request_timeout=args.request_timeout or DEFAULT_REQUEST_TIMEOUT,
    )
    for text in target.notes():
        note(text)
    return target


def add_inventory_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("inventory")
    g.add_argument("--nodes", metavar="FILE", help="read Nodes from `kubectl get nodes -o json` output instead of the API")
    g.add_argument("--pods", metavar="FILE", help="read Pods from `kubectl get pods -A -o json` output (free GPUs per node)")
