"""The gateway against the wire rules real services enforce (issue 13), through the real `openai` client
over HTTP against the strict fake gateway — and the `openai-compatible` kind.

Each test names the rule it proves; docs/REAL-SERVICES.md lists them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.config.settings import GatewaySettings
from research_dispatch.core.errors import GatewayError, MissingKey, UnsupportedParameters, UnusableUsage
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.gateway.client import Gateway, canonical_assistant_turn, credentials
from research_dispatch.gateway.endpoints import (
    Endpoint,
    EndpointPrice,
    PriceOverride,
    Pricing,
    least_cost,
    parse_endpoints,
    request_shape,
)
from research_dispatch.tools.search import TOOL_SCHEMAS
from research_dispatch_fakes.gateway import FakeGateway
from tests.clirun import CliRun, run_cli
from tests.conftest import CANARY
from tests.profiles import examples
from tests.reliability.conftest import CONTROL, TARGET, configure, run_legs, view

KEY = "sk-or-test-wire"
USER = [{"role": "user", "content": "Topic id: t\nTitle: T\nResearch brief:\nDiLoCo\n"}]
NO_RETRY = RetryPolicy(max_retries=0, sleep=lambda _s: None)


@pytest.fixture
def gateway_server() -> Any:
    with FakeGateway() as server:
        yield server


def product(server: FakeGateway, **settings_kw: Any) -> Gateway:
    return Gateway(api_key=KEY, base_url=server.base_url, settings=GatewaySettings(**settings_kw), retry=NO_RETRY)


def last_request(server: FakeGateway) -> dict[str, Any]:
    return server.completions[-1]["request"]


# ---------------------------------------------------------------------------------------------
# require_parameters: only what the pinned endpoints list
# ---------------------------------------------------------------------------------------------
def test_deepseek_pinned_gets_max_tokens_not_max_completion_tokens(gateway_server: FakeGateway) -> None:
    """DeepSeek's endpoint lists `max_tokens` only: the cap goes under that name, and the call is served."""
    with product(gateway_server) as gw:
        completion = gw.complete(model="deepseek/deepseek-v4-pro", provider="deepseek", messages=USER,
                                 tools=TOOL_SCHEMAS, max_completion_tokens=900)
    body = last_request(gateway_server)
    assert body["max_tokens"] == 900 and "max_completion_tokens" not in body
    assert body["provider"] == {"order": ["deepseek"], "allow_fallbacks": False, "require_parameters": True}
    assert completion.record.verdict == "exact"


def test_endpoints_that_all_list_max_completion_tokens_get_it(gateway_server: FakeGateway) -> None:
    with product(gateway_server) as gw:
        gw.complete(model="openai/gpt-5-mini", provider="openai", messages=USER, tools=TOOL_SCHEMAS)
    body = last_request(gateway_server)
    assert "max_completion_tokens" in body and "max_tokens" not in body and body["tool_choice"] == "auto"


def test_unpinned_route_uses_the_cap_every_endpoint_lists(gateway_server: FakeGateway) -> None:
    with product(gateway_server) as gw:
        gw.complete(model="deepseek/deepseek-v4-pro", messages=USER)
    assert "max_tokens" in last_request(gateway_server)


def test_listing_is_fetched_once_per_model_for_the_gateway(gateway_server: FakeGateway) -> None:
    with product(gateway_server) as gw:
        for _ in range(3):
            gw.complete(model="deepseek/deepseek-v4-pro", provider="deepseek", messages=USER)
        gw.pricing("deepseek/deepseek-v4-pro", "deepseek")
    assert len(gateway_server.requests_to("/models/deepseek/deepseek-v4-pro/endpoints")) == 1


def test_optional_parameter_an_endpoint_does_not_list_is_left_out(gateway_server: FakeGateway) -> None:
    params = ["max_tokens", "tools", "temperature"]  # no tool_choice
    gateway_server.set_scenario({"endpoints": {"acme/*": [{"provider": "Acme", "tag": "acme",
                                                           "supported_parameters": params}]}})
    with product(gateway_server) as gw:
        gw.complete(model="acme/model-1", provider="acme", messages=USER, tools=TOOL_SCHEMAS, tool_choice="none")
    body = last_request(gateway_server)
    assert "tool_choice" not in body and body["tools"] and body["max_tokens"]


