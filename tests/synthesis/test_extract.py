"""Extraction requests and the code that cleans the extractor's claims; the text keys they rely on."""

from __future__ import annotations

from pathlib import Path

from research_dispatch.config.settings import load_settings
from research_dispatch.synthesis.common.text import layer_key, pick_key, slug
from research_dispatch.synthesis.extract.claims import (
    EXTRACTION_SCHEMA,
    ExtractedClaim,
    Extraction,
    build_request,
    to_claims,
)
from research_dispatch.synthesis.extract.findings import not_a_finding
from research_dispatch.synthesis.read.inputs import load_inputs
from tests.synthesis.conftest import statement, structured_calls, write_pyproject, write_report


def one_report(tmp_path: Path) -> Path:
    repo = tmp_path / "one"
    repo.mkdir()
    write_pyproject(repo)
    write_report(repo, "01-one", "openai/gpt-5", [statement("orchestration-monarch", "monarch-torchforge-openenv")],
                 title="One topic")
    return repo


def load_reports(repo: Path, settings):  # type: ignore[no-untyped-def]
    return load_inputs(repo, settings, []).reports


def raw(statement_text: str, **fields: object) -> ExtractedClaim:
    base = {"statement": statement_text, "layer": "RL algorithm", "stance": "describe", "decision": None, "pick": None,
            "alternatives": [], "condition": None, "position": "for", "quote": statement_text, "section": None,
            "sources": [], "confidence": "medium"}
    return ExtractedClaim.model_validate({**base, **fields})


def test_the_schema_and_the_model_agree() -> None:
    item = EXTRACTION_SCHEMA["properties"]["claims"]["items"]
    # the model also takes a legacy `section` hint (ignored) and code's own `position_check` (never the model's)
    assert set(item["properties"]) == set(ExtractedClaim.model_fields) - {"section", "position_check"}
    assert set(item["properties"]) == set(item["required"])
    assert item["additionalProperties"] is False and EXTRACTION_SCHEMA["additionalProperties"] is False


def test_the_request_is_anonymous_and_its_key_follows_the_body(tmp_path: Path) -> None:
    repo = one_report(tmp_path)
    settings = load_settings(repo)
    [report] = load_reports(repo, settings)
    request = build_request(report, model="openai/gpt-5-mini", layers=("RL algorithm",))
    text = "\n".join(m["content"] for m in request.messages)
    assert "openai" not in text and "gpt-5" not in text and "01-one" not in text  # no author, no file name
    assert "## References" not in text and "Use one of these layer names whenever one fits: RL algorithm." in text
    assert build_request(report, model="openai/gpt-5-mini", layers=("RL algorithm",)).key == request.key
    assert build_request(report, model="openai/gpt-5-mini", layers=()).key != request.key
    assert build_request(report, model="google/gemini-3-flash", layers=("RL algorithm",)).key != request.key
    # the front matter is provenance, not content: re-verifying a route does not re-extract
    path = repo / "research" / "01-one.md"
    path.write_text(path.read_text().replace("words:", "run_url: https://ci.example/run/2\nwords:"))
    [changed] = load_reports(repo, settings)
    assert build_request(changed, model="openai/gpt-5-mini", layers=("RL algorithm",)).key == request.key


