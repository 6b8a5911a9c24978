"""The live progress of a run: one row per leg (model, step, tokens, cost, status).

Fed by the legs' typed events (`events.LegProgress`) from worker threads, so every update takes a lock. Two renderings:

* `LiveDisplay` — a `rich` Live table, redrawn a few times a second, on an interactive terminal;
* `PlainDisplay` — one line per meaningful event, for CI logs, pipes and tests.

Only counts, names the product chose, and statuses are ever shown. The events also carry the model's
messages, tool arguments (the model's search queries) and prompts; none of that is printed. Tool names
are shown only when they are ours (a model may invent any name).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table

from research_dispatch.core.tables import shorten_ids
from research_dispatch.leg.events import (
    CallEvent,
    CompactEvent,
    CrashEvent,
    EndEvent,
    GatewayErrorEvent,
    LegProgress,
    StartEvent,
    ToolEvent,
)

KNOWN_TOOLS = frozenset({"web_search", "web_extract"})
FINAL = frozenset({"ok", "degraded", "failed", "kept", "not started"})


@dataclass
class LegRow:
    """The displayed state of one leg."""

    stem: str
    model: str
    max_steps: int
    status: str = "queued"
    activity: str = ""
    step: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    started: float | None = None
    finished: float | None = None
    route: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or now or time.monotonic()) - self.started


@dataclass
class Board:
    """Thread-safe state of all legs, plus the run's live dollar total (for the run budget)."""

    rows: dict[str, LegRow] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    spent_usd: float = 0.0

    def add(self, stem: str, model: str, max_steps: int, status: str = "queued") -> None:
        with self.lock:
            self.rows[stem] = LegRow(stem=stem, model=model, max_steps=max_steps, status=status)

    def apply(self, progress: LegProgress) -> tuple[LegRow, str] | None:
        """Fold one leg's event into the board; returns the row and a plain-text line worth printing."""
        event = progress.event
        with self.lock:
            row = self.rows.get(progress.leg)
            if row is None:
                return None
            line = ""
            if isinstance(event, StartEvent):
                row.status, row.started = "running", time.monotonic()
                line = f"started ({row.model})"
            elif isinstance(event, CallEvent):
                record = event.record
                row.step = event.step or row.step + 1
                row.prompt_tokens += record.prompt_tokens
                row.completion_tokens += record.completion_tokens
                row.cost_usd += record.cost_usd
                self.spent_usd += record.cost_usd
                finish = record.finish_reason
                row.activity = "tool calls" if finish == "tool_calls" else "writing" if finish == "stop" else \
                    str(finish or "")
                verdict_note = f", route {record.verdict}" if record.verdict and record.verdict != "exact" else ""
                line = (f"step {row.step}/{row.max_steps}: {row.tokens:,} tokens, ${row.cost_usd:.4f}"
                        f"{verdict_note}")
            elif isinstance(event, ToolEvent):
                row.activity = event.name if event.name in KNOWN_TOOLS else "tool"
                if event.is_error:
                    line = f"tool {row.activity} returned an error"
            elif isinstance(event, GatewayErrorEvent):
                row.activity = f"gateway error{f' HTTP {event.status}' if event.status else ''}"
                line = row.activity + (" (fatal)" if event.fatal else "")
            elif isinstance(event, CompactEvent):
                row.activity = "compacting context"
            elif isinstance(event, CrashEvent):
                row.activity = "crashed"
            elif isinstance(event, EndEvent):
                row.activity = "finishing"
            return row, line

    def finish(self, stem: str, status: str, route: str = "") -> LegRow | None:
        with self.lock:
            row = self.rows.get(stem)
            if row is not None:
                row.status, row.route, row.activity = status, route, ""
                row.finished = time.monotonic() if row.started is not None else None
            return row

    def snapshot(self) -> list[LegRow]:
        with self.lock:
            return [LegRow(**vars(row)) for row in self.rows.values()]


class Display:
    """Interface: `start()`, `event(progress)`, `finished(stem, status, route, note)`, `stop()`."""

    def __init__(self, board: Board) -> None:
        self.board = board

    def start(self) -> None:
        return None

    def event(self, progress: LegProgress) -> None:
        self.board.apply(progress)

    def finished(self, stem: str, status: str, route: str = "", note: str = "") -> None:
        self.board.finish(stem, status, route)

    def stop(self) -> None:
        return None


