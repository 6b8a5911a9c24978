"""What a gateway call leaves behind: its provenance record (`CallRecord`) and its answer (`Completion`).

Why a module of its own, below the client: a report's call log, `verify`, the resume and the synthesis'
caches read and write these records without making a call, so they must not import the `openai` client
and its HTTP stack (`client.py`) to do so. The two gateway kinds are named here because a record says
which kind served it.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from research_dispatch.core.records import load_record, record

__all__ = ["OPENAI_COMPATIBLE", "OPENROUTER", "CallRecord", "Completion"]

OPENROUTER = "openrouter"
OPENAI_COMPATIBLE = "openai-compatible"


@record
@dataclass(frozen=True)
class CallRecord:
    """Provenance of one gateway call. Serialised one per line into `<stem>.calls.jsonl`.

    `cost_usd` is everything the call cost. With a BYOK key it is OpenRouter's fee (`gateway_fee_usd`)
    plus the provider's charge (`provider_cost_usd`); otherwise both are None and `cost_usd` is what
    OpenRouter charged. Fields after `verdict` were added after the first release (0.1.0 wrote none of
    them) and have defaults, so older call logs still load: `from_json` requires only the fields without
    a default (tests/data/v0.1.0 is a call log of that release).
    """

    generation_id: str | None
    requested_model: str
    requested_provider: str | None
    served_model: str | None
    served_provider: str | None
    metadata_present: bool
    attempt: int | None
    attempts_recorded: int
    strategy: str | None
    cached: bool
    finish_reason: str | None
    native_finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float
    latency_s: float
    retries: int
    purpose: str
    verdict: str
    gateway_kind: str = OPENROUTER
    is_byok: bool = False
    provider_cost_usd: float | None = None
    gateway_fee_usd: float | None = None
    cache_write_tokens: int = 0  # prompt tokens written to the provider's cache (billed above the input price)
    aborted: bool = False  # an attempt given up (deadline, Ctrl-C, retried): its cost counts, its route does not
    cost_estimated: bool = False  # cost_usd is the pre-call worst case: the gateway's record was not found
    reported_cost_usd: float | None = None  # the gateway's own figure, set only when it was below the listed
    # prices for the tokens counted (`cost: 0` for 13k tokens of a priced endpoint): cost_usd is then the priced
    # figure, so a dollar cap holds whatever the gateway reports

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_json(cls, line: str) -> CallRecord:
        """One call-log line, every field checked (`records.py`; `ValueError` names the field): a field
        a newer version added takes its default, one the first release wrote must be there."""
        return load_record(line, cls, required=_CALL_RECORD_REQUIRED)


_CALL_RECORD_REQUIRED = tuple(f.name for f in fields(CallRecord)
                              if f.default is MISSING and f.default_factory is MISSING)


@dataclass
class Completion:
    """The assistant message of one call, in canonical form, ready to append to the history."""

    message: dict[str, Any]
    finish_reason: str | None
    record: CallRecord

    @property
    def content(self) -> str:
        content = self.message.get("content")
        return content if isinstance(content, str) else ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])
