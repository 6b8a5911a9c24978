"""Prompt caching (issue 22 point 2): breakpoints where the model caches only when told (Anthropic).

The placement rules (`gateway/caching.py`) as pure rules; the strict fake's caching model (Anthropic
caches only at breakpoints, within the documented limits; other models by themselves); the request
over HTTP, validated against OpenRouter's published request schema; the cost accounting with cache
read and write prices; and a leg routed to Claude that reads most of its prompt from the cache.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from research_dispatch.config.settings import GatewaySettings
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.gateway.caching import MAX_BREAKPOINTS, policy, positions, with_breakpoints
from research_dispatch.gateway.client import Gateway
from research_dispatch.gateway.endpoints import EndpointPrice
from research_dispatch.tools.search import TOOL_SCHEMAS
from research_dispatch_fakes.gateway import FakeGateway
from tests.reliability.conftest import CONTROL, configure, run_legs, view

ROOT = Path(__file__).resolve().parent.parent
CLAUDE = "anthropic/claude-sonnet-4.6"
LONG = "DiLoCo keeps eight workers apart for five hundred steps. " * 120  # ~1,700 tokens


def history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are careful. " + LONG},
                                      {"role": "user", "content": "Topic id: t\nTitle: T\nResearch brief:\nDiLoCo\n"}]
    for n in range(turns):
        messages += [{"role": "assistant", "tool_calls": [{"id": f"c{n}", "type": "function", "function": {
                         "name": "web_search", "arguments": '{"query": "q"}'}}]},
                     {"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n} " + LONG}]
    return messages


def test_breakpoints_on_the_stable_prefix_the_compacted_boundary_and_the_last_message() -> None:
    messages = history(3)
    assert positions(CLAUDE, messages, TOOL_SCHEMAS, stable_until=5) == [1, 5, 7]
    sent = with_breakpoints(CLAUDE, messages, TOOL_SCHEMAS, stable_until=5)
    assert sent[1]["content"] == [{"type": "text", "text": messages[1]["content"],
                                   "cache_control": {"type": "ephemeral"}}]
    assert messages[1]["content"].startswith("Topic id:")  # the history itself is never changed
    assert sum(isinstance(m.get("content"), list) for m in sent) == 3 <= MAX_BREAKPOINTS


def test_a_breakpoint_needs_text_and_the_model_s_minimum() -> None:
    messages = history(1)
    assert positions(CLAUDE, messages, TOOL_SCHEMAS, stable_until=2) == [1, 3]  # 2 calls only: moved to 1
    short = [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "Topic id: t"}]
    assert positions(CLAUDE, short, TOOL_SCHEMAS, stable_until=None) == []  # under 1,024 tokens: never
    assert policy("anthropic/claude-opus-4.6").min_tokens == 4096  # type: ignore[union-attr]
    assert positions("anthropic/claude-opus-4.6", history(1), TOOL_SCHEMAS, stable_until=None) == []


def test_models_that_cache_by_themselves_get_no_breakpoint_and_gemini_one() -> None:
    for model in ("openai/gpt-5", "deepseek/deepseek-v4-pro", "moonshotai/kimi-k2-thinking"):
        assert positions(model, history(3), TOOL_SCHEMAS, stable_until=5) == []
    assert positions("google/gemini-3.1-pro-preview", history(3), TOOL_SCHEMAS, stable_until=5) == [5]


def test_a_prompt_token_is_priced_at_the_dearer_of_input_and_cache_write() -> None:
    price = EndpointPrice(prompt=3e-6, completion=15e-6, cache_write=3.75e-6)
    assert price.at(1000) == (pytest.approx(3.75e-6), 15e-6)
    assert EndpointPrice(prompt=3e-6, completion=15e-6).at(1000) == (3e-6, 15e-6)


# ---------------------------------------------------------------------------------------------
# the fake caches what the real services cache
# ---------------------------------------------------------------------------------------------
def calls(fake: FakeGateway, model: str, *, breakpoints: bool, turns: int = 4) -> list[Any]:
    records = []
    with Gateway(api_key="k", base_url=fake.base_url, settings=GatewaySettings(cache_breakpoints=breakpoints),
                 retry=RetryPolicy(max_retries=0)) as gateway:
        messages = history(0)
        for _ in range(turns):
            completion = gateway.complete(model=model, messages=messages, tools=TOOL_SCHEMAS, session_id=model)
            records.append(completion.record)
            messages = [*messages, completion.message, *({"role": "tool", "tool_call_id": c["id"], "content": LONG}
                                                         for c in completion.tool_calls)]
    return records


def test_anthropic_caches_only_at_breakpoints_others_by_themselves() -> None:
    with FakeGateway() as fake:
        without = calls(fake, CLAUDE, breakpoints=False)
        assert [r.cached_tokens for r in without] == [0, 0, 0, 0]  # nothing cached without being told
        assert all(r.cache_write_tokens == 0 for r in without)
        told = calls(fake, "anthropic/claude-sonnet-4.5", breakpoints=True)
        assert told[0].cache_write_tokens == told[0].prompt_tokens and told[0].cached_tokens == 0
        assert all(r.cached_tokens == previous.prompt_tokens for previous, r in itertools.pairwise(told))
        assert sum(r.cost_usd for r in told[1:]) < sum(r.cost_usd for r in without[1:])  # reads are cheaper
        automatic = calls(fake, "deepseek/deepseek-v4-pro", breakpoints=True)
        assert not any(isinstance(m.get("content"), list) for m in fake.completions[-1]["request"]["messages"])
        assert automatic[-1].cached_tokens > 0 and automatic[-1].cache_write_tokens == 0


def test_the_fake_counts_at_most_four_breakpoints_and_none_below_the_minimum() -> None:
    with FakeGateway() as fake, Gateway(api_key="k", base_url=fake.base_url,
                                        retry=RetryPolicy(max_retries=0)) as gateway:
        short = [{"role": "system", "content": [{"type": "text", "text": "Be brief.",
                                                 "cache_control": {"type": "ephemeral"}}]},
                 {"role": "user", "content": "Topic id: t"}]
        for _ in range(2):
            record = gateway.complete(model=CLAUDE, messages=short).record
        assert (record.cached_tokens, record.cache_write_tokens) == (0, 0)  # under 1,024 tokens: not cached
        marked = [{"role": "user" if i % 2 else "assistant" if i else "system",
                   "content": [{"type": "text", "text": f"part {i} " + LONG, "cache_control": {"type": "ephemeral"}}]}
                  for i in range(6)]
        marked[-1]["role"] = "user"
        first = gateway.complete(model=CLAUDE, messages=marked).record
        # the last four breakpoints count: the prefix up to the first two is written with them, not at them
        assert first.cache_write_tokens == first.prompt_tokens


@pytest.mark.slow
def test_the_request_with_breakpoints_is_one_openrouter_publishes() -> None:
    schema = json.loads((ROOT / "tests" / "data" / "openrouter" / "chat-request.schema.json").read_text("utf-8"))
    with FakeGateway() as fake:
        calls(fake, CLAUDE, breakpoints=True, turns=3)
        for completion in fake.completions:
            jsonschema.validate(completion["request"], schema)
            assert "cache_control" not in completion["request"]["provider"]  # not a routing parameter


def test_a_claude_leg_reads_most_of_its_prompt_from_the_cache(repo: Path, fake_env: dict[str, str],
                                                            gateway: Any) -> None:
    configure(repo)
    gateway.set_scenario({"script": {"searches": 8, "per_turn": 1}})  # a 10-call leg
    run_legs(repo, fake_env, [CONTROL])  # anthropic/claude-sonnet-4.6
    leg = view(repo, CONTROL)
    assert leg.status["status"] == "ok" and len(leg.calls) >= 10
    prompt = sum(c["prompt_tokens"] for c in leg.calls)
    read = sum(c["cached_tokens"] for c in leg.calls)
    research = [c for c in leg.calls if c["purpose"] == "research"]
    # the research conversation reads most of its prompt from the cache; the writing call is a fresh
    # prompt (the dossier), written to the cache once
    research_read = sum(c["cached_tokens"] for c in research) / sum(c["prompt_tokens"] for c in research)
    assert research_read > 0.6 and read / prompt > 0.5, (research_read, read, prompt)
    compacted = any(e.get("event") == "compact" for e in leg.trace)
    misses = [c for c in research[2:] if c["cached_tokens"] == 0]
    # once the prompt reaches 1,024 tokens, every later research step reads what the step before it wrote —
    # but the one step that compacts the history (in one go, rarely) rewrites it; the writing call is a
    # fresh prompt: it writes its own
    assert len(misses) <= int(compacted), misses
    assert leg.meta is not None and leg.meta["usage"]["cached_tokens"] == read
