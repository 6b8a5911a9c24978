"""Claims anchored in their report and citations checked against the evidence, through the CLI.

Each test runs `research-dispatch synthesize` (in process: tests/clirun.py) against the fake gateway (its
extractor quotes the report; its citation judge follows the lexical rule of docs/FAKES.md), on
hand-written reports with hand-written evidence files, one defect of issue 23 per test: an overstated
claim, an uncited claim, a phantom citation, an unsupported citation, a source that contradicts the
claim, a judge quote that is not in the passage, a negation, a hedge — and the cache (unchanged reports
cost no citation-check call).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from research_dispatch.synthesis.write.ledger import Ledger
from research_dispatch_fakes.script_synthesis import MISQUOTE, OVERSTATEMENT
from tests.synthesis.conftest import (
    SOURCES,
    bind_evidence,
    statement,
    structured_calls,
    synthesize_cli,
    write_evidence,
    write_pyproject,
    write_report,
)

GRPO_ALPHA = statement("rl-algorithm-grpo", "diloco-family")
PRIME_ALPHA = statement("decentralised-substrate-prime-rl", "diloco-family")
GRPO_BETA = statement("rl-algorithm-grpo", "verl-trl")
URL1, URL2 = SOURCES[0][0], SOURCES[1][0]


def repo_of(tmp_path: Path, reports: dict[str, tuple[str, list[str]]], extra: str = "",
            judges: tuple[str, ...] = ("qwen/qwen3-max", "anthropic/claude-sonnet-4.6")) -> Path:
    repo = tmp_path / "checked"
    repo.mkdir()
    write_pyproject(repo, extra, judges=judges)
    for stem, (model, sentences) in reports.items():
        write_report(repo, stem, model, sentences)
    return repo


def two_reports(tmp_path: Path, **kwargs: Any) -> Path:
    return repo_of(tmp_path, {"01-alpha": ("deepseek/deepseek-v4-pro", [GRPO_ALPHA, PRIME_ALPHA]),
                              "02-beta": ("anthropic/claude-sonnet-4.6", [GRPO_BETA])}, **kwargs)


def run(repo: Path, env: dict[str, str]) -> dict[str, Any]:
    result = synthesize_cli(repo, env)
    assert result.code == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    data = json.loads((repo / "framework" / "claims.json").read_text(encoding="utf-8"))
    Ledger.model_validate(data)
    data["_stdout"] = result.stdout
    return data  # type: ignore[no-any-return]


def claim_quoting(data: dict[str, Any], text: str) -> dict[str, Any]:
    [claim] = [c for c in data["claims"] if c["quote"].startswith(text[:60])]
    return claim


def check_items(data: dict[str, Any], claim_key: str) -> list[dict[str, Any]]:
    return [i for c in data["citation_checks"] for i in c["items"] if i["claim"] == claim_key]


def test_a_supported_citation_carries_the_reports_words_the_section_and_the_passages_quote(
        tmp_path: Path, synth_env, gateway) -> None:
    repo = two_reports(tmp_path)
    data = run(repo, synth_env)
    claim = claim_quoting(data, GRPO_ALPHA)
    # the claim's quote is the report's whole sentence, as the body has it, markers included
    assert claim["anchored"] is True and claim["quote"] == f"{GRPO_ALPHA} [1]." and claim["section"] == "Findings"
    assert claim["position"] == "for" and claim["sources"] == [1] and claim["units"] == ["U1"]
    [citation] = claim["citations"]
    passage = f"{GRPO_ALPHA}."
    assert citation == {"url": URL1, "support": "supported", "quote": passage,
                        "passage_sha256": json.loads((repo / "research" / "01-alpha.evidence.jsonl")
                                                     .read_text().splitlines()[0])["sha256"]}
    [item] = check_items(data, claim["key"])
    # judged by a model of neither author's family, and the judge never sees a model name
    assert item["judge_model"] == "qwen/qwen3-max" and item["answer"]["verdict"] == "supports"
    calls = structured_calls(gateway, "citation_check")
    assert len(calls) == 2 and all(c["request"]["model"] == "qwen/qwen3-max" for c in calls)
    assert not any("deepseek" in m["content"] or "01-alpha" in m["content"] for c in calls
                   for m in c["request"]["messages"])
    assert data["counts"]["citations"]["supported"] == 3 and data["counts"]["anchored"] == 3
    # every call is in the synthesis call log, under its report
    log = [json.loads(line) for line in (repo / "framework" / "synthesis.calls.jsonl").read_text().splitlines()]
    assert sorted(line["subject"] for line in log if line["purpose"] == "cite") == ["citations of 01-alpha",
                                                                                     "citations of 02-beta"]


def test_an_overstated_claim_is_not_anchored_and_its_citations_are_never_checked(tmp_path: Path, synth_env,
                                                                                 gateway) -> None:
    repo = two_reports(tmp_path)
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction", "session": "*:synthesis:01-alpha"},
                                     "overstate": True}]})
    data = run(repo, synth_env)
    claim = next(c for c in data["claims"] if c["statement"] == GRPO_ALPHA + OVERSTATEMENT)
    # no pointer, and words that are nowhere in the report: not located, and never shown as the report's words
    assert claim["quote"].endswith(OVERSTATEMENT) and claim["anchored"] is False and claim["section"] is None
    assert claim["units"] == [] and claim["standing"] == "not_anchored"
    assert claim["citations"] == [{"url": URL1, "support": "unsupported", "quote": None, "passage_sha256": None}]
    [item] = check_items(data, claim["key"])
    assert item["reason"] == "not checked: the claim could not be located in the report" and item["answer"] is None
    [line] = [x for x in data["limitations"] if "could not be located" in x]
    assert line.startswith("Report 01-alpha: a claim could not be located in the report: ")
    assert "the extractor's statement, not the report's words" in line
    # the other claims of the report are anchored and checked as usual
    assert claim_quoting(data, PRIME_ALPHA)["anchored"] is True
    assert data["counts"]["anchored"] == 2


def test_an_uncited_claim_has_no_citation(tmp_path: Path, synth_env, gateway) -> None:
    repo = repo_of(tmp_path, {"01-alpha": ("deepseek/deepseek-v4-pro", [GRPO_ALPHA])})
    uncited = "This paragraph gives context without making a claim of its own"
    claim = {"statement": "The report gives context", "layer": "RL algorithm", "stance": "describe",
             "decision": None, "pick": None, "alternatives": [], "condition": None, "position": "for",
             "quote": uncited, "section": "Findings", "sources": [], "confidence": "low"}
    from tests.synthesis.conftest import scripted_extraction

    gateway.set_scenario({"rules": [scripted_extraction("01-alpha", [claim])]})
    data = run(repo, synth_env)
    [only] = data["claims"]
    assert only["anchored"] is True and only["sources"] == [] and only["citations"] == []
    assert structured_calls(gateway, "citation_check") == []  # nothing to check, no call


def test_a_marker_missing_from_the_reference_list_is_a_phantom_citation(tmp_path: Path, synth_env) -> None:
    repo = repo_of(tmp_path, {"01-alpha": ("deepseek/deepseek-v4-pro", [GRPO_ALPHA + " [9]"])})
    data = run(repo, synth_env)
    claim = claim_quoting(data, GRPO_ALPHA)
    assert claim["anchored"] is True and claim["sources"] == [1, 9]
    assert [c["support"] for c in claim["citations"]] == ["supported", "phantom"]
    assert claim["citations"][1] == {"url": None, "support": "phantom", "quote": None, "passage_sha256": None}
    phantom = check_items(data, claim["key"])[1]
    assert phantom["number"] == 9 and "not in the report's reference list" in phantom["reason"]
    assert data["counts"]["citations"]["phantom"] == 1


def test_a_source_that_does_not_address_the_claim_leaves_it_unsupported(tmp_path: Path, synth_env) -> None:
    repo = two_reports(tmp_path)
    write_evidence(repo, "01-alpha", [(URL1, "HybridFlow combines single-controller and multi-controller "
                                             "paradigms to run RLHF dataflows efficiently."),
                                      (URL2, f"{PRIME_ALPHA}.")])
    data = run(repo, synth_env)
    claim = claim_quoting(data, GRPO_ALPHA)
    assert claim["citations"] == [{"url": URL1, "support": "unsupported", "quote": None, "passage_sha256": None}]
    [item] = check_items(data, claim["key"])
    assert item["answer"]["verdict"] == "does_not_address" and "do not address" in item["reason"]
    assert claim_quoting(data, PRIME_ALPHA)["citations"][0]["support"] == "supported"


def test_a_source_that_says_the_opposite_contradicts_the_claim(tmp_path: Path, synth_env) -> None:
    repo = two_reports(tmp_path)
    opposite = GRPO_ALPHA.replace("is the RL algorithm to adopt", "is not the RL algorithm to adopt") + "."
    assert opposite != f"{GRPO_ALPHA}."
    write_evidence(repo, "01-alpha", [(URL1, f"An unrelated opening sentence about datasets. {opposite}"),
                                      (URL2, f"{PRIME_ALPHA}.")])
    data = run(repo, synth_env)
    [citation] = claim_quoting(data, GRPO_ALPHA)["citations"]
    assert citation["support"] == "contradicted" and citation["quote"] == opposite
    assert data["counts"]["citations"]["contradicted"] == 1


def test_a_judge_copy_that_is_not_in_the_passage_costs_nothing_code_quotes_the_sentence(tmp_path: Path, synth_env,
                                                                                          gateway) -> None:
    repo = two_reports(tmp_path)
    gateway.set_scenario({"rules": [{"match": {"schema": "citation_check"}, "misquote": True}]})
    data = run(repo, synth_env)
    items = [i for c in data["citation_checks"] for i in c["items"]]
    assert len(items) == 3
    for item in items:  # the judge's copy says more than the page: the pointer wins, and code quotes the page
        assert item["answer"]["verdict"] == "supports" and item["answer"]["quote"].endswith(MISQUOTE + ".")
        assert item["support"] == "supported"
    for claim in data["claims"]:
        for citation in claim["citations"]:
            assert MISQUOTE not in citation["quote"] and citation["quote"] in {f"{GRPO_ALPHA}.", f"{PRIME_ALPHA}.",
                                                                               f"{GRPO_BETA}."}


def test_no_evidence_and_damaged_evidence_lines_are_said(tmp_path: Path, synth_env) -> None:
    repo = two_reports(tmp_path)
    (repo / "research" / "02-beta.evidence.jsonl").unlink()
    path = repo / "research" / "01-alpha.evidence.jsonl"
    lines = path.read_text().splitlines()
    tampered = json.loads(lines[1])
    tampered["text"] += " (edited)"
    damaged = "\n".join([lines[0], json.dumps(tampered), "{not json"]) + "\n"
    path.write_text(damaged)
    # the report names this file (an edit after the report would make the whole file no evidence, issue 31.2):
    # damaged lines in the file its report names are refused one by one
    bind_evidence(repo / "research" / "01-alpha.md", hashlib.sha256(damaged.encode("utf-8")).hexdigest())
    data = run(repo, synth_env)
    stdout = data["_stdout"]
    assert "research/01-alpha.evidence.jsonl: line 2: damaged evidence line (sha256: not the sha256 of text" in stdout
    assert "research/01-alpha.evidence.jsonl: line 3: damaged evidence line (not JSON" in stdout
    assert claim_quoting(data, PRIME_ALPHA)["citations"][0]["support"] == "no_evidence"
    assert claim_quoting(data, GRPO_ALPHA)["citations"][0]["support"] == "supported"
    assert claim_quoting(data, GRPO_BETA)["citations"][0]["support"] == "no_evidence"
    assert any("02-beta has no usable evidence file (research/02-beta.evidence.jsonl)" in line
               for line in data["limitations"])


def test_without_a_judge_of_another_family_citations_stay_unsupported_and_the_synthesis_says_why(
        tmp_path: Path, synth_env, gateway) -> None:
    repo = repo_of(tmp_path, {"01-alpha": ("deepseek/deepseek-v4-pro", [GRPO_ALPHA])},
                   judges=("deepseek/deepseek-v3.2",))
    data = run(repo, synth_env)
    [citation] = claim_quoting(data, GRPO_ALPHA)["citations"]
    assert citation["support"] == "unsupported"
    assert "no citation judge of a family other than the author's (deepseek)" in \
        check_items(data, claim_quoting(data, GRPO_ALPHA)["key"])[0]["reason"]
    assert any("01-alpha's citations were not checked: no citation judge" in line for line in data["limitations"])
    assert structured_calls(gateway, "citation_check") == []
    # citation_models chooses the citation judges on their own
    write_pyproject(repo, ', citation_models = ["x-ai/grok-4"]', judges=("deepseek/deepseek-v3.2",))
    gateway.reset()
    again = run(repo, synth_env)
    assert claim_quoting(again, GRPO_ALPHA)["citations"][0]["support"] == "supported"
    assert [c["request"]["model"] for c in structured_calls(gateway, "citation_check")] == ["x-ai/grok-4"]


def test_a_failed_check_call_leaves_its_citations_unsupported_with_the_reason(tmp_path: Path, synth_env,
                                                                             gateway) -> None:
    repo = two_reports(tmp_path)
    gateway.set_scenario({"rules": [{"match": {"schema": "citation_check", "session": "*:cite-01-alpha-*"},
                                     "status": 500}]})
    data = run(repo, synth_env)
    alpha = next(c for c in data["citation_checks"] if c["report"] == "01-alpha")
    assert alpha["status"] == "failed" and "gateway call failed" in alpha["error"]
    assert all(i["support"] == "unsupported" and i["reason"].startswith("not checked: ") for i in alpha["items"])
    assert claim_quoting(data, GRPO_BETA)["citations"][0]["support"] == "supported"  # the other report is checked
    assert any("Citation check of report 01-alpha failed" in line for line in data["limitations"])
    # the failure is not cached: the next run asks again and succeeds
    gateway.set_scenario({})
    gateway.reset()
    again = run(repo, synth_env)
    assert all(i["support"] == "supported" for c in again["citation_checks"] for i in c["items"])
    assert len(structured_calls(gateway, "citation_check")) == 1


def test_unchanged_reports_cost_no_citation_check_call_and_a_changed_passage_is_asked_again(
        tmp_path: Path, synth_env, gateway) -> None:
    repo = two_reports(tmp_path)
    first = run(repo, synth_env)
    ledger_bytes = (repo / "framework" / "claims.json").read_bytes()
    gateway.reset()
    second = run(repo, synth_env)
    assert structured_calls(gateway, "citation_check") == [] and gateway.completions == []
    assert "0 citation check, 3 citations cached" in second["_stdout"]
    assert (repo / "framework" / "claims.json").read_bytes() == ledger_bytes
    # a fresh checkout (no build cache): the committed ledger replays the verdicts
    shutil.rmtree(repo / "build" / "synthesis-cache")
    gateway.reset()
    run(repo, synth_env)
    assert gateway.completions == [] and (repo / "framework" / "claims.json").read_bytes() == ledger_bytes
    # a changed passage of one source: only that citation is asked again
    write_evidence(repo, "01-alpha", [(URL1, f"{GRPO_ALPHA}. Also a new sentence."), (URL2, f"{PRIME_ALPHA}.")])
    gateway.reset()
    third = run(repo, synth_env)
    [call] = structured_calls(gateway, "citation_check")
    assert call["request"]["messages"][1]["content"].count('"id":"K') == 1
    assert "1 citation check, 2 citations cached" in third["_stdout"]
    assert first["counts"]["citations"] == third["counts"]["citations"]


def test_a_verdict_edited_in_the_ledger_is_asked_again_not_replayed(tmp_path: Path, synth_env, gateway) -> None:
    """Issue 31, finding 9: one judge answer rewritten inside the committed framework/claims.json (the
    contradicting source's verdict turned to `supports`) was replayed with no check call. A replayed answer
    must be named by one of its own call records (its hash): this one is not, so it is asked again."""
    repo = two_reports(tmp_path)
    opposite = GRPO_ALPHA.replace("is the RL algorithm to adopt", "is not the RL algorithm to adopt") + "."
    write_evidence(repo, "01-alpha", [(URL1, f"An unrelated opening sentence about datasets. {opposite}"),
                                      (URL2, f"{PRIME_ALPHA}.")])
    honest = run(repo, synth_env)
    assert claim_quoting(honest, GRPO_ALPHA)["citations"][0]["support"] == "contradicted"
    ledger_path = repo / "framework" / "claims.json"
    ledger = json.loads(ledger_path.read_text(encoding="utf-8"))
    [item] = check_items(ledger, claim_quoting(ledger, GRPO_ALPHA)["key"])
    assert item["answer"]["verdict"] == "contradicts"
    item["answer"]["verdict"] = "supports"  # the edit: the rest of the ledger (and every call record) untouched
    ledger_path.write_text(json.dumps(ledger, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(repo / "build" / "synthesis-cache")  # a fresh checkout: only the committed ledger to replay
    gateway.reset()
    again = run(repo, synth_env)
    [call] = structured_calls(gateway, "citation_check")  # the edited verdict alone is asked again
    assert call["request"]["messages"][1]["content"].count('"id":"K') == 1
    assert "1 citation check, 2 citations cached" in again["_stdout"]
    assert "framework/claims.json: damaged synthesis cache entry (field answer: no call record of this entry " \
           "produced this answer" in again["_stdout"]
    assert claim_quoting(again, GRPO_ALPHA)["citations"][0]["support"] == "contradicted"
    assert again["counts"]["citations"] == honest["counts"]["citations"]


def test_answers_kept_before_they_were_bound_are_asked_again_once_in_one_warning(tmp_path: Path, synth_env,
                                                                                 gateway) -> None:
    """A ledger of an earlier version has no answer hashes on its calls: each answer is asked again once (a
    replay with no call behind it is what finding 9 forbids), said in one line rather than one per entry,
    and the answers of that run replay from then on."""
    repo = two_reports(tmp_path)
    run(repo, synth_env)
    ledger_path = repo / "framework" / "claims.json"
    older = ledger_path.read_text(encoding="utf-8")
    data = json.loads(older)

    def unbind(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("answers_sha256", None)
            for value in node.values():
                unbind(value)
        elif isinstance(node, list):
            for value in node:
                unbind(value)

    unbind(data)
    ledger_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(repo / "build" / "synthesis-cache")
    gateway.reset()
    again = run(repo, synth_env)
    assert len(structured_calls(gateway, "citation_check")) >= 1 and structured_calls(gateway, "claim_extraction")
    lines = [line for line in again["_stdout"].splitlines() if "asked again once" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: framework/claims.json: answers kept before"), lines
    assert "damaged synthesis cache entry" not in again["_stdout"]
    shutil.rmtree(repo / "build" / "synthesis-cache")
    gateway.reset()
    run(repo, synth_env)
    assert gateway.completions == []  # bound now: the committed ledger replays every answer


def test_the_fake_extractor_reads_negations_and_hedges(tmp_path: Path, synth_env) -> None:
    against = "We do not recommend PPO for long-horizon agent training on stale rollouts"
    hedged = "Tentatively, GRPO should be the default algorithm for maths only"
    repo = repo_of(tmp_path, {"01-alpha": ("deepseek/deepseek-v4-pro", [against]),
                              "02-beta": ("anthropic/claude-sonnet-4.6", [hedged])})
    data = run(repo, synth_env)
    no = claim_quoting(data, against)
    assert no["position"] == "against" and no["pick"] == "PPO" and no["stance"] == "recommend"
    maybe = claim_quoting(data, hedged)
    assert maybe["position"] == "for" and maybe["pick"] == "GRPO" and maybe["condition"] == "for maths only"
