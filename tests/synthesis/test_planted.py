"""The planted fixture comes out exactly as planted: every cluster's class, support and exclusions."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_dispatch.config.settings import load_settings
from tests.synthesis.conftest import ledger, statuses, write_pyproject

PLANTED_CLASSES = {
    # convergent across families: deepseek + anthropic
    "rl-algorithm/grpo": "convergent",
    # two openai models agree: same family, not independent, not convergent
    "environment-format/openenv": "same_family",
    # alternatives for one decision, as the judge confirms: one report each
    "orchestration/monarch": "divergent",
    "orchestration/ray-single-controller-verl": "divergent",
    # one counted report (the second, 05-delta, has an unverified route and does not count)
    "decentralized-substrate/prime-rl": "single_source",
    # a high-confidence description and a low-confidence and a medium-confidence finding, one report each
    "base-model/composer-2-5-built-moonshot": "single_source",
    "general/epsilon-benchmark-suite-measures-long": "single_source",
    "communication-efficient/streaming-diloco-lowers-peak-inter": "single_source",
    # made only by the unverified report
    "distillation/trace-replay-multi-teacher-distillation": "excluded",
}


@pytest.mark.slow
def test_classes_come_out_exactly_as_planted(planted: Path, run_synthesis) -> None:
    result = run_synthesis(planted)
    data = ledger(planted)
    assert statuses(data) == PLANTED_CLASSES
    clusters = {c["key"]: c for c in data["clusters"]}

    grpo = clusters["rl-algorithm/grpo"]
    assert grpo["reports"] == ["01-alpha", "02-beta"] and grpo["families"] == ["anthropic", "deepseek"]
    assert grpo["pick"] == "GRPO" and grpo["layer"] == "RL algorithm"
    assert grpo["decision"] == "RL algorithm for post-training"

    openenv = clusters["environment-format/openenv"]
    assert openenv["families"] == ["openai"] and len(openenv["reports"]) == 2

    prime = clusters["decentralized-substrate/prime-rl"]
    assert prime["reports"] == ["01-alpha"] and prime["excluded_reports"] == ["05-delta"]
    assert prime["flagged"] is True  # a recommendation

    flagged = {k for k, c in clusters.items() if c["flagged"]}
    assert flagged == {"decentralized-substrate/prime-rl", "base-model/composer-2-5-built-moonshot",
                       "orchestration/monarch", "orchestration/ray-single-controller-verl"}  # sides of one report

    [divergence] = data["divergences"]
    assert divergence["key"] == "divergence/orchestration/monarch" and divergence["kind"] == "alternatives"
    assert divergence["tie"] is True
    assert divergence["line"] == ("No consensus (1 family each): Monarch, once its actor-mesh API stabilises; or "
                                  "Ray single-controller (VeRL), today.")
    assert [p["cluster"] for p in divergence["positions"]] == ["orchestration/monarch",
                                                                 "orchestration/ray-single-controller-verl"]
    assert clusters["orchestration/monarch"]["divergence"] == "divergence/orchestration/monarch"

    reports = {r["stem"]: r for r in data["reports"]}
    assert reports["05-delta"]["counted"] is False and reports["05-delta"]["route"] == "model_fallback"
    assert all(r["counted"] for s, r in reports.items() if s != "05-delta")
    assert data["counts"]["clusters"] == {"convergent": 1, "same_family": 1, "divergent": 2, "single_source": 4,
                                          "unsupported": 0, "excluded": 1}
    # the flags count single-source findings; the two one-report sides of the divergence are counted apart
    assert data["counts"]["flagged"] == 2 and data["counts"]["flagged_sides"] == 2 and data["counts"]["ties"] == 1
    assert data["limitations"] == ["Report 05-delta is excluded from support counts: route model_fallback is "
                                   "not verified."]
    assert result.warnings == []
    assert result.extraction_calls == 6 and result.cached_extractions == 0


def test_counting_unverified_reports_changes_exactly_what_it_should(planted: Path, run_synthesis) -> None:
    write_pyproject(planted, ", count_unverified = true")
    run_synthesis(planted, load_settings(planted))
    data = ledger(planted)
    expected = dict(PLANTED_CLASSES)
    expected["decentralized-substrate/prime-rl"] = "convergent"  # deepseek + moonshotai now
    expected["distillation/trace-replay-multi-teacher-distillation"] = "single_source"
    assert statuses(data) == expected
    clusters = {c["key"]: c for c in data["clusters"]}
    assert clusters["decentralized-substrate/prime-rl"]["families"] == ["deepseek", "moonshotai"]
    assert clusters["distillation/trace-replay-multi-teacher-distillation"]["flagged"] is True
    assert any("count_unverified is on" in item for item in data["limitations"])


def test_the_document_shows_each_class_where_readers_look(planted: Path, run_synthesis) -> None:
    result = run_synthesis(planted)
    text = result.document_path.read_text(encoding="utf-8")
    assert result.document_path == planted / "framework" / "planted.md"
    table = text.split("## TL;DR — decision table", 1)[1].split("\n## ", 1)[0]
    assert ("| RL algorithm | RL algorithm for post-training | GRPO | 2 reports · 2 families · 2 sources "
            "| **convergent** |" in table)
    assert ("| environment format | environment format for agentic RL | OpenEnv | 2 reports · 1 family · 2 sources "
            "| same family only — not independent |") in table
    assert ("| orchestration | orchestration layer for RL post-training | No consensus (1 family each): Monarch, once "
            "its actor-mesh API stabilises; or Ray single-controller (VeRL), today. | 1 family, 1 source vs 1 family, "
            "1 source | **divergent** — no consensus |") in table
    # each planted topic was asked of one family: a lone recommendation says so, never "may be model bias"
    assert ("| decentralised substrate | substrate for decentralised RL | PRIME-RL | 1 report (deepseek) · 1 source "
            "| single-source — only one family was asked |") in table
    matrix = text.split("## Agreement matrix", 1)[1].split("\n## ", 1)[0]
    assert "| Decision | anthropic | deepseek | google | openai |" in matrix
    # google and openai wrote on other topics: not asked, which the matrix says (never "none")
    assert "| RL algorithm — RL algorithm for post-training | for | for | not asked | not asked |" in matrix
    # a condition is the side's own: Monarch's reports state one, Ray's only says "today"
    assert ("| orchestration — orchestration layer for RL post-training | Ray single-controller (VeRL) | not asked "
            "| not asked | Monarch (conditional) |") in matrix
    assert "trace-replay" not in table  # only the excluded report recommends it
    same_family = text.split("## Same-family agreement (not independent)", 1)[1].split("\n## ", 1)[0]
    assert "OpenEnv" in same_family
    convergent = text.split("## Convergent findings", 1)[1].split("\n## ", 1)[0]
    assert "OpenEnv" not in convergent and "GRPO" in convergent
    assert "[01-alpha](<../research/01-alpha.md>) (deepseek)" in convergent
    assert "[\\[1\\]](<https://arxiv.org/abs/2409.19256>)" in convergent
    assert "**No consensus (1 family each): Monarch, once its actor-mesh API stabilises; or Ray" in text
    flagged = text.split("### Flagged: single-source — only one family was asked", 1)[1].split("\n### ", 1)[0]
    assert "PRIME-RL" in flagged and "Kimi K2.5" in flagged and "Epsilon benchmark" not in flagged
    excluded = text.split("## Reports excluded from support", 1)[1].split("\n## ", 1)[0]
    assert "05-delta" in excluded and "model_fallback" in excluded and "Trace-replay" in excluded
    prime = text.split("### decentralised substrate", 1)[0]
    assert "Also stated by reports excluded" not in prime  # a single-source cluster lists only its one report
    assert "## Coverage and routes" in text and "| model_fallback ⚠ |" in text
    assert "## Sources" in text and "1. HybridFlow" in text
    for section in ("## Limitations", "## Single-source claims", "## Divergent findings"):
        assert section in text
    assert "2026-H2" in text and "T00:" not in text  # the cycle, and no timestamps


def test_model_text_cannot_inject_markdown_or_html(tmp_path: Path, run_synthesis) -> None:
    from tests.synthesis.conftest import write_report

    repo = tmp_path / "hostile"
    repo.mkdir()
    write_pyproject(repo)
    hostile = ("The <script>alert(1)</script> framework at https://evil.example.org is [the best](javascript:x) "
               "choice | according to @someone <!-- hidden --> for ::set-output users")
    write_report(repo, "01-one", "openai/gpt-5", [hostile])
    result = run_synthesis(repo)
    text = result.document_path.read_text(encoding="utf-8")
    assert "<script>" not in text and "<!-- hidden" not in text and "[the best](javascript" not in text
    assert "https://evil" not in text  # no autolink
    assert "\\<script\\>" in text and "\\| according" in text and "\\[the best\\](javascript" in text


def test_small_batches_with_anchors_give_the_same_classes(planted: Path, run_synthesis) -> None:
    from tests.synthesis.conftest import statement, write_report

    write_report(planted, "07-zeta", "x-ai/grok-4", [statement("rl-algorithm-grpo", "monarch-torchforge-openenv")])
    run_synthesis(planted)
    whole = statuses(ledger(planted))
    write_pyproject(planted, ", batch_size = 2")
    result = run_synthesis(planted, load_settings(planted))
    data = ledger(planted)
    assert statuses(data) == whole and whole["rl-algorithm/grpo"] == "convergent"
    # only the cut decision is asked again (in two calls); every other decision replays its judgement
    assert result.judge_calls == 2 and len(data["batches"]) == 5
    assert all(len(batch["ids"]) - len(batch["anchors"]) <= 2 for batch in data["batches"])
    assert any(batch["anchors"] for batch in data["batches"])  # the GRPO component was cut and carried over
