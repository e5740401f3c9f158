"""`kubectl_complete-raybridge`: what `kubectl raybridge <TAB>` completes, read from raybridge's own parser.

kubectl (1.26 and later) completes a plugin's arguments by running an executable named
`kubectl_complete-<plugin>` from PATH with the words typed after the plugin's name, the last one being
the word to complete ("" for a new word), and reads one candidate per line, then `:<directive>`, Cobra's
ShellCompDirective (k8s.io/kubectl@v0.34.4 pkg/cmd/plugin/plugin_completion.go pluginCompletion; the
directive values are cobra's: 0 default, which completes file names, 4 no file names). The package
installs this module's `main` under that name, beside `kubectl-raybridge`.

It walks the same argparse parser `completion bash|zsh` hands to shtab: commands, sub-commands, flags
(those `--help` shows) and the choices of a flag or positional argument; a value with no choices (a
file, a name) is left to the shell's file completion. It imports no more than `--help` does and prints
nothing else.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

#: Cobra's ShellCompDirective values (spf13/cobra completions.go).
FILES = 0
NO_FILES = 4


def _subcommands(parser: argparse.ArgumentParser) -> Optional[argparse._SubParsersAction]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]


def _matching(words: Sequence[object], partial: str) -> list[str]:
    return sorted(str(word) for word in words if str(word).startswith(partial))


def candidates(parser: argparse.ArgumentParser, words: Sequence[str]) -> tuple[list[str], int]:
    """(candidates, directive) for the last of `words` (the word being typed), the others typed before it."""
    *typed, partial = list(words) or [""]
    current, expecting, positional = parser, None, 0
    for word in typed:
        if expecting is not None:
            expecting = None
            continue
        if word == "--":
            return [], FILES  # the entrypoint: a command and its files
        if word.startswith("-"):
            action = current._option_string_actions.get(word.split("=", 1)[0])
            if action is not None and action.nargs != 0 and "=" not in word:
                expecting = action
            continue
        sub = _subcommands(current)
        if sub is not None and word in sub.choices:
            current, positional = sub.choices[word], 0
            continue
        positional += 1
    if expecting is not None:
        return (_matching(expecting.choices, partial), NO_FILES) if expecting.choices else ([], FILES)
    if partial.startswith("-"):
        shown = [o for a in current._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
        return _matching(shown, partial), NO_FILES
    sub = _subcommands(current)
    if sub is not None:
        return _matching(sub.choices, partial), NO_FILES
    positionals = _positionals(current)
    if positional < len(positionals) and positionals[positional].choices:
        return _matching(positionals[positional].choices, partial), NO_FILES  # type: ignore[arg-type]
    return [], FILES


def main(argv: Optional[Sequence[str]] = None) -> int:
    from raybridge.cli.main import build_parser

    words = list(sys.argv[1:] if argv is None else argv)
    found, directive = candidates(build_parser(None, prog="kubectl raybridge"), words)
    sys.stdout.write("".join(f"{word}\n" for word in found) + f":{directive}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
