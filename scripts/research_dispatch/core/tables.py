"""Tables for the console, rendered by `rich`: plain ones for logs, and ones that fit a terminal.

* `plain_table` — the run summary and the route table in a log: columns left-aligned, two spaces apart,
  as wide as their widest cell, no border, no colour, no markup: the output is read in CI logs and by
  people piping it, and model-chosen text (a reason, a model slug) must print as written — `[S1]` is not
  markup, `:x:` not an emoji. Trailing spaces are cut.
* `render_table` — tables for people (the demo's route table, `plan`'s table, the summaries on a
  terminal): drawn to the terminal's width (60 to 160 columns), never wider, so that nothing wraps
  mid-word. When a table does not fit, the leg ids (`ident` columns) are shortened first, by their
  middle (`shorten_ids`), then the other long columns are cut with an ellipsis or wrap. Why ids first:
  a leg id says its topic and its model, both of which the row shows whole elsewhere, and its cut keeps
  the legs apart (`01-ex….openai-gpt-5`); a model slug cut to `anthropic/cl…` says nothing.
* `shorten_ids` — leg ids cut so that two legs of one topic stay distinct (the live table too).
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table

MAX_WIDTH = 160
"""Tables never grow wider than this, however wide the terminal: a row stays readable in one glance."""
MIN_WIDTH = 60
SHRINK_FROM = 8
"""A column at most this wide is never cut (statuses, numbers); wider ones may be."""
SHRUNK_MIN = 6
"""A cut column keeps at least this many characters (five and an ellipsis)."""


def terminal_width(limit: int = MAX_WIDTH) -> int:
    """The width to draw for: the terminal's (`COLUMNS` first, as Python reads it), within 60..limit."""
    return max(MIN_WIDTH, min(limit, shutil.get_terminal_size(fallback=(limit, 24)).columns))


ID_MIN = 10
"""A shortened id keeps at least this many characters (`01-…ser-2.5`): its number and its end."""


@dataclass(frozen=True)
class Column:
    """One column: `keep` columns are never cut (short words: statuses, routes); `ident` columns (leg ids)
    are shortened first when the table does not fit, by their middle, staying distinct; `wrap` columns
    (reasons, notes) wrap onto more lines instead of losing their end; the others may be cut with an
    ellipsis, the `cut_last` ones (model slugs) only after the rest."""

    header: str
    keep: bool = False
    right: bool = False
    wrap: bool = False
    ident: bool = False
    cut_last: bool = False


def render_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int | None = None,
                 indent: int = 2, rule: bool = True) -> list[str]:
    """The table as lines of at most `width` characters (default: `terminal_width()`); `rule=False`
    leaves out the line under the header (a log's tables: the header, then one line per row)."""
    total = (width if width is not None else terminal_width()) - indent
    rows = _shortened_ids(columns, [list(row) for row in rows], total)
    widest = [max([len(column.header), *(len(row[index]) for row in rows)]) for index, column in enumerate(columns)]
    widths = _widths(columns, widest, total)
    # Two spaces between columns: SIMPLE_HEAD draws a one-space separator, so one of padding; no box, two.
    table = Table(box=box.SIMPLE_HEAD if rule else None, show_edge=False, pad_edge=False,
                  padding=(0, 1 if rule else 2, 0, 0), header_style="")
    for column, size in zip(columns, widths, strict=True):
        table.add_column(column.header, justify="right" if column.right else "left", no_wrap=not column.wrap,
                         overflow="fold" if column.keep or column.ident or column.wrap else "ellipsis", width=size)
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=max(20, sum(widths) + 2 * (len(widths) - 1)), color_system=None, force_terminal=False,
            no_color=True, highlight=False, emoji=False, markup=False, soft_wrap=False).print(table)
    return [" " * indent + line.rstrip() for line in buffer.getvalue().splitlines() if line.strip()]


