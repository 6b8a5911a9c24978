"""What happens inside a leg, as typed events: the trace file's lines and the run's live progress.

Why dataclasses and not dicts (in the spirit of smolagents' `TokenUsage`, `Timing` and step records):
the researcher, the leg, the trace writer and the progress board each used to agree on string keys
(`event["record"]["cost_usd"]`), where a renamed key would silently read as zero dollars. Here each
event is one small frozen class with typed fields; a consumer matches on the class, and the checker
sees every field it reads.

The trace file (`build/traces/<stem>.jsonl`, an artefact) keeps its format: one JSON object per line,
keys sorted, `"event"` naming the kind (`EVENT` of each class), `"at"` the time it was written, and
each field under its own name — `TraceEvent.to_json` writes exactly that. The trace carries the
model's messages and tool arguments; the progress display never shows them (see `progress.py`).

`LegProgress` is what the run's progress hook receives: one leg's event, tagged with the leg's stem.
This module imports nothing heavy (the gateway's `CallRecord` only for the checker), so importing it
stays cheap for `run --help`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from research_dispatch.gateway.provenance import CallRecord


@dataclass(frozen=True)
class TraceEvent:
    """One thing that happened in a leg. Subclasses set `EVENT`, the kind the trace file names."""

    EVENT: ClassVar[str] = ""

    def fields(self) -> dict[str, Any]:
        """The event's fields by name, as the trace file shows them (shallow: no copies)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_json(self, at: str) -> str:
        """One line of the trace file: `{"at": ..., "event": <kind>, <field>: ...}`, keys sorted. Values
        JSON cannot represent are written as their text (as the trace always did)."""
        return json.dumps({"at": at, "event": self.EVENT, **self.fields()}, sort_keys=True, default=str)


@dataclass(frozen=True)
class StartEvent(TraceEvent):
    """The research loop starts: the route asked for, the prompt version and the opening messages."""

    EVENT: ClassVar[str] = "start"
    model: str
    provider: str | None
    prompt_version: str
    messages: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class CallEvent(TraceEvent):
    """One gateway call completed: its provenance record (tokens, cost, verdict) and the reply."""

    EVENT: ClassVar[str] = "call"
    step: int
    record: CallRecord
    message: Mapping[str, Any]

    def fields(self) -> dict[str, Any]:
        return {"step": self.step, "record": dataclasses.asdict(self.record), "message": self.message}


@dataclass(frozen=True)
class ToolEvent(TraceEvent):
    """One tool call was run. `name` and `arguments` are the model's (untrusted: never displayed)."""

    EVENT: ClassVar[str] = "tool"
    name: str
    arguments: Any
    is_error: bool
    detail: Mapping[str, Any]
    chars: int


@dataclass(frozen=True)
class GatewayErrorEvent(TraceEvent):
    """A gateway call failed for good; `fatal` when no retry or other call could help (402, 401)."""

    EVENT: ClassVar[str] = "gateway_error"
    fatal: bool
    error: str
    status: int | None


@dataclass(frozen=True)
class CompactEvent(TraceEvent):
    """An old tool result in the history (`message`: its index) was compacted."""

    EVENT: ClassVar[str] = "compact"
    message: int
    chars_before: int
    chars_after: int


@dataclass(frozen=True)
class StallEvent(TraceEvent):
    """Searching stalled: this many searches in a row added no new source, so research moves on."""

    EVENT: ClassVar[str] = "stall"
    searches: int


@dataclass(frozen=True)
class GapCheckEvent(TraceEvent):
    """The gap check was answered (or not, `answered` false), and the gaps code found in the answer."""

    EVENT: ClassVar[str] = "gap_check"
    answered: bool
    gaps: Sequence[str]


@dataclass(frozen=True)
class WriteEvent(TraceEvent):
    """Research ended and the report is asked for: the writing call's messages (system, brief, plan and
    dossier: `scripts/dev/real_check.py` measures from them what the writer was shown) and the dossier's
    size — its sources and passages, and the passages left out to fit the call."""

    EVENT: ClassVar[str] = "write"
    sources: int
    passages: int
    left_out: int
    messages: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class EndEvent(TraceEvent):
    """The research loop ended: why it stopped, and the calls and dollars it took."""

    EVENT: ClassVar[str] = "end"
    reasons: Sequence[str]
    failure: str | None
    calls: int
    cost_usd: float


@dataclass(frozen=True)
class InterruptedEvent(TraceEvent):
    """The loop was stopped by Ctrl-C, after these calls and dollars."""

    EVENT: ClassVar[str] = "interrupted"
    calls: int
    cost_usd: float


@dataclass(frozen=True)
class McpStartEvent(TraceEvent):
    """The leg's MCP servers started: the tools they offer and, per server, why one did not."""

    EVENT: ClassVar[str] = "mcp_start"
    tools: Sequence[str]
    problems: Mapping[str, str]


@dataclass(frozen=True)
class CrashEvent(TraceEvent):
    """The leg failed with an unexpected error (a bug or an unexpected client failure)."""

    EVENT: ClassVar[str] = "crash"
    error: str | None


@dataclass(frozen=True)
class WriteFailedEvent(TraceEvent):
    """The report and call log could not be written; the old ones stand."""

    EVENT: ClassVar[str] = "write_failed"
    error: str | None


@dataclass(frozen=True)
class WritePendingEvent(TraceEvent):
    """The write of the report and call log was committed but not completed (see `leg/files`)."""

    EVENT: ClassVar[str] = "write_pending"
    error: str | None


@dataclass(frozen=True)
class LegProgress:
    """What the run's progress hook receives: `event`, which happened in the leg `leg` (its stem)."""

    leg: str
    event: TraceEvent
