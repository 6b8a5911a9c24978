"""Alignment: anonymised judge requests, judge choice, candidate blocking and linear batching."""

from __future__ import annotations

import json
import math
from pathlib import Path

from research_dispatch.config.settings import Settings, SynthesisSettings
from research_dispatch.synthesis.align.judge import (
    BatchPlan,
    Judgement,
    batch_id,
    candidate_components,
    candidate_edges,
    choose_judge,
    plan_batches,
    report_label,
)
from research_dispatch.synthesis.extract.claims import Claim
from tests.synthesis.conftest import PLANTED, ledger, structured_calls, write_pyproject


def claim(key: str, report: str, statement: str, layer: str = "RL algorithm", pick: str | None = None,
          decision: str | None = None) -> Claim:
    return Claim(key=key, report=report, statement=statement, layer=layer,
                 stance="recommend" if pick else "describe", decision=decision if pick else None, pick=pick,
                 alternatives=(), condition=None, sources=(), confidence="medium")


def test_the_judge_sees_anonymised_reports_in_a_stable_shuffled_order(planted: Path, run_synthesis,
                                                                      gateway) -> None:
    run_synthesis(planted)
    calls = structured_calls(gateway, "claim_alignment")
    batches = {b["id"]: b for b in ledger(planted)["batches"]}
    assert len(calls) == len(batches) > 1  # one judge call per decision (candidate component)
    for call in calls:
        body = call["request"]
        text = json.dumps(body["messages"])
        for stem, (model, _sentences, _route) in PLANTED.items():
            assert stem not in text and model not in text and model.split("/")[0] not in text
        assert "Report A" in text
        assert body["response_format"]["json_schema"]["name"] == "claim_alignment"
        assert body["response_format"]["json_schema"]["strict"] is True
        batch = batches[call["session"].rsplit(":", 1)[1]]  # the session names the batch by its id
        assert body["model"] == batch["judge_model"] == "qwen/qwen3-max"  # the first judge of no author family
        assert batch["judge_is_author"] is False
        assert sorted(batch["labels"].values()) == sorted({c.split("#")[0] for c in batch["ids"].values()})
        labels = list(batch["labels"])
        assert labels == [report_label(i) for i in range(len(labels))]
        # the label map is the audit trail: claim ids in the prompt map back to reports through it
        lines = [json.loads(line) for line in
                 body["messages"][1]["content"].split("<claims>\n", 1)[1].split("\n</claims>", 1)[0].splitlines()]
        for item in lines:
            stem = batch["labels"][item["report"].removeprefix("Report ")]
            assert batch["ids"][item["id"]].startswith(stem + "#")
        assert batch["id"] == batch_id(batch["ids"].values())
    # same claims, same request: across runs and across cycles (an unchanged decision is never re-asked)
    gateway.reset()
    again = run_synthesis(planted, cycle="2027-H1")
    assert {b["id"]: (b["key"], b["labels"]) for b in ledger(planted)["batches"]} == {
        i: (b["key"], b["labels"]) for i, b in batches.items()}
    assert again.judge_calls == 0


def test_when_every_judge_is_an_author_the_first_is_used_and_recorded(planted: Path, run_synthesis) -> None:
    write_pyproject(planted, judges=("anthropic/claude-sonnet-4.6", "openai/gpt-5-mini"))
    result = run_synthesis(planted)
    data = ledger(planted)
    authored = [b for b in data["batches"] if b["judge_is_author"]]
    # the judge of a decision is chosen by that decision's reports: gpt-5-mini judges GRPO (deepseek,
    # anthropic), and only the decisions openai reports take part in fall back to the first judge
    assert authored and all(b["judge_model"] == "anthropic/claude-sonnet-4.6" for b in authored)
    assert any("is of the family of a report it judges" in w for w in result.warnings)
    for batch in authored:
        assert any(f"Judge batch {batch['id']} was judged by anthropic/claude-sonnet-4.6" in i
                   for i in data["limitations"])


def test_choose_judge_skips_author_families() -> None:
    settings = Settings(synthesis=SynthesisSettings(judge_models=("anthropic/claude-sonnet-4.6", "openai/gpt-5-mini")),
                        families={"openai": "oai"})
    assert choose_judge(settings, {"anthropic"}) == ("openai/gpt-5-mini", False)
    assert choose_judge(settings, {"oai"}) == ("anthropic/claude-sonnet-4.6", False)
    assert choose_judge(settings, {"anthropic", "oai"}) == ("anthropic/claude-sonnet-4.6", True)


def test_candidates_are_blocked_by_layer_and_cross_report_only() -> None:
    claims = [
        claim("r1#a", "r1", "GRPO with DAPO patches is the default algorithm", pick="GRPO+DAPO"),
        claim("r2#a", "r2", "The default algorithm should be GRPO with DAPO", pick="GRPO with DAPO"),
        claim("r2#b", "r2", "GRPO with DAPO patches is the default algorithm"),  # same report as r2#a
        claim("r3#a", "r3", "GRPO with DAPO patches is the default algorithm", layer="orchestration"),
        claim("r4#a", "r4", "Bananas ripen faster next to apples in a paper bag"),
    ]
    edges = candidate_edges(claims, threshold=0.2)
    assert edges["r1#a"] == {"r2#a", "r2#b"}
    assert "r2#b" not in edges["r2#a"]
    assert "r3#a" not in edges and "r4#a" not in edges
    assert candidate_components(claims, edges) == [["r1#a", "r2#a", "r2#b"]]


