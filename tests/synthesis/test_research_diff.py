"""A claim diff of the research, not of the extractor (issue 29.6).

At the model seam (`tests/seam.py`): the planted reports are synthesized, then synthesized again with
another extractor model that reads the same, unchanged reports differently — as a newer model does —
while the fakes' scripted judge and citation checker answer the rest. What is asserted is what the
reviewer reads: the claim diff `synthesize` prints and the one the PR body carries (`prbody.claim_diff`).
Before issue 29 such a re-extraction read "Decisions changed: 4 · Lost a supported citation: 7".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research_dispatch.config.settings import load_settings
from research_dispatch.core.errors import GatewayError
from research_dispatch.leg.report import load_report, render_report
from research_dispatch.publish.prbody import claim_diff
from research_dispatch.synthesis import SynthesisResult, diff_ledgers, synthesize
from tests.profiles import examples
from tests.seam import Reply, ScriptedGateway, Sent, synthesis_model
from tests.synthesis.conftest import (
    CYCLE,
    PLANTED,
    cited_sources,
    ledger,
    report_body,
    statement,
    write_pyproject,
    write_report,
)

OTHER_EXTRACTOR = "anthropic/claude-haiku-4.5"
GRPO = statement("rl-algorithm-grpo", "diloco-family")


def newer_extractor(sent: Sent) -> Reply | GatewayError:
    """The fakes' extractor, except that the newer model reads 01-alpha's GRPO recommendation as against
    it (and, asked again about that position, confirms it), and points 02-beta's claims at units the report
    does not have, quoting words that are not in it (so none of them is located)."""
    reply = synthesis_model(sent)
    if sent.model != OTHER_EXTRACTOR:
        return reply
    if sent.schema == "position_check":
        answer = json.loads(reply.content)
        for check in answer["checks"]:
            check["position"] = "against"
        return Reply(content=json.dumps(answer), served_provider="Anthropic")
    if sent.schema != "claim_extraction":
        return reply
    answer = json.loads(reply.content)
    for claim in answer["claims"]:
        if sent.session_id and sent.session_id.endswith(":01-alpha") and claim["statement"] == GRPO:
            claim["position"] = "against"
        if sent.session_id and sent.session_id.endswith(":02-beta"):
            claim["units"] = ["U999"]
            claim["quote"] = "As the authors put it, " + claim["quote"]
    return Reply(content=json.dumps(answer), served_provider="Anthropic")


def run(repo: Path) -> SynthesisResult:
    return synthesize(repo, load_settings(repo), env={}, cycle=CYCLE,
                      gateway=ScriptedGateway(otherwise=newer_extractor))


def reextract(repo: Path) -> tuple[SynthesisResult, str | None]:
    """Synthesize with the newer extractor; the claim diff as `synthesize` prints it and as the PR shows it."""
    committed = (repo / "framework" / "claims.json").read_text(encoding="utf-8")
    write_pyproject(repo, f', extractor_model = "{OTHER_EXTRACTOR}"')
    result = run(repo)
    markdown, _short, _note = claim_diff(committed, repo / "framework" / "claims.json", "framework/claims.json")
    return result, markdown


def test_a_re_extraction_of_unchanged_reports_changes_no_decision_of_the_research(planted: Path) -> None:
    run(planted)
    result, markdown = reextract(planted)
    diff = result.diff
    # the extractor changed: every report is read again (6), and the GRPO position its own sentence
    # contradicts is asked once more (extract/position.py)
    assert result.extraction_calls == 7
    assert diff.rerun is not None and diff.rerun.reextracted == tuple(sorted(PLANTED))
    # what moved did move (a GRPO divergence, 02-beta's claims no longer located) ...
    moved = diff.rerun_items
    assert moved is not None and moved.decisions and moved.counts()["decisions"] >= 1
    # ... but only because of the re-extraction: the research changed nothing
    assert diff.counts() == dict.fromkeys(diff.counts(), 0)
    # a claim that lost its anchor is never "lost a supported citation", research or not
    unanchored = {c["key"] for c in ledger(planted)["claims"] if not c["anchored"]}
    assert unanchored and not {i.key for i in moved.lost_citations} & unanchored
    # the first line says so, in the terminal and in the PR body
    assert diff.text().splitlines()[0].startswith("claim diff: Re-extracted: 6 reports whose text is unchanged")
    assert "the extractor: openai/gpt-5-mini → anthropic/claude-haiku-4.5" in diff.text().splitlines()[0]
    assert markdown is not None
    first, *rest = markdown.splitlines()
    assert first.startswith("**Re-extracted: 6 reports whose text is unchanged were extracted again (the extractor: "
                            "openai/gpt-5-mini → anthropic/claude-haiku-4.5")
    assert "No change in the research." in rest
    folded = markdown.split("<details><summary>Moved only by re-extraction (no report of theirs changed): ", 1)[1]
    assert folded.startswith("Decisions changed: ") and "rl-algorithm/grpo" in folded


def test_a_changed_report_is_the_research_even_when_the_extractor_changed_too(planted: Path) -> None:
    run(planted)
    model, sentences, route = PLANTED["02-beta"]
    write_report(planted, "02-beta", model, [*sentences, statement("decentralised-substrate-prime-rl", "verl-trl")],
                 route=route)
    result, markdown = reextract(planted)
    diff = result.diff
    assert diff.rerun is not None and "02-beta" not in diff.rerun.reextracted
    assert "02-beta" in diff.rerun.changed_reports and len(diff.rerun.reextracted) == 5
    # every change the diff gives the research involves the report that changed
    research = [*diff.decisions, *diff.lost_citations, *diff.promoted, *diff.lost_support, *diff.new_divergences,
                *diff.new, *diff.dropped]
    assert research and all("02-beta" in item.reports for item in research)
    assert diff.rerun_items is not None and all("02-beta" not in item.reports for item in [
        *diff.rerun_items.decisions, *diff.rerun_items.new, *diff.rerun_items.lost_support])
    assert markdown is not None and markdown.startswith("**Re-extracted: 5 reports")


def test_a_report_rewritten_with_the_same_text_is_not_extracted_again(planted: Path) -> None:
    """A leg run again that wrote the same words (another finish time, another provider) is a new file but
    not a new text: its claims are replayed, and nothing is reported as changed."""
    run(planted)
    path = planted / "research" / "01-alpha.md"
    report = load_report(path, repo=planted)
    meta = report.meta.model_copy(update={"finished_at": "2026-07-02T00:00:00Z", "served_providers": ["Other"]})
    body = report_body(meta.title, PLANTED["01-alpha"][1])  # the same words as before
    path.write_text(render_report(meta, body, cited_sources()), encoding="utf-8")
    again = run(planted)
    assert again.extraction_calls == 0 and again.cached_extractions == len(PLANTED)
    assert again.diff.is_empty


def test_unchanged_settings_and_reports_are_no_change(planted: Path) -> None:
    run(planted)
    again = run(planted)
    assert again.llm_calls == 0 and again.diff.is_empty and again.diff.rerun is None


# --------------------------------------------------------------------------------------------------
# The rule, over any ledgers


STEMS = ("r0", "r1", "r2", "r3")
LABELS = ("X", "Y", "Z")


@st.composite
def ledgers(draw: st.DrawFn, extractor: str, hashes: dict[str, str]) -> dict[str, Any]:
    """A ledger of the four reports (with these file hashes), read by `extractor`, whatever it found."""
    stems = list(hashes)

    def holders() -> list[str]:
        return sorted(draw(st.sets(st.sampled_from(stems), max_size=3)))

    clusters = []
    for i in range(draw(st.integers(0, 6))):
        reports = holders()
        clusters.append({"key": f"l/{draw(st.sampled_from(LABELS)).lower()}{i % 3}", "layer": "l",
                         "status": draw(st.sampled_from(("convergent", "single_source", "same_family", "divergent"))),
                         "pick": draw(st.sampled_from(LABELS)), "label": "x", "reports": reports,
                         "families": reports, "sources": draw(st.lists(st.sampled_from(("u1", "u2")), max_size=2)),
                         "members": [f"{r}#c{i}" for r in reports] + [f"{r}#d{i}" for r in holders()],
                         "flagged": draw(st.booleans()), "position": "for", "decision": "d"})
    claims = [{"key": f"{r}#c{i}", "report": r, "layer": "l", "statement": "s", "anchored": draw(st.booleans()),
               "citations": [{"url": "u1", "support": draw(st.sampled_from(("supported", "unsupported")))}]}
              for i in range(4) for r in stems]
    keys = sorted({c["key"] for c in clusters})
    divergences = []
    if len(keys) >= 2 and draw(st.booleans()):
        sides = keys[:2]
        divergences.append({"key": f"divergence/{sides[0]}", "layer": "l", "line": draw(st.sampled_from(("a", "b"))),
                            "tie": draw(st.booleans()), "kind": "alternatives",
                            "positions": [{"cluster": k, "label": k, "reports": holders(), "families": holders()}
                                          for k in sides]})
    return {"schema": "research-dispatch/claims@3", "settings": {"extractor_model": extractor},
            "reports": [{"stem": s, "sha256": h, "extraction": {"key": f"{extractor}:{h}"}} for s, h in hashes.items()],
            "clusters": clusters, "claims": claims, "divergences": divergences}


HASHES = {stem: f"sha-{stem}" for stem in STEMS}


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers("openai/gpt-5-mini", HASHES), ledgers("anthropic/claude-haiku-4.5", HASHES))
def test_a_re_extraction_of_unchanged_reports_is_never_the_research(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Whatever the other extractor found in the same reports, the research changed nothing; the first
    line says the reports were re-extracted."""
    diff = diff_ledgers(old, new)
    assert diff.counts() == dict.fromkeys(diff.counts(), 0)
    assert diff.rerun is not None and diff.rerun.reextracted == STEMS
    assert diff.markdown().startswith("**Re-extracted: 4 reports whose text is unchanged")
    assert diff.text().startswith("claim diff: Re-extracted")


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers("openai/gpt-5-mini", HASHES), ledgers("anthropic/claude-haiku-4.5", {**HASHES, "r2": "sha-new"}))
def test_what_the_diff_gives_the_research_involves_a_report_that_changed(old: dict[str, Any],
                                                                          new: dict[str, Any]) -> None:
    diff = diff_ledgers(old, new)
    research = [*diff.decisions, *diff.lost_citations, *diff.promoted, *diff.lost_support, *diff.new_divergences,
                *diff.new, *diff.dropped]
    assert all("r2" in item.reports for item in research)
    moved = diff.rerun_items
    assert moved is not None and not any("r2" in item.reports for item in [
        *moved.decisions, *moved.lost_citations, *moved.promoted, *moved.lost_support, *moved.new_divergences,
        *moved.new, *moved.dropped])
