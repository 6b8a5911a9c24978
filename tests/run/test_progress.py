"""The progress board and its two renderings: counts and statuses only, never model text."""

from __future__ import annotations

import io

import pytest

from research_dispatch.progress import Board, LiveDisplay, PlainDisplay, make_display, wants_live

SECRET_TEXT = "THE MODEL SAID THIS"


def events() -> list[dict]:
    record = {"prompt_tokens": 1200, "completion_tokens": 300, "cost_usd": 0.0125, "finish_reason": "tool_calls",
              "verdict": "exact"}
    return [
        {"leg": "02-diloco-family", "event": "start", "messages": [{"role": "user", "content": SECRET_TEXT}]},
        {"leg": "02-diloco-family", "event": "call", "step": 1, "record": record,
         "message": {"role": "assistant", "content": SECRET_TEXT}},
        {"leg": "02-diloco-family", "event": "tool", "name": "web_search", "arguments": SECRET_TEXT,
         "is_error": False},
        {"leg": "02-diloco-family", "event": "tool", "name": SECRET_TEXT, "arguments": "{}", "is_error": True},
        {"leg": "02-diloco-family", "event": "gateway_error", "status": 429, "error": SECRET_TEXT, "fatal": False},
        {"leg": "unknown-leg", "event": "call", "step": 1, "record": record},
    ]


def test_plain_display_prints_counts_and_statuses_only() -> None:
    lines: list[str] = []
    board = Board()
    board.add("02-diloco-family", "deepseek/deepseek-v4-pro", 40)
    display = PlainDisplay(board, lines.append)
    for event in events():
        display.event(event)
    display.finished("02-diloco-family", "ok", "exact")
    text = "\n".join(lines)
    assert SECRET_TEXT not in text
    assert "[02-diloco-family] step 1/40: 1,500 tokens, $0.0125" in text
    assert "[02-diloco-family] tool tool returned an error" in text
    assert "[02-diloco-family] gateway error HTTP 429" in text
    assert "[02-diloco-family] ok, route exact, 1 calls, 1,500 tokens, $0.0125" in text
    assert board.spent_usd == pytest.approx(0.0125)  # events of unknown legs are ignored


def test_live_table_shows_every_leg_with_step_tokens_cost_and_status() -> None:
    from rich.console import Console

    board = Board()
    board.add("02-diloco-family", "deepseek/deepseek-v4-pro", 40)
    board.add("04-verl-trl", "anthropic/claude-sonnet-4.6", 40)
    board.add("01-composer-2.5", "google/gemini-3.1-pro-preview", 40, status="kept")
    display = LiveDisplay(board)
    for event in events()[:3]:
        display.event(event)
    buffer = io.StringIO()
    display.console = Console(file=buffer, width=140, color_system=None)
    display.console.print(display._render())
    text = buffer.getvalue()
    assert SECRET_TEXT not in text
    assert "02-diloco-family" in text and "1/40" in text and "1,500" in text and "$0.0125" in text
    assert "running · web_search" in text and "queued" in text and "kept" in text


def test_live_only_on_a_terminal_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("RESEARCH_DISPATCH_PROGRESS", raising=False)
    assert wants_live(Tty()) and not wants_live(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not wants_live(Tty())
    monkeypatch.setenv("RESEARCH_DISPATCH_PROGRESS", "live")
    assert wants_live(io.StringIO())
    monkeypatch.setenv("RESEARCH_DISPATCH_PROGRESS", "plain")
    assert isinstance(make_display(Board(), print), PlainDisplay)