@pytest.mark.parametrize(("params", "kwargs", "missing"), [
    (["max_tokens", "temperature"], {"tools": TOOL_SCHEMAS}, "tools"),
    (["max_tokens", "response_format"],
     {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": {}}}},
     "structured_outputs"),
])
def test_a_parameter_the_call_needs_but_no_endpoint_lists_is_refused_before_any_spend(
        gateway_server: FakeGateway, params: list[str], kwargs: dict[str, Any], missing: str) -> None:
    gateway_server.set_scenario({"endpoints": {"acme/*": [{"provider": "Acme", "tag": "acme",
                                                           "supported_parameters": params}]}})
    with product(gateway_server) as gw, pytest.raises(UnsupportedParameters, match=missing):
        gw.complete(model="acme/model-1", provider="acme", messages=USER, **kwargs)
    assert gateway_server.completions == []


def test_request_shape_without_a_listing_falls_back_to_max_tokens() -> None:
    shape = request_shape([], required=frozenset({"tools"}), wanted=frozenset({"tool_choice"}), model="m/x")
    assert shape.output_cap == "max_tokens" and shape.optional == {"tool_choice"}


@given(st.lists(st.sets(st.sampled_from(["max_tokens", "max_completion_tokens", "tools", "tool_choice",
                                         "response_format"])), min_size=1, max_size=5))
@settings(max_examples=examples(200), deadline=None)
def test_every_shape_is_servable_by_some_endpoint(endpoint_params: list[set[str]]) -> None:
    """Rule: with require_parameters, the parameters sent must all be listed by ONE endpoint."""
    payload = {"data": {"endpoints": [{"provider_name": f"P{i}", "tag": f"p{i}", "supported_parameters": sorted(p)}
                                      for i, p in enumerate(endpoint_params)]}}
    endpoints = parse_endpoints(payload)
    try:
        shape = request_shape(endpoints, required=frozenset({"tools"}), wanted=frozenset({"tool_choice"}),
                              model="m/x")
    except UnsupportedParameters:
        assert not any("tools" in p for p in endpoint_params)
        return
    sent = {"tools"} | set(shape.optional) | ({shape.output_cap} if shape.output_cap else set())
    assert any(sent <= p for p in endpoint_params)
    if any({"max_tokens", "max_completion_tokens"} & p for p in endpoint_params if "tools" in p):
        assert shape.output_cap is not None


# ---------------------------------------------------------------------------------------------
# canonical assistant turns and thought signatures
# ---------------------------------------------------------------------------------------------
def test_canonical_turn_drops_null_content_and_deprecated_fields() -> None:
    raw = {"role": "assistant", "content": None, "refusal": None, "function_call": None, "annotations": [],
           "reasoning": "thinking", "reasoning_details": [{"type": "reasoning.encrypted", "data": "sig", "id": "c1"}],
           "tool_calls": [{"id": "c1", "type": "function", "index": 0,
                           "function": {"name": "web_search", "arguments": "{\"query\": \"x\"}"}}]}
    assert canonical_assistant_turn(raw) == {
        "role": "assistant", "reasoning_details": raw["reasoning_details"],
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "web_search", "arguments": "{\"query\": \"x\"}"}}]}
    assert canonical_assistant_turn({"role": "assistant", "content": "text"}) == {"role": "assistant",
                                                                                 "content": "text"}
    assert canonical_assistant_turn({"role": "assistant", "content": "  "}) == {"role": "assistant"}


MESSAGE_VALUES = st.one_of(st.none(), st.text(max_size=5), st.integers(), st.lists(st.integers(), max_size=2))


