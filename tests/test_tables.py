"""The console's plain-text tables (`core/tables.py`, rendered by rich): every cell printed verbatim —
model-chosen text such as `[S1]` or `:x:` is neither markup nor an emoji — in left-aligned columns two
spaces apart, one line per row, no trailing spaces."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.core.tables import plain_table
from tests.profiles import examples

pytestmark = pytest.mark.slow

cells = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E) | st.sampled_from(["—", "→", "…"]),
                max_size=30)
# a space inside a cell is fine, but not at its edges (the columns' padding would hide where it ends)
padded = cells.map(lambda text: text.replace("~", " ").strip())


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(st.lists(padded.filter(bool), min_size=n, max_size=n),
                                                      st.lists(st.lists(padded, min_size=n, max_size=n),
                                                               max_size=6))))
def test_every_cell_stands_verbatim_in_its_column(table: tuple[list[str], list[list[str]]]) -> None:
    headers, rows = table
    lines = plain_table(headers, rows).split("\n")
    assert len(lines) == 1 + len(rows)
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    for line, row in zip(lines, [headers, *rows], strict=True):
        assert line == line.rstrip()
        offset = 0
        for cell, width in zip(row, widths, strict=True):
            assert line[offset:offset + len(cell)] == cell
            assert not line[offset + len(cell):offset + width + 2].strip()  # only padding up to the next column
            offset += width + 2
