"""How much a call may reason, and the output cap that leaves room for the visible answer after it.

Why (OpenRouter, "Reasoning Tokens"): reasoning tokens are output tokens. They share the call's output
cap (`max_tokens`) with the answer and are billed like it, so a reasoning model (gpt-5,
gemini-3.1-pro, kimi-k2-thinking...) given the cap a plain model needs can spend most of it thinking
and end `finish_reason: "length"` with little or no content — a report of ~4k tokens plus reasoning
does not fit in 8k. The documented `reasoning` parameter steers it, per family:

* `reasoning.max_tokens` (a token budget) for the families OpenRouter documents it for: Anthropic's
  reasoning models, Gemini thinking models, Qwen thinking models;
* `reasoning.effort` for the others (OpenAI's reasoning models and Grok, documented; other families are
  mapped by OpenRouter), where effort is a share of the output cap: minimal 10%, low 20%, medium 50%,
  high 80%.

The parameter is sent only where every candidate endpoint lists `reasoning` in `supported_parameters`
(with `require_parameters` anything else would empty the route). The output cap sent is the visible
answer's cap (`gateway.max_completion_tokens`) plus the reasoning room: the budget, or what the effort's
share takes of the whole. An endpoint that lists only `include_reasoning` reasons by its own defaults:
it gets no parameter but the same room. A caller that can pay for less (the leg's dollar cap) passes a
smaller total: the reasoning room shrinks first (to at most half of it), never the answer alone.

Pure functions; the gateway applies the plan to the request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

BUDGET_FAMILIES = frozenset({"anthropic", "google", "qwen"})
"""Slug authors whose models take `reasoning.max_tokens` (OpenRouter's reasoning-tokens guide)."""

EFFORT_SHARE = {"minimal": 0.1, "low": 0.2, "medium": 0.5, "high": 0.8}
"""The share of the output cap each `reasoning.effort` gives to reasoning (OpenRouter's guide)."""

MIN_BUDGET_TOKENS = 1024
"""The smallest reasoning budget Anthropic takes; below it a squeezed call asks for minimal effort."""

Effort = Literal["minimal", "low", "medium", "high"]


@dataclass(frozen=True)
class ReasoningPlan:
    """What one call sends: the `reasoning` object (None: none sent), the whole output cap, and the
    reasoning tokens that cap makes room for (what the dollar bound prices on top of the answer)."""

    parameter: dict[str, Any] | None
    output_cap: int
    reasoning_tokens: int


def is_budget_family(model: str) -> bool:
    return model.strip().lower().split("/", 1)[0] in BUDGET_FAMILIES


def plan(model: str, *, visible_cap: int, steerable: bool, reasons: bool, budget_tokens: int, effort: Effort,
         total_cap: int | None = None) -> ReasoningPlan:
    """The reasoning plan of a call.

    `steerable`: every candidate endpoint lists `reasoning`; `reasons`: they list `reasoning` or
    `include_reasoning` (the model reasons). `total_cap`: the most output the caller can pay for (None:
    the plan's own cap); it is honoured exactly.
    """
    if not reasons:
        return ReasoningPlan(None, total_cap or visible_cap, 0)
    if is_budget_family(model):
        full = visible_cap + budget_tokens
        cap = total_cap or full
        room = budget_tokens if cap >= full else min(budget_tokens, cap // 2)
        if not steerable:
            return ReasoningPlan(None, cap, room)
        if room >= MIN_BUDGET_TOKENS:
            return ReasoningPlan({"max_tokens": room}, cap, room)
        # too little for a budget: the least effort, which OpenRouter maps to 10% of the cap
        return ReasoningPlan({"effort": "minimal"}, cap, math.ceil(cap * EFFORT_SHARE["minimal"]))
    share = EFFORT_SHARE[effort]
    full = math.ceil(visible_cap / (1 - share))
    cap = total_cap or full
    chosen = effort if cap >= full else _effort_for(min(share, 0.5))
    room = math.ceil(cap * EFFORT_SHARE[chosen])
    return ReasoningPlan({"effort": chosen} if steerable else None, cap, room)


def _effort_for(share: float) -> Effort:
    """The largest effort whose share of the cap fits in `share`."""
    fitting = [name for name, value in EFFORT_SHARE.items() if value <= share + 1e-9]
    return fitting[-1] if fitting else "minimal"  # type: ignore[return-value]