@pytest.mark.slow
@given(content=st.one_of(st.none(), st.just(""), st.text(max_size=20)),
       extra=st.dictionaries(st.text(min_size=1, max_size=12), MESSAGE_VALUES, max_size=4),
       calls=st.lists(st.fixed_dictionaries({"id": st.text(min_size=1, max_size=6), "type": st.just("function"),
                                             "index": st.integers(0, 3),
                                             "function": st.fixed_dictionaries({
                                                 "name": st.text(max_size=8), "arguments": st.text(max_size=20)})}),
                      max_size=3),
       details=st.one_of(st.none(), st.lists(st.dictionaries(st.sampled_from(["type", "data", "id"]),
                                                             st.text(max_size=6)), min_size=1, max_size=2)))
@settings(max_examples=examples(300), deadline=None)
def test_canonical_turn_holds_for_any_response_message(content: Any, extra: dict[str, Any],
                                                       calls: list[dict[str, Any]], details: Any) -> None:
    message = {**extra, "role": "assistant", "content": content, "tool_calls": calls or None,
               "reasoning_details": details}
    turn = canonical_assistant_turn(message)
    assert set(turn) <= {"role", "content", "tool_calls", "reasoning_details"}
    assert "content" not in turn or (isinstance(turn["content"], str) and turn["content"].strip())
    for call in turn.get("tool_calls", []):
        assert set(call) == {"id", "type", "function"} and set(call["function"]) == {"name", "arguments"}
    if details:
        assert turn["reasoning_details"] is details  # verbatim, the very object


def test_gemini_thought_signatures_go_back_verbatim(gateway_server: FakeGateway) -> None:
    """Rule: Gemini 3 refuses the next call unless its tool-call turns carry `reasoning_details` back."""
    model = "google/gemini-3.1-pro-preview"
    with product(gateway_server) as gw:
        first = gw.complete(model=model, provider="google-vertex", messages=USER, tools=TOOL_SCHEMAS)
        assert first.tool_calls and first.message["reasoning_details"]
        answers = [{"role": "tool", "tool_call_id": c["id"], "content": "no results"} for c in first.tool_calls]
        gw.complete(model=model, provider="google-vertex", messages=[*USER, first.message, *answers],
                    tools=TOOL_SCHEMAS)  # accepted: the signatures came back
        stripped = {k: v for k, v in first.message.items() if k != "reasoning_details"}
        with pytest.raises(GatewayError, match="thought_signature") as refused:
            gw.complete(model=model, provider="google-vertex", messages=[*USER, stripped, *answers],
                        tools=TOOL_SCHEMAS)
    assert refused.value.status == 400 and refused.value.error_type == "invalid_request"


# ---------------------------------------------------------------------------------------------
# prices, BYOK, error_type, usage that cannot be accounted for
# ---------------------------------------------------------------------------------------------
def test_price_override_applies_past_its_threshold() -> None:
    schedule = EndpointPrice(prompt=1e-6, completion=4e-6, overrides=(
        PriceOverride(prompt=2e-6, completion=6e-6, min_prompt_tokens=200_000),
        PriceOverride(prompt=0.5e-6, timed=True)))
    pricing = Pricing(prompt=1e-6, completion=4e-6, schedules=(schedule,))
    assert pricing.at(200_000).prompt == 1e-6  # strictly more than the threshold
    assert pricing.at(200_001).prompt == 2e-6 and pricing.at(200_001).completion == 6e-6
    assert pricing.at(10).prompt == 1e-6  # a cheaper time window never lowers the bound


def test_gateway_reads_overrides_from_the_listing(gateway_server: FakeGateway) -> None:
    gateway_server.set_scenario({"pricing": {"*": {"prompt": 1.0, "completion": 4.0, "overrides": [
        {"min_prompt_tokens": 1000, "prompt": 10.0, "completion": 40.0}]}}})
    with product(gateway_server) as gw:
        pricing = gw.pricing("deepseek/deepseek-v4-pro", "deepseek")
    assert pricing is not None
    assert math.isclose(pricing.at(1000).prompt, 1e-6) and math.isclose(pricing.at(1001).prompt, 1e-5)
    assert math.isclose(pricing.at(1001).completion, 4e-5)


