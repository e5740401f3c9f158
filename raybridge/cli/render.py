"""Printing results: JSON, YAML or a rich table, and errors as plain lines.

Commands hand plain data here; this module decides how it looks. Tables use
rich (imported only when a table is printed); machine formats go to stdout
untouched so `-o json | jq` works; warnings and errors go to stderr. Text
that may come from input (table cells, comment lines, messages) is printed
through `core.printable`, so it can neither add a line nor reach the terminal.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Optional, Sequence, TextIO

from raybridge.core.printable import one_line


def dump(data: Any, fmt: str, stream: Optional[TextIO] = None) -> None:
    stream = stream or sys.stdout  # looked up per call: a redirected stdout is honoured
    if fmt == "json":
        # NaN and Infinity are no JSON: a reader must refuse a non-finite number where it reads it (core/documents.py);
        # one that reaches here is a fault of raybridge's, raised rather than printed as output no JSON reader takes.
        stream.write(json.dumps(data, indent=2, default=str, allow_nan=False) + "\n")
    elif fmt == "yaml":
        import yaml

        stream.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    else:
        raise ValueError(fmt)


def table(
    title: Optional[str],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    stream: Optional[TextIO] = None,
    empty: str = "No resources found.",
) -> None:
    """A rich table on a terminal; plain columns (as kubectl prints them) when piped; `empty` on stderr when there are no rows."""
    stream = stream or sys.stdout
    cells = [tuple("-" if v is None else one_line(str(v)) for v in row) for row in rows]
    if not cells:
        sys.stderr.write(empty + "\n")
        return
    if not stream.isatty():
        stream.write(plain_columns(columns, cells))
        return
    import shutil

    from rich.console import Console
    from rich.table import Table

    from rich.markup import escape

    t = Table(title=one_line(title) if title else None, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in cells:
        t.add_row(*(escape(cell) for cell in row))
    Console(file=stream, width=max(100, shutil.get_terminal_size((120, 24)).columns)).print(t)


def plain_columns(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns three spaces apart, upper-case headers, nothing cut: kubectl's plain output."""
    header = [c.upper() for c in columns]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(columns))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in [header, *rows]]
    return "\n".join(lines) + "\n"


# Each message is one line: a line break in it came from input (a file name, a node name, a condition message)
# and is printed escaped, so input can never forge a line of raybridge's own. Messages of several lines are
# several messages.


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {one_line(message)}\n")


def note(message: str) -> None:
    sys.stderr.write(f"note: {one_line(message)}\n")


def error(message: str) -> None:
    sys.stderr.write(f"error: {one_line(message)}\n")


def progress(message: str) -> None:
    """One line of progress on stderr, flushed (long waits must show life)."""
    sys.stderr.write(f"{one_line(message)}\n")
    sys.stderr.flush()


def dump_documents(objects: Sequence[Any], fmt: str, comments: Sequence[str] = (), stream: Optional[TextIO] = None) -> None:
    """Kubernetes objects for `kubectl apply -f -`: multi-document YAML (comments on top) or a JSON v1 List."""
    stream = stream or sys.stdout
    if fmt == "json":
        dump({"apiVersion": "v1", "kind": "List", "items": list(objects)}, "json", stream)
        return
    import yaml

    for line in comments:
        stream.write(f"# {one_line(line)}\n")
    stream.write(yaml.safe_dump_all(list(objects), sort_keys=False, default_flow_style=False))
