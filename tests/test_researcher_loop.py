"""The research loop at the model seam: band corrections, what the model is shown, what it is told.

The loop's own code (`Researcher`, inside `run_leg`) over a scripted model and scripted search
(`tests/seam.py`); no HTTP. The caps, finish reasons and tool-call mistakes are reliability cases
(tests/reliability/test_loop_rules.py); the wire is tested against the HTTP fakes.
"""

from __future__ import annotations

import json
from pathlib import Path

from research_dispatch.leg import contract
from tests.seam import URLS, ScriptedGateway, extract, good_leg, report, research, search, split, text

STEM = "02-diloco-family"


def status(repo: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((repo / "build" / "legs" / f"{STEM}.json").read_text())  # type: ignore[no-any-return]


def test_short_draft_is_sent_back_for_expansion(repo: Path) -> None:
    gateway = ScriptedGateway(search(), extract(*URLS[:3]), text(report(900)), text(report(2200)))
    research(repo, STEM, gateway)
    done = status(repo)
    assert done["status"] == "ok" and 2000 <= done["words"] <= 2500, done
    ask = gateway.sent[3].last["content"]
    assert ask == contract.REVISE.format(words=900, min_words=2000, max_words=2500, verb="Expand")
    assert gateway.sent[3].messages[-2] == {"role": "assistant", "content": report(900)}  # the draft, sent back


def test_long_draft_is_sent_back_to_be_tightened_and_the_band_is_asked_at_most_twice(repo: Path) -> None:
    long = report(3100)
    gateway = ScriptedGateway(search(), extract(*URLS[:3]), text(long), text(long), text(long))
    research(repo, STEM, gateway)
    asks = [s.last["content"] for s in gateway.sent[3:]]
    assert asks == [contract.REVISE.format(words=3100, min_words=2000, max_words=2500, verb="Tighten")] * 2
    done = status(repo)
    assert done["status"] == "degraded" and "3100 words, outside the 2000–2500 band" in done["reasons"]


def test_web_text_is_wrapped_and_labelled_untrusted(repo: Path) -> None:
    gateway = ScriptedGateway(*good_leg())
    research(repo, STEM, gateway)
    messages = gateway.sent[-1].messages
    system = messages[0]["content"]
    assert "untrusted web content" in system and "Write between 2000 and 2500 words." in system
    tool = next(m["content"] for m in messages if m["role"] == "tool")
    assert tool.startswith('<tool_result tool="web_search" status="ok">') and '<source id="S1"' in tool


def test_every_user_message_after_the_brief_is_a_declared_follow_up(repo: Path) -> None:
    """Empty reply, band correction and continuation, then the stop message: each is a contract follow-up
    (the fake's scripted model keys on them), and nothing else is said to the model."""
    first, rest = split(report(2200), 0.5)
    gateway = ScriptedGateway(search(), text(""), text(report(700)), text(first, finish_reason="length"), text(rest))
    research(repo, STEM, gateway)
    assert status(repo)["report"]
    topic = repo / "topics" / f"{STEM}.yaml"
    topic.write_text(topic.read_text(encoding="utf-8") + "budget: {max_steps: 2}\n", encoding="utf-8")
    stopped = ScriptedGateway(search(), text(report(2200)))
    research(repo, STEM, stopped)
    for gateway_, expected in ((gateway, {contract.EMPTY_REPLY_PREFIX, contract.REVISE_PREFIX,
                                          contract.CONTINUE_PREFIX}),
                               (stopped, {contract.STOP_RESEARCHING_PREFIX})):
        seen: set[str] = set()
        for sent in gateway_.sent:
            users = sent.user_messages()
            assert users[0].startswith(contract.TOPIC_ID_LABEL)
            for said in users[1:]:
                assert said.startswith(contract.FOLLOW_UP_PREFIXES), said[:80]
                seen.update(p for p in contract.FOLLOW_UP_PREFIXES if said.startswith(p))
        assert seen == expected
    assert status(repo)["report"]


def test_citations_to_sources_never_retrieved_are_dropped_and_counted(repo: Path) -> None:
    """Only ids the tools handed out are citable: [S9] was never retrieved; it is dropped, counted and said."""
    gateway = ScriptedGateway(search(), extract(*URLS[:3]), text(report(2200, cite=("S1", "S2", "S3", "S9"))))
    research(repo, STEM, gateway)
    done = status(repo)
    assert done["status"] == "degraded" and done["sources"] == 3
    assert any(r.startswith("dropped ") and "(S9)" in r for r in done["reasons"]), done["reasons"]
    text_ = (repo / "research" / f"{STEM}.md").read_text(encoding="utf-8")
    assert "[S9]" not in text_ and "citations_dropped: " in text_ and "citations_dropped: 0" not in text_


def test_a_report_citing_no_retrieved_source_is_not_written(repo: Path) -> None:
    gateway = ScriptedGateway(search(), text(report(2200, cite=("S7", "S8"))))
    research(repo, STEM, gateway)
    done = status(repo)
    assert done["status"] == "failed" and done["report"] is None
    assert done["error"] == "the report cites no retrieved source; an unsupported report is not written"
    assert not (repo / "research" / f"{STEM}.md").exists()
