"""Output that fits (issue 24): tables drawn to the terminal's width, leg ids that stay distinct."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from research_dispatch.core.tables import Column, render_table, shorten_ids, terminal_width
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
def test_a_table_fits_its_width_and_its_ids_stay_apart(width: int) -> None:
    columns = (Column("leg", ident=True), Column("model"), Column("route"), Column("words", right=True))
    rows = [(leg, "anthropic/claude-sonnet-4.6-with-a-long-name", "exact", "2250") for leg in LEGS]
    lines = render_table(columns, rows, width=width)
    assert all(len(line) <= width for line in lines), lines
    firsts = [line.split()[0] for line in lines[2:]]
    assert len(set(firsts)) == len(LEGS), lines


ROUTE = (Column("leg", ident=True), Column("model", cut_last=True), Column("provider"), Column("route"),
         Column("words", right=True), Column("sources", right=True), Column("status"))
DEMO_ROWS = [(leg, model, provider, "exact", "2247", "10", "ok") for leg, model, provider in (
    ("01-composer-2.5", "google/gemini-3.1-pro-preview", "Google"),
    ("03-monarch-torchforge-openenv", "openai/gpt-5", "OpenAI"),
    ("05-trace-replay-distillation", "moonshotai/kimi-k2-thinking", "Moonshot AI"),
    ("06-example.anthropic-claude-sonnet-4.6", "anthropic/claude-sonnet-4.6", "Anthropic"),
    ("06-example.openai-gpt-5", "openai/gpt-5", "OpenAI"))]


@pytest.mark.parametrize("width", [80, 120, 160, 200])
def test_the_leg_id_is_shortened_before_the_model_slug(width: int) -> None:
    """Issue 30.8: on a wide terminal every model slug stands whole (never `anthropic/cl…`), and at 80
    columns the table fits, the leg ids giving way first."""
    lines = render_table(ROUTE, DEMO_ROWS, width=width)
    assert all(len(line) <= min(width, 160) for line in lines), lines
    for _leg, model, provider, *_ in DEMO_ROWS:  # whole where there is room; at 80 columns most of it
        assert any((model if width >= 120 else model[:20]) in line for line in lines), (model, lines)
        assert width < 120 or any(model in line and provider in line for line in lines), (model, lines)
    if width >= 120:
        assert all(any(row[0] in line for line in lines) for row in DEMO_ROWS), lines
    assert len({line.split()[0] for line in lines[2:]}) == len(DEMO_ROWS)  # the legs stay apart


def test_tables_use_the_terminal_width_up_to_160(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert terminal_width() == 160
    monkeypatch.setenv("COLUMNS", "132")
    assert terminal_width() == 132
    monkeypatch.setenv("COLUMNS", "40")
    assert terminal_width() == 60


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
