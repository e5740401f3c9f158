"""Printing results: JSON, YAML or a rich table, and errors as plain lines.

Commands hand plain data here; this module decides how it looks. Tables use
rich (imported only when a table is printed); machine formats go to stdout
untouched so `-o json | jq` works; warnings and errors go to stderr.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Optional, Sequence, TextIO

FORMATS = ("table", "json", "yaml")


def dump(data: Any, fmt: str, stream: TextIO = sys.stdout) -> None:
    if fmt == "json":
        stream.write(json.dumps(data, indent=2, default=str) + "\n")
    elif fmt == "yaml":
        import yaml

        stream.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    else:
        raise ValueError(fmt)


def table(title: Optional[str], columns: Sequence[str], rows: Iterable[Sequence[Any]], stream: TextIO = sys.stdout) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col)
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    Console(file=stream, width=max(100, _width(stream))).print(t)


def _width(stream: TextIO) -> int:
    import shutil

    return shutil.get_terminal_size((120, 24)).columns if stream.isatty() else 160


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


def note(message: str) -> None:
    sys.stderr.write(f"note: {message}\n")


def error(message: str) -> None:
    sys.stderr.write(f"error: {message}\n")


def progress(message: str) -> None:
    """One line of progress on stderr, flushed (long waits must show life)."""
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()
