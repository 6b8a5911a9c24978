"""Reasoning budgets (issue 22 point 5): reasoning shares the output cap, so the cap leaves room for it.

The plan per family (`gateway/reasoning.py`) as pure rules; the request the gateway sends over HTTP to
the strict fake (the documented `reasoning` parameter only where the endpoints list it); the fake's own
behaviour (reasoning tokens are output tokens: a small cap yields `length` with empty content); and a
leg: on a route whose cap leaves no room the first report comes back empty, is asked again once with
twice the cap, and the default plan never gets there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
from hypothesis import given
from hypothesis import strategies as st

from research_dispatch.config.settings import GatewaySettings
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.gateway.client import Gateway
from research_dispatch.gateway.reasoning import EFFORT_SHARE, MIN_BUDGET_TOKENS, plan
from research_dispatch.tools.search import TOOL_SCHEMAS
from research_dispatch_fakes.gateway import FakeGateway
from tests.reliability.conftest import LegRef, calls_of, configure, run_legs, view

USER = [{"role": "user", "content": "Topic id: t\nTitle: T\nResearch brief:\nDiLoCo\n"}]
GPT5 = LegRef("03-monarch-torchforge-openenv", "monarch-torchforge-openenv", "openai/gpt-5")
NO_REASONING_LISTED = {"openai/gpt-5": [{"provider": "OpenAI", "tag": "openai",
                                         "supported_parameters": ["max_completion_tokens", "tools", "tool_choice"]}]}


def test_budget_families_get_a_token_budget_on_top_of_the_answer() -> None:
    shown = plan("anthropic/claude-sonnet-4.6", visible_cap=8192, steerable=True, reasons=True, budget_tokens=2048,
                 effort="low")
    assert (shown.parameter, shown.output_cap, shown.reasoning_tokens) == ({"max_tokens": 2048}, 10240, 2048)
    assert plan("google/gemini-3.1-pro-preview", visible_cap=8192, steerable=True, reasons=True,
                budget_tokens=4096, effort="low").parameter == {"max_tokens": 4096}


def test_effort_families_get_an_effort_and_the_cap_its_share_leaves_the_answer() -> None:
    shown = plan("openai/gpt-5", visible_cap=8192, steerable=True, reasons=True, budget_tokens=2048, effort="low")
    assert shown.parameter == {"effort": "low"} and shown.output_cap == 10240 and shown.reasoning_tokens == 2048


def test_routes_that_do_not_reason_or_cannot_be_steered() -> None:
    assert plan("openai/gpt-4o", visible_cap=8192, steerable=False, reasons=False, budget_tokens=2048,
                effort="low") == plan("x/y", visible_cap=8192, steerable=False, reasons=False, budget_tokens=1,
                                      effort="high")
    unsteered = plan("deepseek/deepseek-v4-pro", visible_cap=8192, steerable=False, reasons=True,
                     budget_tokens=2048, effort="low")
    assert unsteered.parameter is None and unsteered.output_cap == 10240  # include_reasoning only: room, no knob


@given(st.sampled_from(["anthropic/claude-sonnet-4.6", "google/gemini-3.1-pro-preview", "openai/gpt-5",
                        "moonshotai/kimi-k2-thinking"]),
       st.integers(256, 50_000), st.integers(1024, 20_000), st.sampled_from(sorted(EFFORT_SHARE)))
def test_a_caller_s_smaller_cap_is_honoured_and_leaves_at_least_half_to_the_answer(
        model: str, total: int, budget: int, effort: Any) -> None:
    full = plan(model, visible_cap=8192, steerable=True, reasons=True, budget_tokens=budget, effort=effort)
    squeezed = plan(model, visible_cap=8192, steerable=True, reasons=True, budget_tokens=budget, effort=effort,
                    total_cap=total)
    assert squeezed.output_cap == total
    if total < full.output_cap:
        assert squeezed.reasoning_tokens <= total // 2 + 1
        parameter = squeezed.parameter or {}
        assert parameter.get("max_tokens", MIN_BUDGET_TOKENS) >= MIN_BUDGET_TOKENS  # Anthropic's least budget


# ---------------------------------------------------------------------------------------------
# over HTTP
# ---------------------------------------------------------------------------------------------
def sent(server: FakeGateway, model: str, **settings: Any) -> dict[str, Any]:
    with Gateway(api_key="sk-or-test", base_url=server.base_url, settings=GatewaySettings(**settings),
                 retry=RetryPolicy(max_retries=0, sleep=lambda _s: None)) as gateway:
        gateway.complete(model=model, messages=USER, tools=TOOL_SCHEMAS)
    return dict(server.completions[-1]["request"])


def test_the_request_carries_reasoning_only_where_the_endpoints_list_it() -> None:
    with FakeGateway() as server:
        claude = sent(server, "anthropic/claude-sonnet-4.6")
        assert claude["reasoning"] == {"max_tokens": 2048} and claude["max_completion_tokens"] == 10240
        deepseek = sent(server, "deepseek/deepseek-v4-pro", reasoning_effort="medium")
        assert deepseek["reasoning"] == {"effort": "medium"} and deepseek["max_tokens"] == 16384
        server.set_scenario({"endpoints": NO_REASONING_LISTED})
        gpt5 = sent(server, "openai/gpt-5")
        assert "reasoning" not in gpt5 and gpt5["max_completion_tokens"] == 8192


def test_the_fake_bills_reasoning_inside_the_cap_and_a_small_cap_leaves_no_answer() -> None:
    """The fake's rule (a behaviour test): reasoning tokens come out of `max_tokens` first."""
    writing = [*USER, {"role": "user", "content": "Stop researching: the step budget is reached. Write the "
                                                  "complete report now from the sources above, citing their "
                                                  "[S<n>] ids. Do not call tools."}]
    with FakeGateway() as server, openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
        small = client.chat.completions.create(model="openai/gpt-5", messages=writing,  # type: ignore[arg-type]
                                               max_completion_tokens=1500)
        assert small.choices[0].finish_reason == "length" and small.choices[0].message.content == ""
        assert small.usage is not None and small.usage.completion_tokens_details is not None
        assert small.usage.completion_tokens == small.usage.completion_tokens_details.reasoning_tokens == 1500
        roomy = client.chat.completions.create(model="openai/gpt-5", messages=writing,  # type: ignore[arg-type]
                                               max_completion_tokens=10240, extra_body={"reasoning": {"effort": "low"}})
        assert roomy.choices[0].finish_reason == "stop" and roomy.choices[0].message.content
        assert roomy.usage is not None and roomy.usage.completion_tokens_details is not None
        assert roomy.usage.completion_tokens_details.reasoning_tokens == 2048
        plain = client.chat.completions.create(model="deepseek/deepseek-v4-pro", messages=writing,  # type: ignore
                                               max_tokens=1500)
        assert plain.usage is not None and plain.usage.completion_tokens_details is not None
        assert plain.usage.completion_tokens_details.reasoning_tokens == 0  # it does not reason unless asked