def test_byok_cost_records_fee_and_provider_charge(gateway_server: FakeGateway) -> None:
    gateway_server.set_scenario({"byok": True})
    with product(gateway_server) as gw:
        record = gw.complete(model="deepseek/deepseek-v4-pro", messages=USER).record
    assert record.is_byok and record.gateway_fee_usd and record.provider_cost_usd
    assert math.isclose(record.cost_usd, record.gateway_fee_usd + record.provider_cost_usd, rel_tol=1e-6)
    assert record.provider_cost_usd > 10 * record.gateway_fee_usd  # the fee alone would hide most of the money


@pytest.mark.parametrize("cost", ["NaN", -0.5, "free", True])
def test_unusable_cost_is_a_typed_error(gateway_server: FakeGateway, cost: Any) -> None:
    gateway_server.set_scenario({"rules": [{"usage_cost": cost}]})
    with product(gateway_server) as gw, pytest.raises(UnusableUsage, match=r"usage\.cost"):
        gw.complete(model="deepseek/deepseek-v4-pro", messages=USER)


@pytest.mark.parametrize("reported", [0, 1e-9])
def test_a_cost_below_the_listed_price_is_replaced_by_the_priced_figure_and_flagged(gateway_server: FakeGateway,
                                                                                      reported: float) -> None:
    """Issue 31 (low): a gateway reporting `cost: 0` (or next to nothing) for the tokens of a priced endpoint
    was believed, so no dollar cap could hold. The priced figure counts; the reported one is kept as the flag."""
    with product(gateway_server) as gw:
        honest = gw.complete(model="deepseek/deepseek-v4-pro", messages=USER).record
        gateway_server.set_scenario({"rules": [{"usage_cost": reported}]})
        floored = gw.complete(model="deepseek/deepseek-v4-pro", messages=USER).record
    assert honest.reported_cost_usd is None and honest.cost_usd > 0
    assert (floored.prompt_tokens, floored.completion_tokens) == (honest.prompt_tokens, honest.completion_tokens)
    assert floored.reported_cost_usd == reported
    assert math.isclose(floored.cost_usd, honest.cost_usd, rel_tol=1e-3)  # the fake bills exactly the listed price


def test_a_second_tiny_usage_chunk_cannot_shrink_what_the_call_is_billed_at(gateway_server: FakeGateway) -> None:
    """Issue 31 (low): a stream whose real usage is followed by a stray usage chunk of 2 tokens and $0.0000001
    was billed at the stray one. The usage that counts the most tokens is the one kept (gateway/stream.py)."""
    with product(gateway_server) as gw:
        honest = gw.complete(model="deepseek/deepseek-v4-pro", messages=USER).record
        gateway_server.set_scenario({"rules": [{"bad_chunk": "second_usage"}]})
        doubled = gw.complete(model="deepseek/deepseek-v4-pro", messages=USER).record
    assert (doubled.prompt_tokens, doubled.completion_tokens) == (honest.prompt_tokens, honest.completion_tokens)
    assert doubled.prompt_tokens > 1 and doubled.cost_usd == honest.cost_usd and doubled.reported_cost_usd is None


def test_a_cost_at_or_above_the_listed_price_is_taken_as_reported(gateway_server: FakeGateway) -> None:
    gateway_server.set_scenario({"rules": [{"usage_cost": 0.25}]})
    with product(gateway_server) as gw:
        record = gw.complete(model="deepseek/deepseek-v4-pro", messages=USER).record
    assert record.cost_usd == 0.25 and record.reported_cost_usd is None


@given(prompt=st.integers(0, 300_000), cached=st.integers(0, 300_000), completion=st.integers(0, 100_000),
       base=st.floats(1e-8, 1e-4), factor=st.floats(0.1, 10.0), threshold=st.integers(0, 300_000))
