"""`completion bash|zsh`: shell completion for every command and flag, generated from the parser itself.

The script comes from `shtab` (a maintained generator that walks an argparse
parser), so it always matches the commands and flags of this release; nothing
is written by hand. Install it as shtab's documentation says, e.g.
`raybridge completion bash > ~/.local/share/bash-completion/completions/raybridge`.
It completes `raybridge`; the kubectl plugin (`kubectl raybridge`) is the same
program under the name kubectl looks for.
"""

from __future__ import annotations

import argparse
from typing import Any

from raybridge.errors import EXIT_OK

SHELLS = ("bash", "zsh")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh) for every command and flag",
        description="Print a completion script for SHELL, generated from raybridge's own parser (shtab). "
        "bash: `raybridge completion bash > ~/.local/share/bash-completion/completions/raybridge`; "
        "zsh: `raybridge completion zsh > \"${fpath[1]}/_raybridge\"`.",
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash or zsh")
    p.set_defaults(handler=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    import sys

    import shtab

    from raybridge.cli.main import build_parser

    parser = build_parser(None, prog="raybridge")
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return EXIT_OK
