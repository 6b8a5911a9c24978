"""The fake's synthesis behaviours: schema-valid, deterministic, derived from the request only."""

from __future__ import annotations

import json

from research_dispatch.synthesis.align.judge import Judgement
from research_dispatch.synthesis.extract.claims import Extraction
from research_dispatch_fakes import script_structured, script_synthesis
from tests.synthesis.conftest import statement


def extraction_body(report: str) -> dict:
    return {"model": "openai/gpt-5-mini",
            "response_format": {"type": "json_schema", "json_schema": {"name": "claim_extraction", "strict": True}},
            "messages": [{"role": "system", "content": "extract"},
                         {"role": "user", "content": f"Report title: T\n\n<report>\n{report}\n</report>"}]}


REPORT = f"""# T

## Summary

This report looks at the evidence in some detail for practitioners. {statement("orchestration-monarch",
"monarch-torchforge-openenv")} [2, 3]. A filler sentence without a citation follows here.

## What the sources establish

Streaming DiLoCo synchronises parameter fragments on a staggered schedule across datacentres [1].
For the environment format, Gymnasium should be the default for agent training today [4].
"""


def test_extraction_finds_planted_statements_with_their_citations_and_generic_findings() -> None:
    answer = script_structured.respond_structured(extraction_body(REPORT))
    claims = Extraction.model_validate(answer).parsed()[0]
    planted = claims[0]
    assert planted.statement == statement("orchestration-monarch", "monarch-torchforge-openenv")
    assert (planted.layer, planted.stance, planted.pick, planted.sources) == ("orchestration", "recommend",
                                                                              "Monarch", [2, 3])
    assert planted.decision == "orchestration layer for RL post-training"
    assert planted.condition == "once its actor-mesh API stabilises" and planted.confidence == "medium"
    generic = claims[1]
    assert generic.stance == "describe" and generic.confidence == "medium" and generic.sources == [1]
    assert generic.layer == "communication-efficient pretraining"  # by the bank's keywords
    assert len(claims) == 2  # one generic finding per section: the Gymnasium sentence is the second of its section
    assert script_synthesis.extract_claims(extraction_body(REPORT)) == answer  # deterministic


def test_heuristic_recommendations_for_text_outside_the_bank() -> None:
    report = "## Recommendations\n\nFor the environment format, Gymnasium should be the default for agents [4].\n"
    [claim] = Extraction.model_validate(script_synthesis.extract_claims(extraction_body(report))).parsed()[0]
    assert (claim.stance, claim.pick, claim.layer) == ("recommend", "Gymnasium", "environment format")
    assert claim.decision == "environment format for agentic RL"  # the bank's decision for that layer


def test_the_fake_extractor_follows_the_prompt_source_descriptions_are_not_claims() -> None:
    report = ("## Background\n\nRepository for torchtitan, PyTorch's reference platform for large-scale training [1]. "
              "The post presents the infrastructure built for the run in some detail [2]. "
              "A follow-up to DiLoCo from Google DeepMind that attacks the remaining bandwidth peaks [3]. "
              "Streaming DiLoCo cuts peak bandwidth between workers by about two orders of magnitude [3].\n")
    [claim] = Extraction.model_validate(script_synthesis.extract_claims(extraction_body(report))).parsed()[0]
    assert claim.statement.startswith("Streaming DiLoCo cuts peak bandwidth")


def alignment_body(items: list[dict]) -> dict:
    lines = "\n".join(json.dumps(item) for item in items)
    return {"model": "qwen/qwen3-max",
            "response_format": {"type": "json_schema", "json_schema": {"name": "claim_alignment", "strict": True}},
            "messages": [{"role": "system", "content": "align"},
                         {"role": "user", "content": f"Align.\n\n<claims>\n{lines}\n</claims>"}]}


def test_alignment_groups_by_decision_then_by_bank_id_then_by_overlap() -> None:
    items = [
        {"id": "C1", "report": "Report A", "layer": "RL algorithm", "stance": "recommend", "pick": "GRPO",
         "decision": "RL algorithm for post-training", "statement": statement("rl-algorithm-grpo", "verl-trl")},
        {"id": "C2", "report": "Report B", "layer": "RL algorithm", "stance": "recommend", "pick": "GRPO",
         "decision": "RL algorithm for post-training", "statement": statement("rl-algorithm-grpo", "diloco-family")},
        {"id": "C3", "report": "Report A", "layer": "optimizer", "stance": "recommend", "pick": "AdamW",
         "decision": "optimizer for long RL runs", "statement": "AdamW with warmup is the optimizer to use"},
        {"id": "C4", "report": "Report C", "layer": "optimizer", "stance": "recommend", "pick": "Muon",
         "decision": "optimizer for long RL runs", "statement": "Muon with warmup is the optimizer to use"},
        {"id": "C5", "report": "Report C", "layer": "optimizer", "stance": "recommend", "pick": "ZeRO-3",
         "decision": "optimizer state sharding", "statement": "ZeRO-3 should shard the optimizer state"},
        {"id": "C6", "report": "Report C", "layer": "general", "stance": "describe", "pick": None, "decision": None,
         "statement": "Bananas ripen faster in paper bags"},
        {"id": "C7", "report": "Report A", "layer": "communication-efficient pretraining", "stance": "describe",
         "pick": None, "decision": None,
         "statement": statement("pretraining-streaming-diloco", "diloco-family")},
        {"id": "C8", "report": "Report B", "layer": "communication-efficient pretraining", "stance": "describe",
         "pick": None, "decision": None,
         "statement": statement("pretraining-streaming-diloco", "diloco-family")},
    ]
    answer = script_synthesis.align_claims(alignment_body(items))
    judgement = Judgement.model_validate(answer, context={"ids": {i["id"] for i in items}})
    assert [(g.relation, [p.claims for p in g.positions]) for g in judgement.groups] == [
        ("agree", [["C1", "C2"]]),
        ("alternatives", [["C3"], ["C4"]]),  # one decision, two picks; ZeRO-3 answers another decision
        ("agree", [["C7", "C8"]]),
    ]
    assert script_synthesis.align_claims(alignment_body(items)) == answer


