"""Structured output on any gateway (issue 22 point 8): the form a server takes, set or learnt.

OpenRouter takes `response_format` json_schema; llama-cpp-python's server refuses it (422, "Input should
be 'text' or 'json_object'") and takes `json_object` with the schema; some servers take only a forced
tool call. Here the strict fake plays such a server (scenario `response_formats`), the real `openai`
client talks to it over HTTP, and the rules are: a refused form is learnt once per model and never sent
again; a refused request is never retried unchanged; a configured form is used as is; and `synthesize`
through such a server writes its synthesis with structured requests accepted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import GatewaySettings
from research_dispatch.core.errors import GatewayError
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.gateway.client import Gateway
from research_dispatch_fakes.gateway import FakeGateway
from tests.bounds.conftest import child_env
from tests.clirun import run_cli
from tests.conftest import CANARY, ROOT

MODEL = "qwen/qwen3-8b"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
USER = [{"role": "user", "content": "Answer in JSON."}]
RETRIES = RetryPolicy(max_retries=3, sleep=lambda _s: None)  # a refused form must not use them


def local(server: FakeGateway, **settings: Any) -> Gateway:
    return Gateway(api_key="sk-local", base_url=server.base_url, retry=RETRIES,
                   settings=GatewaySettings(kind="openai-compatible", **settings))


def forms_sent(server: FakeGateway) -> list[str]:
    sent = []
    for request, _ in server.requests:
        if request.path.endswith("/chat/completions"):
            body = json.loads(request.body)
            sent.append(body["response_format"]["type"] if "response_format" in body else
                        "tool_call" if isinstance(body.get("tool_choice"), dict) else "plain")
    return sent


def test_a_server_that_refuses_json_schema_is_asked_with_json_object_once_learnt() -> None:
    with FakeGateway({"response_formats": ["text", "json_object"]}) as server, local(server) as gateway:
        first = gateway.complete_structured(model=MODEL, messages=USER, name="answer", schema=SCHEMA)
        second = gateway.complete_structured(model=MODEL, messages=USER, name="answer", schema=SCHEMA)
        assert json.loads(first.content) == {} and json.loads(second.content) == {}  # the fake's unknown-name answer
        assert forms_sent(server) == ["json_schema", "json_object", "json_object"]  # refused once, never resent
        sent = json.loads(server.requests[1][0].body)["response_format"]
        assert sent == {"type": "json_object", "schema": {**SCHEMA, "title": "answer"}}
        other = gateway.complete_structured(model="qwen/qwen3-14b", messages=USER, name="answer", schema=SCHEMA)
        assert other.record.served_model == "qwen/qwen3-14b"
        assert forms_sent(server)[3:] == ["json_schema", "json_object"]  # learnt per model


def test_a_server_that_takes_no_response_format_gets_a_forced_tool_call() -> None:
    with FakeGateway({"response_formats": ["text"]}) as server, local(server) as gateway:
        completion = gateway.complete_structured(model=MODEL, messages=USER, name="answer", schema=SCHEMA)
        assert forms_sent(server) == ["json_schema", "json_object", "tool_call"]
        assert json.loads(completion.content) == {}  # the forced call's arguments are the answer
        body = json.loads(server.requests[-1][0].body)
        assert body["tool_choice"] == {"type": "function", "function": {"name": "answer"}}
        assert body["tools"][0]["function"]["parameters"] == SCHEMA


def test_a_configured_form_is_used_as_is_and_a_server_refusing_every_form_is_one_clear_error() -> None:
    with FakeGateway({"response_formats": ["text", "json_object"]}) as server:
        with local(server, structured_output="json_object") as gateway:
            gateway.complete_structured(model=MODEL, messages=USER, name="answer", schema=SCHEMA)
        assert forms_sent(server) == ["json_object"]
        server.set_scenario({"response_formats": ["text"], "rules": [{"match": {"kind": "structured"}, "status": 400,
                                                                        "message": "tools are not supported"}]})
        with local(server, structured_output="auto") as gateway:
            with pytest.raises(GatewayError, match="took no form of structured output") as refused:
                gateway.complete_structured(model=MODEL, messages=USER, name="answer", schema=SCHEMA)
            assert "response_format.type: Input should be 'text'" in str(refused.value)
            assert "tools are not supported" in str(refused.value)
            with pytest.raises(GatewayError, match="each form was refused earlier in this run"):
                gateway.complete_structured(model=MODEL, messages=USER, name="answer", schema=SCHEMA)
        assert forms_sent(server)[1:] == ["json_schema", "json_object", "tool_call"]  # each once, no retry


def test_openrouter_asks_for_json_schema_only() -> None:
    with FakeGateway() as server, Gateway(api_key="sk-or", base_url=server.base_url, retry=RETRIES) as gateway:
        gateway.complete_structured(model="openai/gpt-5-mini", messages=USER, name="answer", schema=SCHEMA)
    assert forms_sent(server) == ["json_schema"]


def test_synthesize_through_a_local_server_that_refuses_json_schema(tmp_path: Path) -> None:
    """`synthesize` as a user types it, on reports of tests/data/v0.1.0, through an openai-compatible gateway
    that refuses json_schema: it learns json_object once per model and writes the synthesis."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "tests" / "data" / "v0.1.0", repo, ignore=shutil.ignore_patterns("legs", "NOTE.md"))
    with (repo / "pyproject.toml").open("a", encoding="utf-8") as config:
        config.write('\n[tool.research-dispatch.gateway]\nkind = "openai-compatible"\n')
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with FakeGateway({"response_formats": ["text", "json_object"]}) as server:
        env = child_env({"OPENAI_API_KEY": "sk-local-canary-1f2e3d4c", "OPENAI_BASE_URL": server.base_url,
                         "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"]})
        done = run_cli("synthesize", "--repo", str(repo), env=env)
        sent = forms_sent(server)
        accepted = [c for c in server.completions if c["status"] == 200]
    assert done.code == 0, done.output
    assert (repo / "framework" / "claims.json").is_file()
    models = {c["requested_model"] for c in accepted}
    assert accepted and sent.count("json_schema") == len(models)  # refused once per model, never again
    assert all(c["request"]["response_format"]["type"] == "json_object" for c in accepted)