def test_rival_picks_always_meet_the_judge_whatever_their_words() -> None:
    """Only the judge may say whether two picks answer one decision, so they must share a batch."""
    claims = [
        claim("r1#a", "r1", "Redis is the store to use", layer="storage", pick="Redis", decision="cache store"),
        claim("r2#a", "r2", "Postgres wins for durable rows", layer="storage", pick="Postgres",
              decision="primary database"),
        claim("r3#a", "r3", "Memcached suffices", layer="caching", pick="Memcached", decision="cache store"),
        claim("r1#b", "r1", "Kafka for the event log", layer="messaging", pick="Kafka", decision="event log"),
    ]
    edges = candidate_edges(claims, threshold=0.9)
    # same layer, different reports: linked although no word is shared
    assert "r2#a" in edges["r1#a"]
    # another layer but the same decision: linked too
    assert "r3#a" in edges["r1#a"] | edges["r2#a"]
    assert "r1#b" not in edges  # nothing to compare it with
    assert candidate_components(claims, edges) == [["r1#a", "r2#a", "r3#a"]]


def test_each_component_is_judged_alone_and_a_large_one_is_cut_with_anchors() -> None:
    components = [[f"c{n:03d}#{i}" for i in range(size)] for n, size in enumerate([3, 7, 2, 25, 4, 9, 1 + 1])]
    edges = {k: {m for m in comp if m != k} for comp in components for k in comp}
    plans = plan_batches(components, edges, batch_size=10)
    assert len(plans) == sum(math.ceil(len(c) / 10) for c in components)
    for plan in plans:  # never two components in one call
        assert len({k.split("#")[0] for k in [*plan.new, *plan.anchors]}) == 1
        assert len(plan.new) <= 10
    assert sorted(k for p in plans for k in p.new) == sorted(k for c in components for k in c)
    continued = [p for p in plans if p.anchors]
    assert len(continued) == 2  # the 25-claim component spans three batches
    for plan in continued:
        assert len(plan.anchors) <= 4 and not set(plan.anchors) & set(plan.new)
    # how a component is judged depends on it alone: with other components gone, the same plans
    alone = plan_batches([components[3]], edges, batch_size=10)
    assert [(p.new, p.anchors) for p in alone] == [(p.new, p.anchors) for p in plans if p.new[0].startswith("c003")]
    assert plan_batches([], {}, 10) == []
    assert isinstance(plans[0], BatchPlan)


def test_judgement_validation_rejects_unknown_and_repeated_ids() -> None:
    ok = {"groups": [{"label": "x", "relation": "agree", "positions": [{"claims": ["C1", "C2"], "summary": "s"}]}]}
    assert Judgement.model_validate(ok, context={"ids": {"C1", "C2"}}).groups[0].relation == "agree"
    for bad in (
        {"groups": [{"label": "x", "relation": "agree", "positions": [{"claims": ["C9"], "summary": "s"}]}]},
        {"groups": [{"label": "x", "relation": "alternatives", "positions": [{"claims": ["C1"], "summary": "s"}]}]},
        {"groups": [{"label": "x", "relation": "opposite", "positions": [{"claims": ["C1"], "summary": "s"}]}]},
        {"groups": [{"label": "x", "relation": "contradict", "positions": [{"claims": ["C1"], "summary": "s"},
                                                                          {"claims": ["C2"], "summary": "s"}]}]},
        {"groups": [{"label": "x", "relation": "agree", "positions": [{"claims": ["C1"], "summary": "s"}]},
                    {"label": "y", "relation": "agree", "positions": [{"claims": ["C1"], "summary": "s"}]}]},
    ):
        try:
            Judgement.model_validate(bad, context={"ids": {"C1", "C2"}})
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_a_judged_contradiction_is_a_divergence_with_both_positions(tmp_path: Path, run_synthesis) -> None:
    from tests.synthesis.conftest import write_report

    repo = tmp_path / "contradiction"
    repo.mkdir()
    write_pyproject(repo)
    write_report(repo, "01-one", "openai/gpt-5", ["For long RL runs, AdamW should be the default optimizer today"])
    write_report(repo, "02-two", "deepseek/deepseek-v4-pro",
                 ["For long RL runs, Muon should be the default optimizer today"])
    write_report(repo, "03-three", "google/gemini-3.1-pro-preview",
                 ["For long RL runs, Muon should be the default optimizer today"])
    result = run_synthesis(repo)
    data = ledger(repo)
    clusters = {c["pick"]: c for c in data["clusters"]}
    assert set(clusters) == {"AdamW", "Muon"} and {c["status"] for c in clusters.values()} == {"divergent"}
    assert clusters["AdamW"]["flagged"] is True and clusters["Muon"]["flagged"] is False  # a side of one report
    [divergence] = data["divergences"]
    assert divergence["kind"] == "alternatives" and divergence["tie"] is False
    assert divergence["key"] == f"divergence/{min(c['key'] for c in clusters.values())}"
    assert [p["label"] for p in divergence["positions"]] == ["Muon", "AdamW"]  # two families before one
    assert divergence["line"].startswith("Use Muon today, switch to AdamW when")
    assert [i.key for i in result.diff.new_divergences] == [divergence["key"]]  # a first run counts it as new
    text = result.document_path.read_text(encoding="utf-8")
    assert "(alternatives)" in text and "**Use Muon today, switch to AdamW" in text