def test_extracted_claims_quote_the_report_with_their_section_and_position() -> None:
    claims = Extraction.model_validate(script_synthesis.extract_claims(extraction_body(REPORT))).parsed()[0]
    planted, generic = claims
    assert planted.quote == planted.statement and planted.quote in REPORT and planted.section == "Summary"
    assert planted.position == "for"
    assert generic.quote in REPORT and generic.section == "What the sources establish"
    overstated = Extraction.model_validate(
        script_synthesis.extract_claims(extraction_body(REPORT), frozenset({"overstate"}))).parsed()[0][0]
    assert overstated.quote not in REPORT and overstated.quote.endswith(script_synthesis.OVERSTATEMENT)


def test_on_a_numbered_report_claims_point_at_units_and_copy_their_opening_words() -> None:
    from research_dispatch.synthesis.read.units import report_units

    units = report_units(REPORT)
    claims = Extraction.model_validate(script_synthesis.extract_claims(extraction_body(units.numbered()))).parsed()[0]
    planted, generic = claims
    [unit] = planted.units
    assert planted.statement in units.words(units.get(unit)) and planted.section is None  # code knows the section
    assert planted.quote == " ".join(planted.statement.split()[:script_synthesis.QUOTE_WORDS])
    assert generic.units and generic.quote in units.words(units.get(generic.units[0]))


def citation_body(sentence: str, passage: str) -> dict:
    lines = [json.dumps({"id": "P1", "source": "A page", "text": passage}),
             json.dumps({"id": "K1", "sentence": sentence, "passages": ["P1"]})]
    content = f"Check 1 citations.\n\n<passages>\n{lines[0]}\n</passages>\n\n<claims>\n{lines[1]}\n</claims>"
    return {"model": "qwen/qwen3-max",
            "response_format": {"type": "json_schema", "json_schema": {"name": "citation_check", "strict": True}},
            "messages": [{"role": "system", "content": "check"}, {"role": "user", "content": content}]}


def test_the_fake_citation_judge_decides_by_word_overlap_and_quotes_the_passage() -> None:
    from research_dispatch.synthesis.check.citations import CheckAnswers

    sentence = "Streaming DiLoCo cuts peak bandwidth between datacentres by syncing parameter fragments"
    passage = ("The paper is about training. Streaming DiLoCo syncs parameter fragments on a schedule, which cuts "
               "peak bandwidth between datacentres. Other results follow.")
    [check] = CheckAnswers.model_validate(script_structured.respond_structured(citation_body(sentence, passage)),
                                          context={"ids": {"K1"}}).checks
    assert check.verdict.value == "supports" and check.passage == "P1" and check.quote is not None
    assert check.quote in passage and "cuts peak bandwidth" in check.quote
    opposite = passage.replace("which cuts", "which does not cut")
    [contra] = script_synthesis.check_citations(citation_body(sentence, opposite))["checks"]
    assert contra["verdict"] == "contradicts" and contra["quote"] in opposite
    [silent] = script_synthesis.check_citations(citation_body(sentence, "A page about databases and caches."))["checks"]
    assert silent == {"id": "K1", "verdict": "does_not_address", "passage": None, "quote": None}
    [misquoted] = script_synthesis.check_citations(citation_body(sentence, passage), frozenset({"misquote"}))["checks"]
    assert misquoted["verdict"] == "supports" and misquoted["quote"] not in passage
    assert script_synthesis.check_citations(citation_body(sentence, passage)) == \
        script_synthesis.check_citations(citation_body(sentence, passage))  # deterministic


def test_the_fake_reads_a_message_sent_as_content_parts_with_a_cache_breakpoint() -> None:
    """The product sends an Anthropic or Gemini judge its last message as content parts (a `cache_control`
    breakpoint, gateway/caching.py): the fake judges the same text the same way as a plain string."""
    sentence = "Streaming DiLoCo cuts peak bandwidth between datacentres by syncing parameter fragments"
    passage = "Streaming DiLoCo syncs parameter fragments on a schedule, which cuts peak bandwidth between datacentres."
    plain = citation_body(sentence, passage)
    parts = json.loads(json.dumps(plain))
    text = parts["messages"][1]["content"]
    parts["messages"][1]["content"] = [{"type": "text", "text": text[:20]},
                                       {"type": "text", "text": text[20:], "cache_control": {"type": "ephemeral"}}]
    answer = script_synthesis.check_citations(parts)
    assert answer == script_synthesis.check_citations(plain) and answer["checks"][0]["verdict"] == "supports"
