"""`completion bash|zsh`: shell completion for every command and flag, generated from the parser itself.

The script comes from `shtab` (a maintained generator that walks an argparse
parser), so it always matches the commands and flags of this release; nothing
is written by hand. Install it as the README says (the completions folder may not
exist yet on a fresh account, and bash loads it only through the bash-completion
package; `eval "$(raybridge completion bash)"` in `~/.bashrc` works without it).
It completes `raybridge`; `kubectl raybridge` is completed by kubectl itself, which
asks `kubectl_complete-raybridge` (`cli/kubectl_complete.py`).
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
        "bash, with the bash-completion package: `mkdir -p ~/.local/share/bash-completion/completions && "
        "raybridge completion bash > ~/.local/share/bash-completion/completions/raybridge`; without it: "
        "`eval \"$(raybridge completion bash)\"` in ~/.bashrc. zsh: save `raybridge completion zsh` as _raybridge in a folder on "
        "fpath. `kubectl raybridge` completes through kubectl_complete-raybridge, installed with the package.",
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
