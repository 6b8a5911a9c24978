"""Output that fits (issue 24): tables drawn to the terminal's width, leg ids that stay distinct."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from research_dispatch.core.tables import Column, render_table, shorten_ids
from research_dispatch.run.progress import Board, LiveDisplay

LEGS = ("01-example.openai-gpt-5", "01-example.anthropic-claude-sonnet-4.6", "05-trace-replay-distillation")
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=30)


@given(topic=NAME, models=st.lists(NAME, min_size=2, max_size=4, unique=True), limit=st.integers(8, 60))
def test_shortened_leg_ids_fit_and_two_legs_of_a_topic_stay_apart(topic: str, models: list[str], limit: int) -> None:
    ids = [f"01-{topic}.{model}" for model in models]
    short = shorten_ids(ids, limit)
    assert all(len(cut) <= limit for cut in short.values())
    assert all(short[i] == i for i in ids if len(i) <= limit)  # what fits is never cut
    tails = {i[-(limit - 4):] for i in ids}
    if len(tails) == len(ids):  # the ids differ somewhere in the part a cut keeps: so do the cuts
        assert len(set(short.values())) == len(ids)


@pytest.mark.parametrize("width", [80, 100, 140])
def test_a_table_fits_its_width_and_keeps_its_ids_whole(width: int) -> None:
    columns = (Column("leg", keep=True), Column("model"), Column("route"), Column("words", right=True))
    rows = [(leg, "anthropic/claude-sonnet-4.6-with-a-long-name", "exact", "2250") for leg in LEGS]
    lines = render_table(columns, rows, width=width)
    assert all(len(line) <= width for line in lines), lines
    assert all(any(leg in line for line in lines) for leg in LEGS)


def test_the_live_table_keeps_two_legs_of_a_topic_apart_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    board = Board()
    for leg in LEGS:
        board.add(leg, "anthropic/claude-sonnet-4.6", 40, status="queued")
    display = LiveDisplay(board)
    with display.console.capture() as captured:
        display.console.print(display._render())
    lines = captured.get().splitlines()
    assert all(len(line) <= 80 for line in lines)
    first = [line.split()[0] for line in lines if line.strip().startswith("01")]
    assert len(first) == 2 and len(set(first)) == 2, lines