def test_to_claims_cleans_dedupes_and_keys_claims(tmp_path: Path) -> None:
    repo = one_report(tmp_path)
    [report] = load_reports(repo, load_settings(repo))
    extraction = Extraction(claims=[
        raw("GRPO  is the default.", stance="recommend", pick="GRPO", sources=[1, 9, 2], confidence="low",
            decision="RL algorithm"),
        raw("grpo is the DEFAULT", stance="recommend", pick="GRPO", sources=[3], confidence="high"),
        raw("A finding with a pick that does not count", pick="Something", decision="Nothing"),
        raw("Text with \u202ebidi and <!-- a comment --> removed", layer="\u200b"),
        raw("Repository for Monarch, Meta's distributed programming framework for PyTorch"),
    ])
    cleaned = to_claims(extraction, report)
    claims, dropped = cleaned.claims, cleaned.dropped_citations
    assert dropped == 1  # source 9 does not exist in the report: a phantom number, kept on the claim
    assert [(n.statement, n.reason) for n in cleaned.not_findings] == [
        ("Repository for Monarch, Meta's distributed programming framework for PyTorch",
         "describes a source rather than asserting a finding")]
    by_statement = {c.statement: c for c in claims}
    grpo = next(c for c in claims if c.pick == "GRPO")
    # neither quote is in the report: not anchored, the model's numbers kept (the union of both)
    assert grpo.confidence == "high" and grpo.sources == (1, 2, 3, 9) and grpo.key.startswith("01-one#")
    assert not grpo.anchored and grpo.section is None
    assert len([c for c in claims if c.pick == "GRPO"]) == 1
    assert by_statement["A finding with a pick that does not count"].pick is None
    assert by_statement["A finding with a pick that does not count"].decision is None  # only recommendations
    cleaned = next(c for c in claims if c.statement.startswith("Text with"))
    assert "\u202e" not in cleaned.statement and "<!--" not in cleaned.statement and cleaned.layer == "general"
    assert [c.key for c in claims] == sorted(c.key for c in claims)
    again = to_claims(Extraction(claims=[ExtractedClaim.model_validate(c.extracted()) for c in claims]), report)
    assert again.claims == claims  # cleaning is idempotent: a replay from the ledger gives the same claims
    assert again.not_findings == []


def test_statements_that_are_not_findings_are_dropped_with_a_reason() -> None:
    titles = ["TRL documentation: GRPO trainer", "meta-pytorch/monarch: single-controller distributed programming"]
    dropped = {
        "The TRL documentation page for the GRPO trainer": "restates a source's title",
        "Repository for torchtitan, PyTorch's reference platform for large-scale generative-model training using "
        "native PyTorch features": "describes a source rather than asserting a finding",
        "Cursor's launch post for Composer 2.5, its agentic coding model": "describes a source rather than "
                                                                           "asserting a finding",
        "Moonshot AI's study of the Muon optimizer at large-language-model scale": "describes a source rather than "
                                                                                   "asserting a finding",
        "The report covers the architecture, the pretraining run and a post-training stage": "says what a document "
                                                                                             "covers, not what is "
                                                                                             "true",
        "A follow-up to DiLoCo from Google DeepMind": "describes a source rather than asserting a finding",
        "Microsoft Research's rStar, a self-play mutual-reasoning method": "asserts nothing (no verb)",
    }
    for statement_text, reason in dropped.items():
        assert not_a_finding(statement_text, "describe", titles) == reason, statement_text
    kept = [
        "Streaming DiLoCo lowers peak inter-datacentre bandwidth by synchronising fragments of the parameters",
        "The paper describes how DiLoCo cuts communication by a factor of 500",
        "A 2024 study of 50 teams found that GRPO converges faster than PPO",
        "Documentation for Monarch is sparse and its APIs change between releases",
        "The README describes the library as experimental, lists narrow hardware requirements and expects changes",
        "TorchForge separates algorithm code from infrastructure",
        "Environments talk to models through an OpenAI-compatible client",
    ]
    for statement_text in kept:
        assert not_a_finding(statement_text, "describe", titles) is None, statement_text
    # a recommendation is an assertion even without a finite verb
    assert not_a_finding("GRPO with DAPO's clip-higher for post-training", "recommend", titles) is None


def test_text_keys() -> None:
    assert layer_key("Decentralised substrates") == layer_key("decentralized substrate") == "decentralized substrate"
    assert layer_key("RL algorithms") == layer_key("RL algorithm")
    assert pick_key("GRPO + DAPO") == pick_key("grpo+dapo") == "grpo+dapo"
    assert pick_key("Ray single-controller (VeRL)") == "ray single controller verl"
    assert pick_key(None) is None and pick_key("  ") is None
    assert slug("Communication-efficient pretraining!", max_len=20) == "communication"
    assert slug("") == "x"


def test_extraction_requests_carry_the_schema_and_a_session_per_report(tmp_path: Path, run_synthesis,
                                                                       gateway) -> None:
    repo = one_report(tmp_path)
    run_synthesis(repo)
    [call] = structured_calls(gateway, "claim_extraction")
    body = call["request"]
    assert body["model"] == "openai/gpt-5-mini" and body["session_id"] == "2026-H2:synthesis:01-one"
    assert body["response_format"]["json_schema"]["schema"] == EXTRACTION_SCHEMA
    assert body["provider"] == {"require_parameters": True}