@settings(max_examples=examples(100), deadline=None)
def test_the_least_listed_cost_never_exceeds_what_the_listing_charges(prompt: int, cached: int, completion: int,
                                                                      base: float, factor: float,
                                                                      threshold: int) -> None:
    """The floor is a bound from below: at most what the dearest schedule (the pre-call bound) charges for
    the same tokens, whatever the overrides and time windows, so an honest cost is never raised."""
    schedule = EndpointPrice(prompt=base, completion=4 * base, overrides=(
        PriceOverride(prompt=base * factor, completion=4 * base * factor, min_prompt_tokens=threshold),
        PriceOverride(prompt=base / 2, timed=True)))
    endpoint = Endpoint(provider_name="DeepSeek", tag="deepseek", supported_parameters=frozenset(), price=schedule)
    floor = least_cost([endpoint], prompt_tokens=prompt, cached_tokens=min(cached, prompt),
                       completion_tokens=completion)
    dearest = schedule.at(prompt)
    assert floor is not None and floor <= (prompt - min(cached, prompt)) * dearest[0] + completion * dearest[1] + 1e-12


def _status_error(status: int, body: dict[str, Any]) -> openai.APIStatusError:
    response = httpx2.Response(status, json={"error": body},
                               request=httpx2.Request("POST", "http://127.0.0.1/chat/completions"))
    return openai.APIStatusError("error", response=response, body=body)


def test_error_type_is_read_where_the_docs_put_it(gateway_server: FakeGateway) -> None:
    with product(gateway_server) as gw:
        availability = gw._translate(_status_error(429, {
            "message": "All providers are at capacity", "error_type": "rate_limit_exceeded", "http_status": 429,
            "availability": {"code": "capacity_exhausted", "retryable": True, "retry_after": 40}}))
        provider = gw._translate(_status_error(400, {"code": 400, "message": "Provider returned error",
                                                     "metadata": {"error_type": "invalid_prompt"}}))
        not_retryable = gw._translate(_status_error(503, {
            "message": "No endpoints", "error_type": "not_found",
            "availability": {"code": "no_endpoints", "retryable": False}}))
    assert availability.error_type == "rate_limit_exceeded" and availability.retryable
    assert "capacity_exhausted" in str(availability)
    assert provider.error_type == "invalid_prompt" and not provider.retryable
    assert not_retryable.error_type == "not_found" and not not_retryable.retryable  # availability decides


def test_a_400_is_not_retried(gateway_server: FakeGateway) -> None:
    """A request the server refuses as invalid fails at once, even with retries left (the synthesis' failed
    judge batch, tested at the model seam, rests on this)."""
    gateway_server.set_scenario({"rules": [{"status": 400}]})
    retry = RetryPolicy(max_retries=3, sleep=lambda _s: None)
    with Gateway(api_key=KEY, base_url=gateway_server.base_url, retry=retry) as gw, \
            pytest.raises(GatewayError, match="gateway HTTP 400") as refused:
        gw.complete(model="openai/gpt-5-mini", messages=USER)
    assert refused.value.attempts == 1 and len(gateway_server.completions) == 1


def test_an_output_cut_at_the_cap_is_finish_reason_length(gateway_server: FakeGateway) -> None:
    """`finish_reason` and `native_finish_reason` are read from the response: a report cut at the output
    cap arrives as `length` (what the research loop continues, tested at the model seam)."""
    with product(gateway_server) as gw:
        completion = gw.complete(model="openai/gpt-5-mini", messages=USER, tools=TOOL_SCHEMAS, tool_choice="none",
                                 max_completion_tokens=300)
    assert completion.finish_reason == "length" and completion.tool_calls == []
    assert completion.record.finish_reason == "length" and completion.record.native_finish_reason == "max_tokens"
    assert 0 < len(completion.content) <= 300 * 4


