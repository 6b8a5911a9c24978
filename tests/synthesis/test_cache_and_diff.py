"""Re-runs: unchanged reports cost nothing, a changed report costs one extraction and the diff says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.synthesis.conftest import PLANTED, ledger, statement, statuses, structured_calls, write_report

FRAMEWORK_FILES = ("planted.md", "claims.json", "synthesis.calls.jsonl")


def snapshot(repo: Path) -> dict[str, bytes]:
    return {name: (repo / "framework" / name).read_bytes() for name in FRAMEWORK_FILES}


def test_second_run_makes_no_extraction_call_and_writes_the_same_bytes(planted: Path, run_synthesis,
                                                                       gateway) -> None:
    first = run_synthesis(planted)
    assert first.extraction_calls == 6 and len(structured_calls(gateway, "claim_extraction")) == 6
    before = snapshot(planted)
    gateway.reset()
    second = run_synthesis(planted)
    assert second.extraction_calls == 0 and second.cached_extractions == 6
    assert second.judge_calls == 0 and second.cached_judgements == first.judge_calls + first.cached_judgements
    assert second.llm_calls == 0 and second.cost_usd == 0
    assert gateway.completions == []
    assert snapshot(planted) == before  # byte-identical framework files
    assert second.diff.is_empty and "no change" in second.diff.text()


def test_the_committed_ledger_replays_answers_when_the_build_cache_is_gone(planted: Path, run_synthesis,
                                                                           gateway) -> None:
    run_synthesis(planted)
    before = snapshot(planted)
    shutil.rmtree(planted / "build" / "synthesis-cache")
    gateway.reset()
    again = run_synthesis(planted)
    assert again.llm_calls == 0 and gateway.completions == []
    assert snapshot(planted) == before


def test_a_fully_replayed_run_needs_no_key(planted: Path, run_synthesis) -> None:
    run_synthesis(planted)
    result = run_synthesis(planted, env={})
    assert result.llm_calls == 0


def test_one_changed_report_costs_one_extraction_and_the_promotion_shows_in_the_diff(
        planted: Path, run_synthesis, gateway) -> None:
    run_synthesis(planted)
    assert statuses(ledger(planted))["decentralized-substrate/prime-rl"] == "single_source"
    model, sentences, route = PLANTED["02-beta"]
    write_report(planted, "02-beta", model, [*sentences, statement("decentralised-substrate-prime-rl", "verl-trl")],
                 route=route)
    gateway.reset()
    result = run_synthesis(planted)
    assert result.extraction_calls == 1 and result.cached_extractions == 5
    [call] = structured_calls(gateway, "claim_extraction")
    assert call["session"] == "2026-H2:synthesis:02-beta"
    assert statuses(ledger(planted))["decentralized-substrate/prime-rl"] == "convergent"
    assert [item.key for item in result.diff.promoted] == ["decentralized-substrate/prime-rl"]
    item = result.diff.promoted[0]
    assert item.before == "single-source — only one family was asked (1 family, 1 source)"
    assert item.after == "convergent (2 families, 2 sources)"
    assert not result.diff.lost_support and not result.diff.dropped and not result.diff.new
    assert "promoted to convergent" in result.diff.text() and "decentralized-substrate/prime-rl" in result.diff.text()


def test_removing_a_supporting_statement_loses_support(planted: Path, run_synthesis, gateway) -> None:
    run_synthesis(planted)
    model, sentences, route = PLANTED["02-beta"]
    grpo = statement("rl-algorithm-grpo", "verl-trl")
    write_report(planted, "02-beta", model, [s for s in sentences if s != grpo], route=route)  # drop its GRPO
    gateway.reset()
    result = run_synthesis(planted)
    assert result.extraction_calls == 1
    assert statuses(ledger(planted))["rl-algorithm/grpo"] == "single_source"
    [item] = result.diff.lost_support
    assert item.key == "rl-algorithm/grpo"
    assert item.before == "convergent (2 families, 2 sources)"
    assert item.after == "single-source — only one family was asked (1 family, 1 source)"
    assert result.diff.counts() == {"decisions": 1, "lost_citations": 0, "promoted": 0, "lost_support": 1,
                                    "new_divergences": 0, "new": 0, "dropped": 0}
    [decision] = result.diff.decisions  # the GRPO decision, by decision: what its verdict and support were
    assert decision.key == "rl-algorithm/grpo" and decision.changes == (
        "status changed: convergent → single_source",
        "GRPO: 2 families (anthropic, deepseek), 2 sources → 1 family (deepseek), 1 source")
    # 01-alpha's topic was asked of its family only: the flag says so, not "may be model bias"
    assert decision.before == "Use GRPO (convergent)" and decision.after == ("Use GRPO (single-source — only one "
                                                                             "family was asked)")


def test_a_report_whose_route_turns_unverified_drops_out_of_support(planted: Path, run_synthesis) -> None:
    run_synthesis(planted)
    (planted / "research" / "02-beta.calls.jsonl").unlink()  # no evidence: the route is unverified
    result = run_synthesis(planted)
    assert result.extraction_calls == 0  # same body, same request: replayed
    data = ledger(planted)
    assert statuses(data)["rl-algorithm/grpo"] == "single_source"
    # both of its recommendations lose their only or their independent support
    assert [i.key for i in result.diff.lost_support] == ["orchestration/ray-single-controller-verl",
                                                        "rl-algorithm/grpo"]
    assert statuses(data)["orchestration/ray-single-controller-verl"] == "excluded"
    assert statuses(data)["orchestration/monarch"] == "single_source" and data["divergences"] == []
    # the excluded report's contrary recommendation is shown beside the counted one, not counted against it
    monarch = next(c for c in data["clusters"] if c["key"] == "orchestration/monarch")
    assert monarch["contrary_excluded"] and monarch["contrary_excluded"][0].startswith("02-beta#")
    beta = next(r for r in data["reports"] if r["stem"] == "02-beta")
    assert beta["counted"] is False and beta["route"] == "unverified"
    assert "no call log next to the report" in beta["route_problems"]


def test_a_new_divergence_and_new_and_dropped_clusters(planted: Path, run_synthesis) -> None:
    run_synthesis(planted)
    (planted / "research" / "06-epsilon.md").unlink()
    (planted / "research" / "06-epsilon.calls.jsonl").unlink()
    write_report(planted, "07-zeta", "x-ai/grok-4", [
        "For the environment format, Gymnasium should be the default for agent training today"])
    result = run_synthesis(planted)
    dropped = {i.key for i in result.diff.dropped}
    assert dropped == {"base-model/composer-2-5-built-moonshot", "general/epsilon-benchmark-suite-measures-long"}
    assert [i.key for i in result.diff.new_divergences] == ["divergence/environment-format/gymnasium"]
    assert [i.key for i in result.diff.new] == ["environment-format/gymnasium"]
    assert statuses(ledger(planted))["environment-format/openenv"] == "divergent"


def as_v2(data: dict) -> dict:  # type: ignore[type-arg]
    """A @3 ledger as the previous schema wrote it: no checked fields on its claims, numbered batches."""
    checked = ("quote", "section", "position", "anchored", "citations")
    claims = [{k: v for k, v in claim.items() if k not in checked} for claim in data["claims"]]
    number = {b["id"]: i + 1 for i, b in enumerate(data["batches"])}
    batches = [{**{k: v for k, v in b.items() if k != "id"}, "index": number[b["id"]]} for b in data["batches"]]
    clusters = [{**c, "batches": [number[b] for b in c["batches"]]} for c in data["clusters"]]
    return {**data, "schema": "research-dispatch/claims@2", "claims": claims, "batches": batches, "clusters": clusters}


def test_a_previous_v2_ledger_is_read_with_its_claims_unchecked(planted: Path, run_synthesis, gateway) -> None:
    from research_dispatch.synthesis.write.ledger import read_previous

    run_synthesis(planted)
    path = planted / "framework" / "claims.json"
    current = ledger(planted)
    assert current["schema"] == "research-dispatch/claims@3"
    path.write_text(json.dumps(as_v2(current)), encoding="utf-8")
    previous, problem = read_previous(path)
    assert problem is None and previous is not None
    assert previous["schema"] == "research-dispatch/claims@2"
    assert previous["claims"] and all(c["anchored"] is False and c["citations"] == [] and c["quote"] == ""
                                      for c in previous["claims"])
    shutil.rmtree(planted / "build" / "synthesis-cache")
    gateway.reset()
    again = run_synthesis(planted)
    assert not [w for w in again.warnings if "previous ledger" in w]
    assert [item.key for item in again.diff.dropped] == []  # the diff compared against the @2 ledger
    assert again.judge_calls == 0  # its judgements are replayed under their request keys
    assert ledger(planted)["schema"] == "research-dispatch/claims@3"
