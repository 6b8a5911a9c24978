"""The progress board and its two renderings: counts and statuses only, never model text."""

from __future__ import annotations

import io

import pytest

from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.events import CallEvent, GatewayErrorEvent, LegProgress, StartEvent, ToolEvent
from research_dispatch.run.progress import Board, LiveDisplay, PlainDisplay, make_display, wants_live

SECRET_TEXT = "THE MODEL SAID THIS"


def record() -> CallRecord:
    return CallRecord(generation_id="gen-1", requested_model="deepseek/deepseek-v4-pro", requested_provider=None,
                      served_model="deepseek/deepseek-v4-pro", served_provider="DeepSeek", metadata_present=True,
                      attempt=1, attempts_recorded=1, strategy=None, cached=False, finish_reason="tool_calls",
                      native_finish_reason="tool_calls", prompt_tokens=1200, completion_tokens=300, cached_tokens=0,
                      reasoning_tokens=0, cost_usd=0.0125, latency_s=0.5, retries=0, purpose="research",
                      verdict="exact")


def events() -> list[LegProgress]:
    leg = "02-diloco-family"
    return [
        LegProgress(leg, StartEvent(model="deepseek/deepseek-v4-pro", provider=None, prompt_version="p",
                                    messages=[{"role": "user", "content": SECRET_TEXT}])),
        LegProgress(leg, CallEvent(step=1, record=record(), message={"role": "assistant", "content": SECRET_TEXT})),
        LegProgress(leg, ToolEvent(name="web_search", arguments=SECRET_TEXT, is_error=False, detail={}, chars=10)),
        LegProgress(leg, ToolEvent(name=SECRET_TEXT, arguments="{}", is_error=True, detail={}, chars=10)),
        LegProgress(leg, GatewayErrorEvent(fatal=False, error=SECRET_TEXT, status=429)),
        LegProgress("unknown-leg", CallEvent(step=1, record=record(), message={})),
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


def test_trace_lines_keep_their_json_shape() -> None:
    """The trace file's lines: `event` names the kind, `at` the time, every field under its own name."""
    import json

    call = json.loads(CallEvent(step=2, record=record(), message={"role": "assistant"}).to_json(at="T"))
    assert call["event"] == "call" and call["at"] == "T" and call["step"] == 2
    assert call["record"]["cost_usd"] == 0.0125 and call["record"]["verdict"] == "exact"
    assert call["message"] == {"role": "assistant"}
    tool = json.loads(ToolEvent(name="web_search", arguments={"q": "x"}, is_error=True, detail={"error": "e"},
                                chars=3).to_json(at="T"))
    assert tool == {"at": "T", "event": "tool", "name": "web_search", "arguments": {"q": "x"}, "is_error": True,
                    "detail": {"error": "e"}, "chars": 3}
