"""The scripted model is an honest stand-in at the seam: the same methods as the product's gateway, the
product's own typed results, and nothing the test did not script."""

from __future__ import annotations

import inspect

import pytest

from research_dispatch.core.errors import InsufficientCredits
from research_dispatch.gateway.client import Gateway
from research_dispatch.gateway.endpoints import Pricing
from research_dispatch.gateway.protocol import ModelGateway
from tests.seam import Reply, ScriptedGateway, ScriptExhausted, calls, text, tool

USER = [{"role": "user", "content": "Topic id: t"}]


@pytest.mark.parametrize("method", ["complete", "pricing"])
def test_the_product_gateway_and_the_scripted_one_have_the_protocols_signatures(method: str) -> None:
    """If the product's `Gateway` changes what the stages call, the protocol and the scripted model must
    follow, or the seam tests would test another interface."""
    expected = inspect.signature(getattr(ModelGateway, method))
    assert inspect.signature(getattr(Gateway, method)) == expected
    assert inspect.signature(getattr(ScriptedGateway, method)) == expected


def test_replies_are_the_products_canonical_turns_with_provenance() -> None:
    gateway = ScriptedGateway(calls(tool("web_search", {"query": "q"})), text("Done."),
                              prices=Pricing(prompt=1e-6, completion=2e-6))
    first = gateway.complete(model="a/b", messages=USER, provider="acme", session_id="c:s")
    assert first.message == {"role": "assistant", "tool_calls": [  # no content key on a tool-only turn
        {"id": "call_1_0", "type": "function", "function": {"name": "web_search", "arguments": '{"query": "q"}'}}]}
    assert first.finish_reason == "tool_calls" and first.record.verdict == "exact"
    assert first.record.served_provider == "acme" and first.record.cost_usd > 0
    second = gateway.complete(model="a/b", messages=USER)
    assert second.content == "Done." and second.record.generation_id == "gen-scripted-000002"
    assert [s.session_id for s in gateway.sent] == ["c:s", None] and gateway.left() == 0


def test_served_facts_give_the_products_verdicts() -> None:
    gateway = ScriptedGateway(Reply("x", served_model="a/other"), Reply("x", metadata=False), Reply("x", cached=True),
                              Reply("x", served_model="a/b-20260401"))
    verdicts = [gateway.complete(model="a/b", messages=USER).record.verdict for _ in range(4)]
    assert verdicts == ["model_fallback", "unverified", "cached", "exact"]


def test_an_unscripted_call_fails_the_test_and_errors_are_raised() -> None:
    gateway = ScriptedGateway(InsufficientCredits("gateway HTTP 402: no credit", status=402))
    with pytest.raises(InsufficientCredits):
        gateway.complete(model="a/b", messages=USER)
    with pytest.raises(ScriptExhausted, match="was not scripted"):
        gateway.complete(model="a/b", messages=USER)


def test_a_session_script_answers_only_its_sessions() -> None:
    gateway = ScriptedGateway(text("anyone")).enqueue(text("alpha only"), session="*:alpha")
    assert gateway.complete(model="a/b", messages=USER, session_id="c:beta").content == "anyone"
    assert gateway.complete(model="a/b", messages=USER, session_id="c:alpha").content == "alpha only"


def test_the_output_cap_cuts_text_like_a_server() -> None:
    gateway = ScriptedGateway(text("word " * 400))
    cut = gateway.complete(model="a/b", messages=USER, max_completion_tokens=100)
    assert cut.finish_reason == "length" and len(cut.content) <= 400