class PlainDisplay(Display):
    """Line per event: `[stem] step 3/40: 4,120 tokens, $0.0123`."""

    def __init__(self, board: Board, echo: Callable[[str], None]) -> None:
        super().__init__(board)
        self.echo = echo
        self._out = threading.Lock()

    def event(self, progress: LegProgress) -> None:
        applied = self.board.apply(progress)
        if applied and applied[1]:
            self._say(applied[0].stem, applied[1])

    def finished(self, stem: str, status: str, route: str = "", note: str = "") -> None:
        row = self.board.finish(stem, status, route)
        if row is None:
            return
        parts = [status]
        if route:
            parts.append(f"route {route}")
        if row.started is not None:
            parts.append(f"{row.step} calls, {row.tokens:,} tokens, ${row.cost_usd:.4f}, {row.elapsed():.1f} s")
        self._say(stem, ", ".join(parts) + (f" — {note}" if note else ""))

    def _say(self, stem: str, text: str) -> None:
        with self._out:
            self.echo(f"[{stem}] {text}")


class LiveDisplay(Display):
    """A rich Live table on the terminal, redrawn from the board; gone when the run prints its summary."""

    def __init__(self, board: Board, *, title: str = "research legs") -> None:
        super().__init__(board)

        self.title = title
        self.console = Console()
        self._live = Live(console=self.console, get_renderable=self._render, refresh_per_second=8,
                          transient=True, redirect_stdout=False, redirect_stderr=False)

    def start(self) -> None:
        self._live.start()

    def stop(self) -> None:
        self._live.stop()

    def _render(self) -> Any:
        now = time.monotonic()
        rows = self.board.snapshot()

        table = Table(title=f"{self.title} — ${self.board.spent_usd:.4f} spent", title_justify="left",
                      expand=False, box=box.SIMPLE_HEAD, pad_edge=False)
        # Numbers and the status keep their width; on a narrow terminal the leg and model names shrink (…).
        fixed = {"step": 5, "tokens": 7, "cost": 8, "time": 6, "status": 16}
        spare = self.console.width - sum(fixed.values()) - 3 * (len(fixed) + 2) - 1  # padding + rules
        need = {"leg": max([3, *(len(r.stem) for r in rows)]), "model": max([5, *(len(r.model) for r in rows)])}
        if need["leg"] + need["model"] > spare:
            need["model"] = max(8, min(need["model"], spare // 2))
            need["leg"] = max(8, spare - need["model"])
        for header in ("leg", "model", *fixed):
            width = fixed.get(header)
            table.add_column(header, justify="left" if header in ("leg", "model", "status") else "right",
                             no_wrap=True, overflow="ellipsis", min_width=width,
                             max_width=width if header in ("step", "tokens", "cost", "time") else
                             None if header == "status" else need[header])
        styles = {"ok": "green", "kept": "dim green", "degraded": "yellow", "failed": "red", "not started": "red",
                  "running": "cyan", "queued": "dim"}
        # Two legs of one topic share the front of their ids: cut the topic part, keep the model part, so
        # `01-example.openai-gpt-5` and `01-example.anthropic-…` never both become `01-exam…`.
        short = shorten_ids([row.stem for row in rows], need["leg"])
        for row in rows:
            status = row.status + (f" · {row.activity}" if row.activity and row.status == "running" else "")
            if row.route and row.route != "exact":
                status += f" · route {row.route}"
            table.add_row(short[row.stem], row.model, f"{row.step}/{row.max_steps}" if row.started else "",
                          f"{row.tokens:,}" if row.tokens else "", f"${row.cost_usd:.4f}" if row.started else "",
                          f"{row.elapsed(now):.1f}s" if row.started else "",
                          f"[{styles.get(row.status, '')}]{status}[/]" if styles.get(row.status) else status)
        return table


def wants_live(stream: Any = None) -> bool:
    """Live table only on an interactive terminal; `RESEARCH_DISPATCH_PROGRESS=plain|live` overrides."""
    choice = os.environ.get("RESEARCH_DISPATCH_PROGRESS", "").strip().lower()
    if choice in ("plain", "live"):
        return choice == "live"
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False

    stream = stream or sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def make_display(board: Board, echo: Callable[[str], None], *, live: bool | None = None) -> Display:
    if live if live is not None else wants_live():
        try:
            return LiveDisplay(board)
        except ImportError:  # pragma: no cover - rich is a dependency; degrade rather than fail a run
            pass
    return PlainDisplay(board, echo)
