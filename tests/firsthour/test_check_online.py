"""`check --online` (issue 24) and the model catalogue check it shares with `run`/`research` (issue 22.3):
against the fake gateway over real HTTP, every problem in one run, one line each, exit 2.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from research_dispatch.gateway.catalogue import Catalogue, ListedModel, parse_catalogue
from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.tavily import FakeTavily
from tests.bounds.conftest import child_env
from tests.clirun import CliRun, run_cli
from tests.conftest import ROOT

KEY = "sk-or-check-online-test-key"
TAVILY_KEY = "tvly-check-online-test-key"
JUDGES = '[tool.research-dispatch.synthesis]\njudge_models = ["google/gemini-3.1-pro-preview"]\n'
"""A judge of neither report family (the defaults are anthropic's and openai's, the families written here)."""
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


def full_env(gateway: FakeGateway, tavily: FakeTavily) -> dict[str, str]:
    """The gateway's and Tavily's keys and base URLs (what a refresh needs), on the fakes."""
    return {"OPENROUTER_API_KEY": KEY, "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_API_KEY": TAVILY_KEY,
            "TAVILY_BASE_URL": tavily.base_url}


def test_the_fakes_model_list_is_openrouters_published_shape(gateway: FakeGateway) -> None:
    schema = json.loads((ROOT / "tests/data/openrouter/models-list.schema.json").read_text(encoding="utf-8"))
    with urllib.request.urlopen(gateway.base_url + "/models", timeout=30) as response:
        body = json.load(response)
    jsonschema.validate(body, schema)
    ids = [entry["id"] for entry in body["data"]]
    assert "qwen/qwen3-max" in ids and "openai/gpt-5" in ids and "openai/gtp-5" not in ids
    qwen = next(entry for entry in body["data"] if entry["id"] == "qwen/qwen3-max")
    assert "tools" not in qwen["supported_parameters"]


def check_online(repo: Path, env: dict[str, str], *args: str) -> CliRun:
    """`check --online` as a user runs it, in this interpreter (the fakes are real servers on 127.0.0.1)."""
    return run_cli("check", "--online", "--repo", str(repo), *args, env=env)


def errors(result: CliRun) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


@pytest.mark.slow
def test_check_online_lists_every_model_problem_in_one_run(tmp_path: Path, gateway: FakeGateway,
                                                           tavily: FakeTavily) -> None:
    repo = review(tmp_path, extra='[tool.research-dispatch.synthesis]\nextractor_model = "openai/gpt5-mini"\n'
                                  'citation_models = ["google/gemini-3-flsh"]\n')
    result = check_online(repo, full_env(gateway, tavily))
    assert result.code == 2, result.output
    assert "Traceback" not in result.output
    text = "\n".join(errors(result))
    assert ("topics/01-rag-eval.yaml: models[0].model: openai/gtp-5 is not a model the gateway lists; "
            "did you mean openai/gpt-5") in text
    assert ("topics/01-rag-eval.yaml: models[1].model: qwen/qwen3-max does not list tools in its supported "
            "parameters, which the researcher of rag-eval's calls need") in text
    assert ("topics/01-rag-eval.yaml: models[3].provider: no endpoint of deepseek/deepseek-v4-pro is served "
            "by provider nowhere") in text
    assert ("pyproject.toml: tool.research-dispatch.synthesis.extractor_model: openai/gpt5-mini is not a model "
            "the gateway lists; did you mean openai/gpt-5-mini") in text
    assert "pyproject.toml: tool.research-dispatch.synthesis.citation_models[0]: google/gemini-3-flsh" in text
    assert len(errors(result)) == 5, errors(result)
    # the report says each model once, on stdout, what was found
    assert "  ✗ model openai/gtp-5: is not a model the gateway lists; did you mean openai/gpt-5" in result.stdout
    assert ("  ✓ model anthropic/claude-sonnet-4.6: listed; takes what its calls need: response_format, "
            "structured_outputs (a synthesis judge); tools (the researcher of rag-eval)") in result.stdout
    assert gateway.completions == []  # not one chat call was made


@pytest.mark.slow
def test_check_online_passes_a_plan_the_gateway_can_serve(tmp_path: Path, gateway: FakeGateway,
                                                         tavily: FakeTavily) -> None:
    topic = TOPIC.split("models:")[0] + "models:\n  - model: openai/gpt-5\n  - model: anthropic/claude-sonnet-4.6\n"
    result = check_online(review(tmp_path, topic), full_env(gateway, tavily))
    assert result.code == 0, result.output
    assert result.stdout.splitlines()[-1] == "ok: 1 topic(s), 2 leg(s), checked online, 1 warning(s)"
    assert "judge_models: every judge" in result.stderr  # the default judges are the two report families


@pytest.mark.slow
def test_check_online_says_what_it_checked_one_line_each(tmp_path: Path, gateway: FakeGateway,
                                                         tavily: FakeTavily) -> None:
    """Like `gh auth status`: a line per key (and its credit), per model, per server, and the schedule."""
    gateway.set_scenario({"key": {"limit": 50.0, "usage": 12.5}})
    tavily.set_scenario({"usage": {"key_limit": 1000, "key_usage": 150, "plan": "Bootstrap", "plan_limit": 15000,
                                   "plan_usage": 500}})
    topic = TOPIC.split("models:")[0] + "models:\n  - model: openai/gpt-5\n  - model: anthropic/claude-sonnet-4.6\n"
    result = check_online(review(tmp_path, topic, extra=JUDGES), full_env(gateway, tavily))
    assert result.code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "checked online:" and lines[-1] == "ok: 1 topic(s), 2 leg(s), checked online"
    subjects = [line.split(":")[0].strip() for line in lines[1:-1]]
    assert subjects == ["✓ gateway", "✓ model openai/gpt-5", "✓ model anthropic/claude-sonnet-4.6",
                        "✓ model openai/gpt-5-mini", "✓ model google/gemini-3.1-pro-preview", "✓ search tavily",
                        "- schedule"]
    assert (f"✓ gateway: openrouter at {gateway.base_url}: OPENROUTER_API_KEY accepted; $37.50 left of its $50.00 "
            "limit") in result.stdout
    assert (f"✓ search tavily: {tavily.base_url}: TAVILY_API_KEY accepted; credits this cycle: key 150 used of "
            "1,000, plan Bootstrap 500 of 15,000; 850 left; no credit spent") in result.stdout
    assert tavily.calls == []  # no search, no extract: the key was checked through GET /usage alone
    assert "- schedule: not asked: set GITHUB_TOKEN and GITHUB_REPOSITORY" in result.stdout
    assert KEY not in result.output and TAVILY_KEY not in result.output


@pytest.mark.slow
def test_without_the_search_key_check_online_is_not_ok(tmp_path: Path, gateway: FakeGateway) -> None:
    """The trap: `check --online` said "ok … checked online" without TAVILY_API_KEY, and every research
    job then refused to start."""
    result = check_online(review(tmp_path), env_for(gateway))
    assert result.code == 2
    assert ("error: environment: TAVILY_API_KEY: TAVILY_API_KEY is not set; it is required to search the web"
            in result.stderr)
    assert "  ✗ search tavily: TAVILY_API_KEY is not set" in result.stdout
    assert "ok:" not in result.stdout


@pytest.mark.slow
def test_a_search_key_tavily_refuses_is_named_and_no_credit_is_spent(tmp_path: Path, gateway: FakeGateway) -> None:
    with FakeTavily(valid_keys={TAVILY_KEY}) as tavily:
        env = {**full_env(gateway, tavily), "TAVILY_API_KEY": "tvly-revoked-key"}
        result = check_online(review(tmp_path, extra=JUDGES), env)
        assert result.code == 2
        assert "error: environment: TAVILY_API_KEY: Tavily refused the key (HTTP 401)" in result.stderr
        assert f"  ✗ search tavily: {tavily.base_url}: Tavily refused the key (HTTP 401)" in result.stdout
        assert tavily.calls == [] and [r.path for r, _ in tavily.requests] == ["/usage"]
        assert "tvly-revoked-key" not in result.output


@pytest.mark.slow
def test_no_search_credit_left_is_a_problem_and_too_few_a_warning(tmp_path: Path, gateway: FakeGateway,
                                                                  tavily: FakeTavily) -> None:
    repo = review(tmp_path, TOPIC.split("models:")[0] + "models:\n  - model: openai/gpt-5\n", extra=JUDGES)
    tavily.set_scenario({"usage": {"key_limit": 100, "key_usage": 100}})
    result = check_online(repo, full_env(gateway, tavily))
    assert result.code == 2
    assert "error: environment: TAVILY_API_KEY: no Tavily credit is left this billing cycle" in result.stderr
    tavily.set_scenario({"usage": {"key_limit": 100, "key_usage": 90}})  # 10 left; a leg may spend 40 × 2
    result = check_online(repo, full_env(gateway, tavily))
    assert result.code == 0, result.output
    assert ("warning: environment: TAVILY_API_KEY: 10 Tavily credit(s) left, fewer than the plan's legs could spend "
            "(80: every step a search)") in result.stderr


@pytest.mark.slow
def test_a_gateway_key_short_of_the_plans_estimate_is_a_problem(tmp_path: Path, gateway: FakeGateway,
                                                                tavily: FakeTavily) -> None:
    """"Credits short": found before the run, not when the first leg gets HTTP 402."""
    gateway.set_scenario({"key": {"limit": 1.0, "usage": 0.99}})
    result = check_online(review(tmp_path, extra=JUDGES), full_env(gateway, tavily))
    assert result.code == 2
    assert re.search(r"error: environment: OPENROUTER_API_KEY: the key has \$0\.01 of credit left, less than this "
                     r"plan's estimate \(~\$\d+\.\d\d\): the refresh would stop short", result.stderr), result.stderr


@pytest.mark.slow
def test_an_exa_key_is_said_set_and_not_checked(tmp_path: Path, gateway: FakeGateway, tavily: FakeTavily) -> None:
    topic = TOPIC.split("models:")[0] + "models:\n  - model: openai/gpt-5\nsearch: {providers: [exa]}\n"
    repo = review(tmp_path, topic, extra=JUDGES)
    result = check_online(repo, full_env(gateway, tavily))
    assert "  ✗ search exa: EXA_API_KEY is not set" in result.stdout and result.code == 2
    result = check_online(repo, {**full_env(gateway, tavily), "EXA_API_KEY": "exa-check-online"})
    assert result.code == 0, result.output
    assert ("  - search exa: EXA_API_KEY is set; not checked online: Exa offers no free key check (a search spends "
            "credit)") in result.stdout


@pytest.mark.slow
def test_check_online_names_a_key_the_gateway_refuses(tmp_path: Path, gateway: FakeGateway,
                                                      tavily: FakeTavily) -> None:
    result = check_online(review(tmp_path), {**full_env(gateway, tavily), "OPENROUTER_API_KEY": "sk-or-not-known"})
    assert result.code == 2, result.output
    assert "environment: OPENROUTER_API_KEY: the gateway refused the key" in result.stderr
    assert "sk-or-not-known" not in result.output


@pytest.mark.slow
def test_check_json_problems_are_file_field_message_objects(tmp_path: Path, gateway: FakeGateway,
                                                            tavily: FakeTavily) -> None:
    result = check_online(review(tmp_path), full_env(gateway, tavily), "--json")
    assert result.code == 2
    document = json.loads(result.stdout)
    assert document["schema"] == "research-dispatch/check@2" and document["ok"] is False
    assert {"file": "topics/01-rag-eval.yaml", "field": "models[1].model",
            "message": "qwen/qwen3-max does not list tools in its supported parameters, which the researcher of "
                       "rag-eval's calls need"} in document["problems"]
    assert all(set(item) == {"file", "field", "message"} for item in document["problems"] + document["warnings"])
    first = document["checked"][0]
    assert (first["subject"], first["status"]) == ("gateway", "ok") and set(first) == {"subject", "status", "detail"}


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


@pytest.mark.slow
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


@pytest.mark.slow
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
