"""The repository's five topics researched on the fakes, then synthesized: what the demo shows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.leg.execute import run_leg
from research_dispatch.synthesis import synthesize
from tests.conftest import ROOT
from tests.synthesis.conftest import structured_calls

pytestmark = pytest.mark.slow


def test_five_real_topics_give_a_convergent_a_divergent_and_a_single_source_decision(
        repo: Path, fake_env: dict[str, str], gateway) -> None:
    (repo / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "METHODOLOGY.md", repo / "docs" / "METHODOLOGY.md")
    settings = load_settings(repo)
    legs = plan_legs(load_topics(repo, settings), settings)
    for leg in legs:
        assert run_leg(repo, settings, leg, env=fake_env, cycle="2026-H2").status == "ok"
    gateway.reset()
    result = synthesize(repo, settings, env=fake_env, cycle="2026-H2", legs=legs)

    assert result.extraction_calls == 5 and len(structured_calls(gateway, "claim_extraction")) == 5
    assert result.judge_calls == len(structured_calls(gateway, "claim_alignment")) >= 1
    assert result.llm_calls == len(gateway.completions)
    text = result.document_path.read_text(encoding="utf-8")
    assert result.document_path.name == "composer-replication-framework.md"
    table = text.split("## TL;DR — decision table", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Layer")]
    assert any(r.endswith("| **convergent** |") and "| GRPO |" in r for r in rows)
    assert any("**divergent**" in r and "Monarch" in r and "Ray" in r for r in rows)
    # one family per topic: a lone recommendation was asked of one family only, and says so
    assert any(r.endswith("| single-source — only one family was asked |") for r in rows)
    assert not any("may be model bias" in r for r in rows)

    data = json.loads(result.ledger_path.read_text(encoding="utf-8"))
    clusters = {c["key"]: c for c in data["clusters"]}
    # the fake researcher makes a planted claim only when a passage it was shown for the cited page says it,
    # so every GRPO claim is supported: convergent on three families
    assert clusters["rl-algorithm/grpo"]["families"] == ["anthropic", "deepseek", "openai"]
    grpo_standing = {c["report"]: c["standing"] for c in data["claims"] if c["cluster"] == "rl-algorithm/grpo"}
    assert grpo_standing == dict.fromkeys(("02-diloco-family", "03-monarch-torchforge-openenv", "04-verl-trl"),
                                          "counted")
    # a finding's families are the families of its counted claims, never of a claim whose page does not say it
    family_of = {r["stem"]: r["family"] for r in data["reports"]}
    for key in ("environment-format/openenv", "decentralized-substrate/prime-rl"):
        members = [c for c in data["claims"] if c["cluster"] == key]
        counted = sorted({family_of[c["report"]] for c in members if c["standing"] == "counted"})
        assert clusters[key]["families"] == counted, key
        assert clusters[key]["status"] == ("convergent" if len(counted) > 1 else "single_source"), key
        assert all(c["standing"] in {"counted", "unsupported"} for c in members)
    assert clusters["environment-format/openenv"]["families"] == ["anthropic", "openai"]
    # GRPO, OpenEnv and PRIME-RL: since issue 32 a reading's query is the model's own (no longer mixed with the
    # brief), so 04's reading of the verifiers page, asked for what PRIME-RL consumes, is shown the passage that
    # says it; 04 claims it and its judge finds it supported — a second family (the check above holds it to
    # the counted claims' families)
    assert sorted(k for k, c in clusters.items() if c["status"] == "convergent" and c["decision"]) == [
        "decentralized-substrate/prime-rl", "environment-format/openenv", "rl-algorithm/grpo"]
    prime = {c["report"] for c in data["claims"]
             if c["cluster"] == "decentralized-substrate/prime-rl" and c["standing"] == "counted"}
    assert prime == {"02-diloco-family", "04-verl-trl"}
    # the deliberate miscite is the only reason a citation is unsupported: no planted claim is unsupported
    planted = {c["statement"] for c in data["claims"] if c["decision"]}
    assert all(c["standing"] == "counted" for c in data["claims"] if c["statement"] in planted)
    assert data["counts"]["checked"]["unsupported"] >= 1
    assert {leg["state"] for leg in data["legs"]} == {"ok"}
    assert all(r["route"] == "exact" and r["counted"] for r in data["reports"])

    methodology = (repo / "docs" / "METHODOLOGY.md").read_text(encoding="utf-8")
    assert "| research/04-verl-trl.md | anthropic/claude-sonnet-4.6 | anthropic/claude-sonnet-4.6 | exact |" \
           in methodology
    assert "not yet run" not in methodology
    calls = (repo / "framework" / "synthesis.calls.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(calls) == result.llm_calls
    assert {json.loads(c)["purpose"] for c in calls} == {"cite", "extract", "judge"}
    assert fake_env["OPENROUTER_API_KEY"] not in (repo / "framework" / "claims.json").read_text()
    # claims are findings: no source description, no statement about a page, among them
    statements = [c["statement"] for c in data["claims"]]
    for text_ in statements:
        assert not text_.startswith(("Repository for", "The post", "The paper", "The README", "It ")), text_
        assert "launch post" not in text_ and "announcement of" not in text_ and "documentation page" not in text_
    # and every claim cites a page that the report retrieved and that is about its subject
    sources = {r["stem"]: {s["id"]: s["url"] for s in r["sources"]} for r in data["reports"]}
    grpo = [c for c in data["claims"] if c["cluster"] == "rl-algorithm/grpo"]
    assert {sources[c["report"]][n] for c in grpo for n in c["sources"]} <= {
        "https://www.primeintellect.ai/blog/intellect-2", "https://arxiv.org/abs/2505.07291",
        "https://github.com/meta-pytorch/torchforge", "https://huggingface.co/docs/trl/main/en/grpo_trainer",
        "https://arxiv.org/abs/2503.14476"}