def _shortened_ids(columns: Sequence[Column], rows: list[list[str]], total: int) -> list[list[str]]:
    """The rows with their `ident` columns shortened (`shorten_ids`) as far as the table is too wide,
    down to `ID_MIN` (or the header's width)."""
    widest = [max([len(column.header), *(len(row[index]) for row in rows)]) for index, column in enumerate(columns)]
    over = sum(widest) + 2 * (len(columns) - 1) - total
    for index, column in enumerate(columns):
        if over <= 0:
            break
        limit = max(ID_MIN, len(column.header), widest[index] - over)
        if not column.ident or limit >= widest[index]:
            continue
        short = shorten_ids([row[index] for row in rows], limit)
        for row in rows:
            row[index] = short[row[index]]
        narrower = max([len(column.header), *(len(row[index]) for row in rows)])
        over -= widest[index] - narrower
    return rows


def _widths(columns: Sequence[Column], widest: list[int], total: int) -> list[int]:
    """Column widths within `total` (two spaces between columns): kept, id and short columns whole; the
    long ones (wider than `SHRINK_FROM`) get at least `SHRUNK_MIN` each and share the rest of the room
    in proportion to what they lack — the `cut_last` ones (model slugs) only once the others are at
    their least."""
    room = total - 2 * (len(columns) - 1)
    widths = list(widest)
    for last in (False, True):
        shrink = [not (c.keep or c.ident) and c.cut_last is last and w > SHRINK_FROM
                  for c, w in zip(columns, widths, strict=True)]
        left = room - sum(w for w, s in zip(widths, shrink, strict=True) if not s)
        natural = sum(w for w, s in zip(widths, shrink, strict=True) if s)
        if natural <= left:
            return widths
        spare = max(0, left - SHRUNK_MIN * sum(shrink))
        lacking = sum(w - SHRUNK_MIN for w, s in zip(widths, shrink, strict=True) if s)
        widths = [SHRUNK_MIN + spare * (w - SHRUNK_MIN) // lacking if s else w
                  for w, s in zip(widths, shrink, strict=True)]
        if left >= SHRUNK_MIN * sum(shrink):
            return widths
    return widths


def shorten_ids(ids: Sequence[str], limit: int) -> dict[str, str]:
    """Each id cut to at most `limit` characters so that distinct ids stay distinct.

    Leg ids are `<NN-topic>.<author>-<model>`: two legs of one topic share the front, so cutting the end
    (`01-exam…`) makes them equal. The cut takes the middle and keeps the end, where they differ:
    `01-example.openai-gpt-5` → `01-ex….openai-gpt-5`, or `01-…-gpt-5` when even the model part is too
    long. Where two cuts still collide, those ids are cut at the end instead."""
    short = {ident: _middle_cut(ident, limit) for ident in ids}
    owners: dict[str, list[str]] = {}
    for ident, cut in short.items():
        owners.setdefault(cut, []).append(ident)
    for same in owners.values():
        if len(same) > 1:
            for ident in same:
                short[ident] = ident if len(ident) <= limit else ident[: max(1, limit - 1)] + "…"
    return short


def _middle_cut(ident: str, limit: int) -> str:
    if len(ident) <= limit:
        return ident
    head, dot, tail = ident.partition(".")
    if dot and len(tail) >= 4 and len(tail) + 4 <= limit:  # `composer-2.5`: a dot of the topic id, not a leg's
        return head[: limit - len(tail) - 2] + "…." + tail
    keep = max(1, limit - 4)
    return ident[:3] + "…" + ident[-keep:]


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


def console_table(columns: Sequence[Column], headers: Sequence[str], rows: Sequence[Sequence[str]], *,
                  terminal_rows: Sequence[Sequence[str]] | None = None) -> str:
    """A log's table (the run summary, the route table): `plain_table` in a pipe or a CI log, where
    nothing wraps and every name stays whole (whatever `COLUMNS` says: test runners and CI set it); when
    stdout is a terminal, `render_table` to its width, so that nothing wraps mid-word."""
    if not sys.stdout.isatty():
        return plain_table(headers, rows)
    return "\n".join(render_table(columns, terminal_rows or rows, width=terminal_width(), indent=0, rule=False))
