"""`check --online` (issue 24) and the model catalogue check it shares with `run`/`research` (issue 22.3):
against the fake gateway over real HTTP, every problem in one run, one line each, exit 2.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from research_dispatch.gateway.catalogue import Catalogue, ListedModel, parse_catalogue
from research_dispatch_fakes.gateway import FakeGateway
from tests.bounds.conftest import child_env
from tests.clirun import run_cli
from tests.conftest import ROOT

KEY = "sk-or-check-online-test-key"
TOPIC = """id: rag-eval
title: Evaluating RAG systems
scope: Survey how retrieval-augmented generation systems are evaluated.
models:
  - model: openai/gtp-5
    rationale: a typo of openai/gpt-5
  - model: qwen/qwen3-max
    rationale: listed, but its endpoints take no tools
  - model: anthropic/claude-sonnet-4.6
    rationale: fine
  - model: deepseek/deepseek-v4-pro
    provider: nowhere
    rationale: pinned to a provider that does not serve it
"""
NO_TOOLS = ["max_tokens", "response_format", "structured_outputs", "temperature"]


@pytest.fixture
def gateway() -> Iterator[FakeGateway]:
    scenario = {"models": ["qwen/qwen3-max"],
                "endpoints": {"qwen/qwen3-max": [{"provider": "Alibaba", "tag": "alibaba",
                                                  "supported_parameters": NO_TOOLS}]}}
    with FakeGateway(scenario=scenario, valid_keys={KEY}) as fake:
        yield fake


def review(tmp_path: Path, topic: str = TOPIC, extra: str = "") -> Path:
    repo = tmp_path / "review"
    (repo / "topics").mkdir(parents=True)
    (repo / "topics" / "01-rag-eval.yaml").write_text(topic, encoding="utf-8")
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\n" + extra, encoding="utf-8")
    return repo


def env_for(gateway: FakeGateway, key: str = KEY) -> dict[str, str]:
    return child_env({"OPENROUTER_API_KEY": key, "OPENROUTER_BASE_URL": gateway.base_url})


def test_the_fakes_model_list_is_openrouters_published_shape(gateway: FakeGateway) -> None:
    schema = json.loads((ROOT / "tests/data/openrouter/models-list.schema.json").read_text(encoding="utf-8"))
    with urllib.request.urlopen(gateway.base_url + "/models", timeout=30) as response:
        body = json.load(response)
    jsonschema.validate(body, schema)
    ids = [entry["id"] for entry in body["data"]]
    assert "qwen/qwen3-max" in ids and "openai/gpt-5" in ids and "openai/gtp-5" not in ids
    qwen = next(entry for entry in body["data"] if entry["id"] == "qwen/qwen3-max")
    assert "tools" not in qwen["supported_parameters"]


def test_check_online_lists_every_model_problem_in_one_run(tmp_path: Path, gateway: FakeGateway) -> None:
    repo = review(tmp_path, extra='[tool.research-dispatch.synthesis]\nextractor_model = "openai/gpt5-mini"\n'
                                  'citation_models = ["google/gemini-3-flsh"]\n')
    done = run_cli("check", "--online", env=env_for(gateway), cwd=repo)
    assert done.code == 2, done.output
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert all(line.startswith("error: ") for line in lines), lines
    text = done.stderr
    assert ("topics/01-rag-eval.yaml: models[0].model: openai/gtp-5 is not a model the gateway lists; "
            "did you mean openai/gpt-5") in text
    assert ("topics/01-rag-eval.yaml: models[1].model: qwen/qwen3-max does not list tools in its supported "
            "parameters, which the researcher of rag-eval's calls need") in text
    assert ("topics/01-rag-eval.yaml: models[3].provider: no endpoint of deepseek/deepseek-v4-pro is served "
            "by provider nowhere") in text
    assert ("pyproject.toml: tool.research-dispatch.synthesis.extractor_model: openai/gpt5-mini is not a model "
            "the gateway lists; did you mean openai/gpt-5-mini") in text
    assert "pyproject.toml: tool.research-dispatch.synthesis.citation_models[0]: google/gemini-3-flsh" in text
    assert len(lines) == 5, lines
    assert gateway.completions == []  # not one chat call was made


def test_check_online_passes_a_plan_the_gateway_can_serve(tmp_path: Path, gateway: FakeGateway) -> None:
    topic = TOPIC.split("models:")[0] + "models:\n  - model: openai/gpt-5\n  - model: anthropic/claude-sonnet-4.6\n"
    done = run_cli("check", "--online", env=env_for(gateway), cwd=review(tmp_path, topic))
    assert done.code == 0, done.output
    assert done.stdout.strip() == "ok: 1 topic(s), 2 leg(s), checked online"


def test_check_online_names_a_key_the_gateway_refuses(tmp_path: Path, gateway: FakeGateway) -> None:
    done = run_cli("check", "--online", env=env_for(gateway, key="sk-or-not-known"), cwd=review(tmp_path))
    assert done.code == 2, done.output
    assert "environment: OPENROUTER_API_KEY: the gateway refused the key" in done.stderr
    assert "sk-or-not-known" not in done.output


def test_a_dated_permaslug_or_a_variant_is_the_listed_model() -> None:
    catalogue = Catalogue((ListedModel("openai/gpt-5", "openai/gpt-5-2025-08-07", frozenset({"tools"})),
                           ListedModel("openai/gpt-5-mini", "openai/gpt-5-mini", frozenset())))
    assert catalogue.find("openai/gpt-5:nitro") is catalogue.models[0]
    assert catalogue.find("openai/gpt-5-20260401") is catalogue.models[0]
    assert catalogue.find("openai/gpt-5-2025-08-07") is catalogue.models[0]
    assert catalogue.find("openai/gtp-5") is None
    assert catalogue.suggestions("openai/gtp-5")[0] == "openai/gpt-5"


def test_a_model_list_without_data_is_an_error_in_the_response() -> None:
    from research_dispatch.core.errors import ErrorInResponse

    with pytest.raises(ErrorInResponse):
        parse_catalogue({"error": {"code": 500, "message": "oops"}})


def tavily_env(gateway: FakeGateway) -> dict[str, str]:
    return {**env_for(gateway), "TAVILY_API_KEY": "tvly-check-online-test", "TAVILY_BASE_URL": "http://127.0.0.1:9"}


@pytest.mark.parametrize("argv", [["research", "rag-eval"], ["run", "--no-publish"]])
def test_research_and_run_refuse_a_plan_the_gateway_cannot_serve_before_any_chat_call(
        tmp_path: Path, gateway: FakeGateway, argv: list[str]) -> None:
    repo = review(tmp_path)
    done = run_cli(*argv, env=child_env(tavily_env(gateway)), cwd=repo)
    assert done.code == 2, done.output
    assert "models[0].model: openai/gtp-5 is not a model the gateway lists; did you mean openai/gpt-5" in done.stderr
    assert "models[1].model: qwen/qwen3-max does not list tools" in done.stderr
    assert "Traceback" not in done.stderr
    assert gateway.completions == []  # refused before the first chat call: nothing was spent
    assert not (repo / "research").exists() or not any((repo / "research").iterdir())


def test_an_extraction_model_without_structured_outputs_is_refused_before_any_leg(
        tmp_path: Path, gateway: FakeGateway) -> None:
    """Issue 22.3: found before the legs spend, not when the synthesis runs after them."""
    gateway.set_scenario({"endpoints": {"openai/gpt-5-mini": [
        {"provider": "OpenAI", "tag": "openai", "supported_parameters": ["max_tokens", "tools", "temperature"]}]}})
    topic = TOPIC.split("models:")[0] + "models:\n  - model: openai/gpt-5\n"
    done = run_cli("run", "--no-publish", env=child_env(tavily_env(gateway)), cwd=review(tmp_path, topic))
    assert done.code == 2, done.output
    assert ("pyproject.toml: tool.research-dispatch.synthesis.extractor_model: openai/gpt-5-mini does not list "
            "response_format, structured_outputs in its supported parameters") in done.stderr
    assert gateway.completions == []
