"""Every request body of a demo run, validated against the request schema OpenRouter publishes.

The demo (`research-dispatch demo`, run as a user types it) sends every chat request of a whole
refresh — five research legs on five model families, and the synthesis — to the fake gateway, which
writes each body as sent to `RESEARCH_DISPATCH_FAKE_GATEWAY_LOG`. Each body is then
validated against `tests/data/openrouter/chat-request.schema.json` (OpenRouter's OpenAPI `ChatRequest`,
see NOTE.md there) twice: as published, and closed (no property on the request, a message or a tool call
that the description does not document), and checked for the rules the schema cannot express.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from research_dispatch_fakes.gateway import REQUEST_LOG_VARIABLE
from tests.bounds.conftest import child_env
from tests.clirun import run_cli

SCHEMA = Path(__file__).resolve().parent / "data" / "openrouter" / "chat-request.schema.json"
CLOSED = ("ChatRequest", "ChatSystemMessage", "ChatUserMessage", "ChatDeveloperMessage", "ChatAssistantMessage",
          "ChatToolMessage", "ChatToolCall")


def published() -> dict[str, Any]:
    return dict(json.loads(SCHEMA.read_text(encoding="utf-8")))


def closed() -> dict[str, Any]:
    schema = copy.deepcopy(published())
    for name in CLOSED:
        schema["$defs"][name]["additionalProperties"] = False
    return schema


@pytest.fixture(scope="module")
def demo_requests(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """`research-dispatch demo` as a user runs it (a fresh interpreter, legs in parallel), with the fake
    gateway logging every body it receives from the real `openai` client over real HTTP."""
    root = tmp_path_factory.mktemp("demo")
    log = root / "requests.jsonl"
    done = run_cli("demo", "--dir", str(root / "demo"), env=child_env({REQUEST_LOG_VARIABLE: str(log)}))
    assert done.code == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_the_demo_sent_research_and_synthesis_requests(demo_requests: list[dict[str, Any]]) -> None:
    models = {body["model"] for body in demo_requests}
    assert {"google/gemini-3.1-pro-preview", "deepseek/deepseek-v4-pro", "openai/gpt-5",
            "anthropic/claude-sonnet-4.6", "moonshotai/kimi-k2-thinking"} <= models
    assert any(body.get("tools") for body in demo_requests)
    assert any(body.get("response_format", {}).get("type") == "json_schema" for body in demo_requests)


@pytest.mark.slow
@pytest.mark.parametrize("variant", [published, closed], ids=["as published", "closed"])
def test_every_request_validates_against_openrouters_chat_request_schema(
        demo_requests: list[dict[str, Any]], variant: Any) -> None:
    validator = jsonschema.Draft202012Validator(variant())
    problems = [f"request {n} ({body['model']}): {error.json_path}: {error.message[:300]}"
                for n, body in enumerate(demo_requests) for error in validator.iter_errors(body)]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.slow
def test_rules_the_schema_cannot_express(demo_requests: list[dict[str, Any]]) -> None:
    for body in demo_requests:
        assert body["provider"]["require_parameters"] is True and "models" not in body
        if body["model"].startswith("deepseek/"):  # its endpoints list max_tokens only
            assert "max_tokens" in body and "max_completion_tokens" not in body
        for message in body["messages"]:
            if message["role"] != "assistant":
                continue
            assert message.get("content", "present") is not None  # never null
            assert "content" in message or message.get("tool_calls")
            if message.get("tool_calls") and body["model"].startswith("google/gemini-3"):
                assert {d["id"] for d in message["reasoning_details"]} == {c["id"] for c in message["tool_calls"]}


def test_the_closed_schema_has_teeth() -> None:
    """The check would catch the old bug: an assistant turn echoed with `function_call`, an extra key."""
    body = {"model": "deepseek/deepseek-v4-pro", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "function_call": None, "tool_calls": [
            {"id": "c1", "type": "function", "index": 0, "function": {"name": "f", "arguments": "{}"}}]}]}
    errors = list(jsonschema.Draft202012Validator(closed()).iter_errors(body))
    assert errors and list(jsonschema.Draft202012Validator(published()).iter_errors(body)) == []
    assert list(jsonschema.Draft202012Validator(closed()).iter_errors({**body, "max_completion_tokens": "x"}))
