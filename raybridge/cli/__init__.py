"""The command line, `python -m raybridge ...`: one module per command group.

`main.py` builds the parser from the table of groups and maps errors onto exit
statuses; `args.py` holds the argument groups several commands share;
`render.py` prints. This `__init__` only re-exports `main`.
"""

from raybridge.cli.main import main

__all__ = ["main"]
