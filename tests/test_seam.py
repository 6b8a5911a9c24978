"""The scripted model is an honest stand-in at the seam: the same methods as the product's gateway, the
product's own typed results, and nothing the test did not script."""

from __future__ import annotations

import inspect
import typing

import pytest

from research_dispatch.core.errors import InsufficientCredits
from research_dispatch.gateway.client import Gateway
from research_dispatch.gateway.endpoints import Pricing
from research_dispatch.gateway.protocol import ModelGateway
from tests.seam import Reply, ScriptedGateway, ScriptExhausted, calls, text, tool

USER = [{"role": "user", "content": "Topic id: t"}]


def _shape(function: object) -> dict[str, tuple[object, object, object]]:
    """Each parameter's kind, default and resolved annotation (string annotations compared as types)."""
    hints = typing.get_type_hints(function)
    return {name: (p.kind, p.default, hints.get(name)) for name, p in inspect.signature(function).parameters.items()
            if name != "self"} | {"return": (None, None, hints.get("return"))}


@pytest.mark.parametrize("method", ["complete", "complete_structured", "reasoning_plan", "pricing"])
def test_the_product_gateway_and_the_scripted_one_have_the_protocols_signatures(method: str) -> None:
    """If the product's `Gateway` changes what the stages call, the protocol and the scripted model must
    follow, or the seam tests would test another interface. The product's may have more keyword-only
    parameters with defaults that the stages never pass (`probe`, the gateway's own form probing)."""
    expected = _shape(getattr(ModelGateway, method))
    product = _shape(getattr(Gateway, method))
    assert {name: product.get(name) for name in expected} == expected
    extra = [shape for name, shape in product.items() if name not in expected]
    assert all(kind is inspect.Parameter.KEYWORD_ONLY and default is not inspect.Parameter.empty
               for kind, default, _ in extra)
    assert _shape(getattr(ScriptedGateway, method)) == expected


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
