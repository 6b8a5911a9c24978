"""One research leg end to end: the real openai and tavily clients over HTTP against the fakes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from research_dispatch.leg import contract
from research_dispatch.leg.report import load_report
from tests.clirun import CliRun, run_cli
from tests.conftest import CANARY, fast_retries, write_topic


def research(repo: Path, *args: str) -> CliRun:
    return run_cli("research", *args, "--repo", str(repo))


def front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1])


def test_clean_leg_writes_a_cited_report_with_an_exact_route(repo: Path, fake_env: dict, gateway) -> None:
    result = research(repo, "diloco-family")
    assert result.code == 0, result.output + result.stderr
    report_path = repo / "research" / "02-diloco-family.md"
    meta = front_matter(report_path)
    assert meta["schema"] == "research-dispatch/report@1"
    assert meta["route"] == "exact" and meta["route_verified"] is True
    assert meta["status"] == "ok" and meta["status_reasons"] == []
    assert meta["requested_model"] == "deepseek/deepseek-v4-pro" and meta["family"] == "deepseek"
    assert meta["served_models"] == ["deepseek/deepseek-v4-pro"] and meta["served_providers"] == ["DeepSeek"]
    assert 2000 <= meta["words"] <= 2500
    assert meta["calls"] == len(meta["generation_ids"]) == len(gateway.completions)
    assert [s["id"] for s in meta["sources"]] == list(range(1, len(meta["sources"]) + 1))
    assert len(meta["sources"]) >= 3
    for key in ("title", "topic", "usage", "started_at", "finished_at"):
        assert key in meta
    report = load_report(report_path, repo=repo)
    assert "## References" in report.body
    cited = {int(n) for group in __import__("re").findall(r"\[(\d+(?:, \d+)*)\]", report.body)
             for n in group.split(", ")}
    assert cited == {s["id"] for s in meta["sources"]}
    calls = [json.loads(line) for line in (repo / "research" / "02-diloco-family.calls.jsonl").read_text().splitlines()]
    assert [c["generation_id"] for c in calls] == meta["generation_ids"]
    assert {c["verdict"] for c in calls} == {"exact"}
    assert all("messages" not in c and "content" not in c for c in calls)
    trace = (repo / "build" / "traces" / "02-diloco-family.jsonl").read_text()
    assert '"event": "call"' in trace
    assert (repo / "build" / "legs" / "02-diloco-family.json").exists()


def test_requests_pin_the_route_and_ask_for_metadata(repo: Path, fake_env: dict, gateway) -> None:
    write_topic(repo, "02-diloco-family.yaml", (repo / "topics" / "02-diloco-family.yaml").read_text()
                + "    provider: deepseek\n")
    assert research(repo, "diloco-family").code == 0
    first = gateway.completions[0]
    body = first["request"]
    assert body["model"] == "deepseek/deepseek-v4-pro" and "models" not in body
    assert body["provider"] == {"order": ["deepseek"], "allow_fallbacks": False, "require_parameters": True}
    assert body["session_id"] == "2026-H2:02-diloco-family"
    assert first["metadata_requested"] is True


def test_model_substitution_on_one_call_is_model_fallback_and_exit_3(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"on_call": 2, "serve_model": "deepseek/deepseek-v3"}]})
    result = research(repo, "diloco-family")
    assert result.code == 3, result.output + result.stderr
    meta = front_matter(repo / "research" / "02-diloco-family.md")
    assert meta["route"] == "model_fallback" and meta["route_verified"] is False
    assert meta["served_models"] == ["deepseek/deepseek-v3", "deepseek/deepseek-v4-pro"]
    verify = run_cli("verify", "--repo", str(repo))
    assert verify.code == 3 and "model_fallback" in verify.output


def test_dated_permaslug_is_the_same_model(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"dated_model": True}]})
    assert research(repo, "diloco-family").code == 0
    meta = front_matter(repo / "research" / "02-diloco-family.md")
    assert meta["route"] == "exact" and meta["served_models"] == ["deepseek/deepseek-v4-pro-20260401"]


def test_pinned_provider_served_by_another_is_provider_fallback(repo: Path, fake_env: dict, gateway) -> None:
    write_topic(repo, "02-diloco-family.yaml", (repo / "topics" / "02-diloco-family.yaml").read_text()
                + "    provider: deepseek\n")
    gateway.set_scenario({"rules": [{"on_call": 3, "serve_provider": "DeepInfra"}]})
    result = research(repo, "diloco-family")
    assert result.code == 3
    meta = front_matter(repo / "research" / "02-diloco-family.md")
    assert meta["route"] == "provider_fallback" and meta["served_providers"] == ["DeepInfra", "DeepSeek"]


def test_unpinned_provider_change_stays_exact(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"on_call": 3, "serve_provider": "DeepInfra"}]})
    assert research(repo, "diloco-family").code == 0


def test_recorded_fallback_attempt_with_a_pinned_provider_is_provider_fallback(repo: Path, fake_env: dict,
                                                                               gateway) -> None:
    write_topic(repo, "02-diloco-family.yaml", (repo / "topics" / "02-diloco-family.yaml").read_text()
                + "    provider: deepseek\n")
    gateway.set_scenario({"rules": [{"on_call": 1, "fallback_attempt": True}]})
    assert research(repo, "diloco-family").code == 3
    assert front_matter(repo / "research" / "02-diloco-family.md")["route"] == "provider_fallback"


def test_recorded_fallback_attempt_without_a_pin_stays_exact(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"on_call": 1, "fallback_attempt": True}]})
    assert research(repo, "diloco-family").code == 0
    assert front_matter(repo / "research" / "02-diloco-family.md")["route"] == "exact"


def test_missing_metadata_is_unverified_and_cache_hit_is_cached(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"on_call": 1, "no_metadata": True}]})
    assert research(repo, "diloco-family").code == 3
    assert front_matter(repo / "research" / "02-diloco-family.md")["route"] == "unverified"
    gateway.set_scenario({"rules": [{"match": {"kind": "write"}, "cache_hit": True}]})
    assert research(repo, "verl-trl").code == 3
    assert front_matter(repo / "research" / "04-verl-trl.md")["route"] == "cached"


@pytest.mark.parametrize("missing", ["OPENROUTER_API_KEY", "TAVILY_API_KEY"])
def test_missing_key_exits_2_before_any_request(repo: Path, fake_env: dict, gateway, tavily,
                                                monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    monkeypatch.delenv(missing)
    result = research(repo, "diloco-family")
    assert result.code == 2
    assert result.stderr.strip() == (f"error: environment: {missing}: {missing} is not set; it is required to "
                                     + ("call the model gateway (create one on the Keys page of your OpenRouter "
                                        "account)" if "OPENROUTER" in missing else
                                        "search the web (it is on the Tavily dashboard, under API Keys)"))
    assert gateway.requests == [] and tavily.requests == []
    assert not (repo / "research").exists()


def test_unknown_topic_and_model_are_bad_input(repo: Path, fake_env: dict) -> None:
    assert research(repo, "nope").code == 2
    result = research(repo, "diloco-family", "--model", "openai/gpt-5")
    assert result.code == 2 and "no route" in result.stderr


def test_a_failed_leg_keeps_the_previous_report_and_says_so(repo: Path, fake_env: dict, gateway) -> None:
    assert research(repo, "diloco-family").code == 0
    before = (repo / "research" / "02-diloco-family.md").read_text()
    gateway.set_scenario({"rules": [{"status": 402, "message": "Insufficient credits"}]})
    result = research(repo, "diloco-family")
    assert result.code == 1
    assert "failed" in result.output and "402" in result.output
    assert (repo / "research" / "02-diloco-family.md").read_text() == before
    status = json.loads((repo / "build" / "legs" / "02-diloco-family.json").read_text())
    assert status["status"] == "failed" and "402" in status["error"]


def test_packed_batch_runs_each_pair(repo: Path, fake_env: dict) -> None:
    result = research(repo, "diloco-family,verl-trl", "--model", "deepseek/deepseek-v4-pro,anthropic/claude-sonnet-4.6")
    assert result.code == 0, result.output
    assert (repo / "research" / "02-diloco-family.md").exists() and (repo / "research" / "04-verl-trl.md").exists()


@pytest.mark.slow
def test_verify_online_and_github_summary(repo: Path, fake_env: dict, tmp_path: Path) -> None:
    assert research(repo, "diloco-family").code == 0
    summary = tmp_path / "summary.md"
    result = run_cli("verify", "--online", "--github-summary", "--repo", str(repo),
                     env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.code == 0, result.output + result.stderr
    table = summary.read_text()
    assert "| diloco-family | deepseek/deepseek-v4-pro | deepseek/deepseek-v4-pro | DeepSeek | exact |" in table


def test_verify_catches_a_hand_edited_route(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"on_call": 2, "serve_model": "deepseek/deepseek-v3"}]})
    research(repo, "diloco-family")
    path = repo / "research" / "02-diloco-family.md"
    path.write_text(path.read_text().replace("route: model_fallback", "route: exact")
                    .replace("route_verified: false", "route_verified: true"))
    result = run_cli("verify", "--repo", str(repo))
    assert result.code == 3
    assert "front matter says route exact, the evidence says model_fallback" in result.output


def test_keys_never_reach_files(repo: Path, fake_env: dict) -> None:
    assert research(repo, "diloco-family").code == 0
    for path in repo.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            for secret in (CANARY["OPENROUTER_API_KEY"], CANARY["TAVILY_API_KEY"]):
                assert secret not in text, path


def test_retryable_errors_are_retried_and_the_leg_completes(repo: Path, fake_env: dict, gateway) -> None:
    fast_retries(repo)
    gateway.set_scenario({"rules": [{"on_call": 1, "times": 1, "status": 429, "retry_after": "0"},
                                    {"on_call": 2, "times": 1, "status": 502},
                                    {"on_call": 3, "times": 1, "error_in_200": "choice", "code": 503}]})
    result = research(repo, "diloco-family")
    assert result.code == 0, result.output + result.stderr
    calls = [json.loads(line) for line in (repo / "research" / "02-diloco-family.calls.jsonl").read_text().splitlines()]
    assert sum(c["retries"] for c in calls if not c["aborted"]) == 3
    # the attempt answered with an error inside its HTTP 200 had a generation: it is in the books, at its cost
    (given_up,) = [c for c in calls if c["aborted"]]
    assert given_up["verdict"] == "aborted" and given_up["cost_usd"] == 0.0 and not given_up["cost_estimated"]


@pytest.mark.slow
def test_a_leg_through_the_cli_plans_checks_its_gaps_and_writes_from_its_dossier(repo: Path, fake_env: dict,
                                                                                gateway, tavily) -> None:
    """Issue 32's mechanisms end to end, the real clients over HTTP: the plan in the first turn, the brief's
    URLs read at once beside the first searches, the stop carrying its coverage, one turn for the gaps, then
    one writing call without tools from a dossier of every passage shown, recommendations in the contract's
    forms; search spend counted in the front matter and the status."""
    result = research(repo, "diloco-family")
    assert result.code == 0, result.output + result.stderr
    calls = gateway.completions
    assert [c["kind"] for c in calls] == ["plan", "extract", "done", "gap_research", "write"]
    first = calls[0]["request"]
    assert "Named in the brief and readable now with web_extract: S1 https://arxiv.org/abs/2311.08105" in \
        first["messages"][1]["content"] and "Today's date: " in first["messages"][1]["content"]
    write = calls[-1]["request"]
    assert "tools" not in write and "tool_choice" not in write
    dossier = write["messages"][1]["content"]
    evidence = [json.loads(line) for line in (repo / "research" / "02-diloco-family.evidence.jsonl")
                .read_text().splitlines()]
    assert evidence and all(line["text"] in dossier for line in evidence)  # the writer saw every cited passage
    assert sorted(request.path for request, _ in tavily.requests[:3]) == ["/extract", "/search", "/search"]
    meta = front_matter(repo / "research" / "02-diloco-family.md")
    assert meta["status"] == "ok" and meta["research"]["plan_items"] >= 3
    assert meta["research"]["gap_check"] == "answered" and meta["research"]["gaps_researched"] >= 1
    assert meta["search"]["cost_usd"] > 0 and meta["search"]["pages_read"] >= 3
    status = json.loads((repo / "build" / "legs" / "02-diloco-family.json").read_text())
    assert status["cost_usd"] == pytest.approx(meta["usage"]["cost_usd"] + meta["search"]["cost_usd"], abs=1e-6)
    body = load_report(repo / "research" / "02-diloco-family.md", repo=repo).body
    lines = [line for line in body.split("## Recommendations\n", 1)[1].split("\n## ", 1)[0].splitlines() if line]
    assert lines and all(contract.RECOMMENDATION_RE.match(line) or contract.NOT_RECOMMENDED_RE.match(line)
                         for line in lines)
