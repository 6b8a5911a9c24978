"""The model seam: what the research loop and the synthesis use of a gateway, as a typed `Protocol`.

Why a protocol and not the `Gateway` class: the stages above the gateway (`leg.researcher`,
`synthesis.common.calls` and the synthesis pipeline) need a few things of it — one chat completion with
provenance (`complete`, returning a `Completion` that carries its `CallRecord`), a structured answer in
the form the server takes (`complete_structured`), the prices, reasoning room and context window of the
leg's route (`pricing`, `reasoning_plan`, `context_window`), and the output cap of its settings — and
nothing of how it gets them (HTTP, the `openai` client, retries, the endpoints listing). Naming exactly
that makes the injection honest: the product's `Gateway` satisfies it, and so does an in-process scripted
model (the tests' `ScriptedGateway`, like simonw/llm's `MockModel`), so the rules of the loop and the
synthesis can be tested at this seam while the wire stays tested against the HTTP fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from research_dispatch.config.settings import GatewaySettings
from research_dispatch.gateway.endpoints import Pricing
from research_dispatch.gateway.provenance import CallRecord, Completion
from research_dispatch.gateway.reasoning import ReasoningPlan

__all__ = ["GenerationRecords", "ModelGateway"]


class ModelGateway(Protocol):
    """One model gateway as the stages see it. `Gateway` is the product's; failures raise `GatewayError`
    subclasses (after the gateway's own retries), never return None."""

    @property
    def settings(self) -> GatewaySettings: ...

    def complete(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: str | dict[str, Any] | None = None, provider: str | None = None,
                 session_id: str | None = None, response_format: dict[str, Any] | None = None,
                 max_completion_tokens: int | None = None, purpose: str = "research", deadline: float | None = None,
                 spent: Callable[[CallRecord], None] | None = None, cache_boundary: int | None = None
                 ) -> Completion:
        """`spent` receives the record of every attempt the gateway accepted but the call gave up (billed,
        `aborted: true`); `cache_boundary` is the index of the last compacted message (prompt caching)."""
        ...

    def complete_structured(self, *, model: str, messages: list[dict[str, Any]], name: str, schema: dict[str, Any],
                            provider: str | None = None, session_id: str | None = None,
                            max_completion_tokens: int | None = None, purpose: str = "structured",
                            deadline: float | None = None,
                            spent: Callable[[CallRecord], None] | None = None) -> Completion:
        """One structured-output call in whatever form the server takes; `content` is the answer's JSON."""
        ...

    def reasoning_plan(self, model: str, provider: str | None = None) -> ReasoningPlan:
        """The output cap and reasoning room of a call on this route."""
        ...

    def pricing(self, model: str, provider_slug: str | None = None) -> Pricing | None: ...

    def context_window(self, model: str, provider_slug: str | None = None) -> int | None:
        """Tokens of prompt and output one call on this route may hold; None when unknown."""
        ...

class GenerationRecords(Protocol):
    """What `verify --online` asks of a gateway: the gateway's own record of one call (`GET /generation`),
    as its JSON `data` object. The product's `Gateway` satisfies it; naming only this keeps `verify`,
    which reads call logs and reports, from importing the `openai` client it calls only online."""

    def generation(self, generation_id: str) -> dict[str, Any]: ...

