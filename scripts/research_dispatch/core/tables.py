"""Plain-text tables for the console (the run summary, the route table), rendered by `rich`.

Columns are left-aligned, two spaces apart, as wide as their widest cell, with no border, no colour and
no markup: the output is read in CI logs and by people piping it, and model-chosen text (a reason, a
model slug) must print as written — `[S1]` is not markup, `:x:` not an emoji. Trailing spaces are cut.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

_WIDE = 1_000_000  # never wrap: a table row is one line however long its cells


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The table as text, one line per row after the header line."""
    table = Table(*headers, box=None, padding=(0, 1), pad_edge=False, show_edge=False, header_style=None,
                  highlight=False)
    for row in rows:
        table.add_row(*row)
    out = io.StringIO()
    Console(file=out, width=_WIDE, color_system=None, force_terminal=False, highlight=False, markup=False,
            emoji=False, soft_wrap=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())