# ---------------------------------------------------------------------------------------------
# kind = "openai-compatible"
# ---------------------------------------------------------------------------------------------
def test_openai_compatible_sends_nothing_openrouter_only(gateway_server: FakeGateway) -> None:
    with Gateway(api_key=KEY, base_url=gateway_server.base_url, retry=NO_RETRY,
                 settings=GatewaySettings(kind="openai-compatible")) as gw:
        completion = gw.complete(model="deepseek/deepseek-v4-pro", provider="deepseek", session_id="s",
                                 messages=USER, tools=TOOL_SCHEMAS, max_completion_tokens=700)
        assert gw.pricing("deepseek/deepseek-v4-pro", "deepseek") is None
        with pytest.raises(GatewayError, match="no /generation record"):
            gw.generation(completion.record.generation_id or "x")
    request, _ = gateway_server.requests[-1]
    body = json.loads(request.body)
    assert set(body) == {"model", "messages", "tools", "tool_choice", "max_tokens"} and body["max_tokens"] == 700
    assert not any(h.startswith("x-openrouter") or h == "http-referer" for h in request.headers)
    assert [r.path for r, _ in gateway_server.requests] == ["/api/v1/chat/completions"]  # no look-ups
    record = completion.record
    assert record.verdict == "self_reported" and record.served_model == "deepseek/deepseek-v4-pro"
    assert record.served_provider is None and record.gateway_kind == "openai-compatible"


def test_openai_compatible_other_model_is_model_fallback(gateway_server: FakeGateway) -> None:
    gateway_server.set_scenario({"rules": [{"serve_model": "qwen/qwen3-8b"}]})
    with Gateway(api_key=KEY, base_url=gateway_server.base_url, retry=NO_RETRY,
                 settings=GatewaySettings(kind="openai-compatible")) as gw:
        assert gw.complete(model="deepseek/deepseek-v4-pro", messages=USER).record.verdict == "model_fallback"


def test_openai_compatible_credentials_are_openai_variables() -> None:
    compatible = GatewaySettings(kind="openai-compatible")
    with pytest.raises(MissingKey, match="OPENAI_API_KEY"):
        credentials({"OPENROUTER_API_KEY": "k"}, compatible)
    with pytest.raises(Exception, match="OPENAI_BASE_URL"):
        credentials({"OPENAI_API_KEY": "k"}, compatible)
    creds = credentials({"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1/"}, compatible)
    assert creds.base_url == "http://127.0.0.1:8080/v1"


def _compatible_env(gateway: Any, tavily: Any) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-local-canary-5e4d3c2b1a", "OPENAI_BASE_URL": gateway.base_url,
            "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"], "TAVILY_BASE_URL": tavily.base_url}


@pytest.mark.parametrize(("trust", "verified", "code"), [(False, False, 3), (True, True, 0)])
def test_openai_compatible_leg_is_self_reported(repo: Path, gateway: Any, tavily: Any, trust: bool, verified: bool,
                                                code: int) -> None:
    configure(repo, gateway=f'kind = "openai-compatible", trust_self_reported = {str(trust).lower()}')
    results = run_legs(repo, _compatible_env(gateway, tavily), [TARGET])
    leg = view(repo, TARGET)
    assert leg.status["status"] == "ok" and results[TARGET.stem].exit_code == code
    assert leg.meta is not None and leg.meta["route"] == "self_reported"
    assert leg.meta["route_verified"] is verified and leg.meta["served_providers"] == []
    assert all(c["gateway_kind"] == "openai-compatible" and c["verdict"] == "self_reported" for c in leg.calls)
    assert not any("/endpoints" in r.path or "/generation" in r.path for r, _ in gateway.requests)


def _cli(repo: Path, *args: str, env: dict[str, str]) -> CliRun:
    """The command with only `env` (and a PATH) as its environment."""
    return run_cli(args[0], "--repo", str(repo), *args[1:], env={**env, "PATH": "/usr/bin:/bin"})


def test_verify_of_a_self_reported_route(repo: Path, gateway: Any, tavily: Any) -> None:
    env = _compatible_env(gateway, tavily)
    configure(repo, gateway='kind = "openai-compatible"')
    run_legs(repo, env, [TARGET, CONTROL])
    offline = _cli(repo, "verify", env=env)
    assert offline.code == 3 and "self_reported ⚠" in offline.stdout  # not trusted: not verified
    online = _cli(repo, "verify", "--online", env=env)
    assert online.code == 2 and "cannot re-check an openai-compatible gateway" in online.stderr
    assert "Traceback" not in online.stderr
    configure(repo, gateway='kind = "openai-compatible", trust_self_reported = true')
    trusted = _cli(repo, "verify", env=env)
    assert trusted.code == 0, trusted.stdout + trusted.stderr