def test_a_reasoning_leg_s_cap_leaves_room_for_the_report(repo: Path, fake_env: dict[str, str], gateway: Any) -> None:
    """gpt-5 reasons by default; with the plan's cap (8192 for the answer, effort low: 10240) its report is
    never cut, and every call carries the effort."""
    configure(repo)
    run_legs(repo, fake_env, [GPT5])
    calls = calls_of(gateway, GPT5)
    assert {c["request"]["max_completion_tokens"] for c in calls} == {10240}
    assert all(c["request"]["reasoning"] == {"effort": "low"} for c in calls)
    assert "length" not in [c["finish_reason"] for c in calls]
    assert any(c["usage"]["completion_tokens_details"]["reasoning_tokens"] for c in calls)
    assert view(repo, GPT5).status["status"] == "ok"


def test_a_reply_the_cap_cut_empty_is_asked_again_once_with_twice_the_cap(repo: Path, fake_env: dict[str, str],
                                                                          gateway: Any) -> None:
    """A route whose endpoints do not say it reasons gets no room, and a small cap (2048): gpt-5 spends it
    all on reasoning and the report comes back empty (`length`); the same request goes again once with
    twice the cap, and that answer has room."""
    configure(repo, gateway="max_completion_tokens = 2048")
    gateway.set_scenario({"endpoints": NO_REASONING_LISTED})
    run_legs(repo, fake_env, [GPT5])
    calls = calls_of(gateway, GPT5)
    caps = [c["request"]["max_completion_tokens"] for c in calls]
    empty = next(i for i, c in enumerate(calls) if c["kind"] == "write")  # the first report: all reasoning
    assert calls[empty]["finish_reason"] == "length"
    assert calls[empty]["usage"]["completion_tokens_details"]["reasoning_tokens"] == 2048
    assert caps[empty + 1] == 4096 and calls[empty + 1]["kind"] == "write"
    assert calls[empty + 1]["request"]["messages"] == calls[empty]["request"]["messages"]  # the same request
    assert caps.count(4096) == 1  # once per leg
    assert calls[empty + 1]["usage"]["completion_tokens"] > 2048  # this time the answer had room
