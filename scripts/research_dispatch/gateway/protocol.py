"""The model seam: what the research loop and the synthesis use of a gateway, as a typed `Protocol`.

Why a protocol and not the `Gateway` class: the stages above the gateway (`leg.researcher`,
`synthesis.structured` and the synthesis pipeline) need three things of it — one chat completion with
provenance (`complete`, returning a `Completion` that carries its `CallRecord`), the prices of the leg's
route (`pricing`), and the output cap of its settings — and nothing of how it gets them (HTTP, the
`openai` client, retries, the endpoints listing). Naming exactly that makes the injection honest: the
product's `Gateway` satisfies it, and so does an in-process scripted model (the tests' `ScriptedGateway`,
like simonw/llm's `MockModel`), so the rules of the loop and the synthesis can be tested at this seam
while the wire stays tested against the HTTP fakes.
"""

from __future__ import annotations

from typing import Any, Protocol

from research_dispatch.config.settings import GatewaySettings
from research_dispatch.gateway.client import Completion
from research_dispatch.gateway.endpoints import Pricing

__all__ = ["ModelGateway"]


class ModelGateway(Protocol):
    """One model gateway as the stages see it. `Gateway` is the product's; failures raise `GatewayError`
    subclasses (after the gateway's own retries), never return None."""

    @property
    def settings(self) -> GatewaySettings: ...

    def complete(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: str | None = None, provider: str | None = None, session_id: str | None = None,
                 response_format: dict[str, Any] | None = None, max_completion_tokens: int | None = None,
                 purpose: str = "research", deadline: float | None = None) -> Completion: ...

    def pricing(self, model: str, provider_slug: str | None = None) -> Pricing | None: ...
