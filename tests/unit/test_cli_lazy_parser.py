"""The CLI builds only the named command's group: the table it uses must match what each group registers."""

from __future__ import annotations

import importlib

import pytest

from raybridge.cli.args import Parser

cli_main = importlib.import_module("raybridge.cli.main")  # the module; `raybridge.cli.main` the name is its function


def _registered(module: str) -> set[str]:
    parser = Parser(prog="raybridge")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    importlib.import_module(module).register(sub)
    return set(sub.choices)


@pytest.mark.parametrize("module", cli_main.COMMAND_GROUPS)
def test_command_table_matches_what_each_group_registers(module: str) -> None:
    assert set(cli_main.COMMANDS_OF_GROUP[module]) == _registered(module)


@pytest.mark.parametrize(
    "argv, groups",
    [
        (["adjuster", "plan"], ("raybridge.cli.adjuster",)),
        (["plan", "spec.yaml"], ("raybridge.cli.jobs",)),
        (["logs", "job"], ("raybridge.cli.lifecycle",)),
        (["queues"], ("raybridge.cli.queues",)),
        (["--version"], cli_main.COMMAND_GROUPS),
        (["no-such-command"], cli_main.COMMAND_GROUPS),
        ([], cli_main.COMMAND_GROUPS),
    ],
)
def test_groups_built_for_a_command_line(argv: list[str], groups: tuple[str, ...]) -> None:
    assert cli_main._groups_for(argv) == groups


def test_a_command_line_naming_one_group_parses_as_with_the_whole_parser() -> None:
    argv = ["adjuster", "plan", "--pods", "p.json", "--nodes", "n.json", "-o", "json"]
    lazy = vars(cli_main.build_parser(argv).parse_args(argv))
    full = vars(cli_main.build_parser().parse_args(argv))
    assert lazy.keys() == full.keys()
    assert {k: v for k, v in lazy.items() if k != "handler"} == {k: v for k, v in full.items() if k != "handler"}
    assert lazy["handler"].__qualname__ == full["handler"].__qualname__

