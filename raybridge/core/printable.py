"""Text read from input, made safe to print.

A node name, a label or a file name comes from a file the user was handed or
from a cluster; printed as it is, a line break in it ends a YAML comment line
and starts a document of its own (`queues generate`'s header), and an escape
sequence rewrites the terminal. Everything the CLI prints passes through here,
one line at a time (a message is one line; several lines are several messages):
line breaks, control and format characters (bidi overrides included), unpaired
surrogates and code points Unicode assigns nothing (the noncharacters U+FFFE and
U+FFFF among them, which YAML forbids anywhere in a stream, comments too) are
written as Python-style escapes (`\\n`, `\\x1b`, `\\u2028`, `\\ufffe`), so
what is printed says exactly what was read, can never carry a line or a terminal
command of its own, and leaves YAML output parseable.

It does not quote or truncate, and it leaves every other character alone
(non-ASCII names print as they are).
"""

from __future__ import annotations

import unicodedata

#: Unicode categories escaped: control, format, line and paragraph separators, surrogates, unassigned.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def one_line(text: str) -> str:
    """`text` with every line break and control or format character escaped: one printable line."""
    if text.isprintable():  # the common case, no copy (isprintable is False for every escaped category)
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch for ch in text)
