"""The flags every command shares, read off the parser itself: a command added or changed later is held to them too."""

from __future__ import annotations

import argparse
from typing import Iterator

import pytest

from raybridge.cli.main import build_parser

#: kubectl's names for the cluster, the namespace and the bound on each call.
CLUSTER_FLAGS = ("-n", "--namespace", "--context", "--kubeconfig", "--request-timeout")
#: kubectl's -o values for a result, and for objects to apply.
OUTPUT_FORMATS = ("table", "json", "yaml")
DOCUMENT_FORMATS = ("yaml", "json")
PICTURE_FORMATS = ("svg",)

#: Every command that talks to a cluster (kubectl's flags), as its command line starts.
CLUSTER_COMMANDS = [
    "discover", "plan", "render", "submit", "status", "logs", "stop", "delete", "list", "explain",
    "queues fairshare", "queues generate", "adjuster run",
]  # fmt: skip

#: Commands whose output is Kubernetes objects for `kubectl apply -f -`: no table of them.
DOCUMENT_COMMANDS = ["render", "queues generate"]


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(command line, parser) of every leaf command."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield prefix.strip(), parser
    for action in subparsers:
        for name, child in action.choices.items():
            yield from commands(child, f"{prefix} {name}")


ALL = dict(commands(build_parser()))
#: Commands whose result is also drawn (`-o svg`).
PICTURE_COMMANDS = ("explain", "queues fairshare")


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings}


def test_the_list_of_cluster_commands_names_real_commands() -> None:
    assert set(CLUSTER_COMMANDS) <= set(ALL), set(CLUSTER_COMMANDS) - set(ALL)


@pytest.mark.parametrize("command", CLUSTER_COMMANDS)
def test_every_cluster_command_takes_kubectl_s_flags(command: str) -> None:
    assert set(CLUSTER_FLAGS) <= option_strings(ALL[command]), sorted(set(CLUSTER_FLAGS) - option_strings(ALL[command]))


@pytest.mark.parametrize("command", sorted(ALL))
def test_every_output_flag_takes_the_same_values(command: str) -> None:
    action = next((a for a in ALL[command]._actions if "-o" in a.option_strings), None)
    if action is None:
        return
    assert action.option_strings == ["-o", "--output"]
    expected = DOCUMENT_FORMATS if command in DOCUMENT_COMMANDS else OUTPUT_FORMATS
    if command in PICTURE_COMMANDS:
        expected = (*OUTPUT_FORMATS, *PICTURE_FORMATS)
    assert tuple(action.choices) == expected
    assert action.default in (None, "table", "yaml")


@pytest.mark.parametrize("command", ["plan", "adjuster plan", "discover", "status", "list", "explain", "queues fairshare", "submit"])
def test_results_are_tables_unless_asked(command: str) -> None:
    action = next(a for a in ALL[command]._actions if "-o" in a.option_strings)
    assert action.default in ("table", None)  # None: adjuster plan, whose --manifests prints YAML


def test_a_ray_address_has_one_name() -> None:
    assert "--address" in option_strings(ALL["discover"]) and "--address" in option_strings(ALL["submit"])
    hidden = {s for a in ALL["discover"]._actions if a.help == argparse.SUPPRESS for s in a.option_strings}
    assert hidden == {"--ray-address"}
