"""The research loop at the model seam: plan, gap check, evidence gate, stall rule, the tool-less write from the
dossier, concurrent tools with deterministic ids, the brief's URLs; band corrections; what the model is shown
and told.

The loop's own code (`Researcher`, inside `run_leg`) over a scripted model and scripted search
(`tests/seam.py`); no HTTP. The caps, finish reasons and tool-call mistakes are reliability cases
(tests/reliability/test_loop_rules.py); the wire is tested against the HTTP fakes.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from research_dispatch.config.settings import Budget, SearchSettings, WordBand
from research_dispatch.core.bounds import CallBounds
from research_dispatch.leg import contract
from research_dispatch.leg.report import load_report
from research_dispatch.leg.researcher import (
    PROMPT_VERSION,
    STALL_SEARCHES,
    WRITING_SYSTEM_PROMPT,
    LegSpec,
    Researcher,
)
from research_dispatch.tools.destinations import DestinationPolicy
from research_dispatch.tools.providers import Hit, SearchQuery
from research_dispatch.tools.search import SearchTools
from tests.seam import (
    COVERED,
    DONE,
    PAGES,
    PLAN,
    URLS,
    Page,
    ScriptedGateway,
    ScriptedSearch,
    Sent,
    calls,
    extract,
    good_leg,
    planned_search,
    report,
    research,
    research_turns,
    search,
    split,
    text,
    tool,
)

STEM = "02-diloco-family"


def status(repo: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((repo / "build" / "legs" / f"{STEM}.json").read_text())  # type: ignore[no-any-return]


def front_matter(repo: Path) -> dict[str, Any]:
    text_ = (repo / "research" / f"{STEM}.md").read_text(encoding="utf-8")
    return yaml.safe_load(text_.split("---\n")[1])  # type: ignore[no-any-return]


def writing_call(gateway: ScriptedGateway) -> Sent:
    return next(s for s in gateway.sent if s.purpose == "write")


# -- band corrections -------------------------------------------------------------------------------
def test_short_draft_is_sent_back_for_expansion(repo: Path) -> None:
    gateway = ScriptedGateway(*research_turns(), text(report(900)), text(report(2200)))
    research(repo, STEM, gateway)
    done = status(repo)
    assert done["status"] == "ok" and 2000 <= done["words"] <= 2500, done
    ask = gateway.sent[5].last["content"]
    assert ask == contract.REVISE.format(words=900, min_words=2000, max_words=2500, verb="Expand")
    assert gateway.sent[5].messages[-2] == {"role": "assistant", "content": report(900)}  # the draft, sent back
    assert gateway.sent[5].tools is None  # the correction stays in the writing conversation: no tools


def test_long_draft_is_sent_back_to_be_tightened_and_the_band_is_asked_at_most_twice(repo: Path) -> None:
    long = report(3100)
    gateway = ScriptedGateway(*research_turns(), text(long), text(long), text(long))
    research(repo, STEM, gateway)
    asks = [s.last["content"] for s in gateway.sent[5:]]
    assert asks == [contract.REVISE.format(words=3100, min_words=2000, max_words=2500, verb="Tighten")] * 2
    done = status(repo)
    assert done["status"] == "degraded" and "3100 words, outside the 2000–2500 band" in done["reasons"]


# -- what the model is shown and told -----------------------------------------------------------------
def test_web_text_is_wrapped_and_labelled_untrusted(repo: Path) -> None:
    gateway = ScriptedGateway(*good_leg())
    research(repo, STEM, gateway)
    research_messages, writing = gateway.sent[3].messages, writing_call(gateway).messages
    assert "untrusted web content" in research_messages[0]["content"]
    assert "untrusted web content" in writing[0]["content"]
    assert "Write between 2000 and 2500 words." in writing[0]["content"]
    tool_ = next(m["content"] for m in research_messages if m["role"] == "tool")
    assert tool_.startswith('<tool_result tool="web_search" status="ok">') and '<source id="S1"' in tool_


def test_every_user_message_after_each_conversations_first_is_a_declared_follow_up(repo: Path) -> None:
    """A plan without tool calls, an empty reply, the gap check, the gaps, a band correction and a
    continuation: each is a contract follow-up (the fake's scripted model keys on them), and nothing else
    is said to the model — in the research conversation and in the writing one."""
    first, rest = split(report(2200), 0.5)
    gateway = ScriptedGateway(
        text(PLAN), search(), text(""), extract(*URLS[:3]), text(DONE),
        text("1: S1, S2\n2: S3"),  # S3 (INTELLECT-2) was only seen in a search result: a gap
        extract(URLS[3]),  # the one turn the gaps get; then the report is written
        text(report(700)), text(first, finish_reason="length"), text(rest))
    research(repo, STEM, gateway)
    assert status(repo)["report"] and gateway.left() == 0
    seen: set[str] = set()
    for sent in gateway.sent:
        users = sent.user_messages()
        assert users[0].startswith(contract.TOPIC_ID_LABEL)  # each conversation opens with the brief
        for said in users[1:]:
            assert said.startswith(contract.FOLLOW_UP_PREFIXES), said[:80]
            seen.update(p for p in contract.FOLLOW_UP_PREFIXES if said.startswith(p))
    assert seen == set(contract.FOLLOW_UP_PREFIXES)


def test_citations_to_sources_never_retrieved_are_dropped_and_counted(repo: Path) -> None:
    """Only ids the tools handed out are citable: [S9] was never retrieved; it is dropped, counted and said."""
    gateway = ScriptedGateway(*research_turns(), text(report(2200, cite=("S1", "S2", "S3", "S9"))))
    research(repo, STEM, gateway)
    done = status(repo)
    assert done["status"] == "degraded" and done["sources"] == 3
    assert any(r.startswith("dropped ") and "(S9)" in r for r in done["reasons"]), done["reasons"]
    text_ = (repo / "research" / f"{STEM}.md").read_text(encoding="utf-8")
    assert "[S9]" not in text_ and "citations_dropped: " in text_ and "citations_dropped: 0" not in text_


def test_a_report_citing_no_retrieved_source_is_not_written(repo: Path) -> None:
    gateway = ScriptedGateway(*research_turns(), text(report(2200, cite=("S7", "S8"))))
    research(repo, STEM, gateway)
    done = status(repo)
    assert done["status"] == "failed" and done["report"] is None
    assert done["error"] == "the report cites no retrieved source; an unsupported report is not written"
    assert not (repo / "research" / f"{STEM}.md").exists()


def test_the_date_is_in_the_prompt_and_not_in_the_prompt_version(repo: Path) -> None:
    """"Today" is the run's date, not the model's training cut-off; the templates, and so the prompt version
    (part of every leg's input hash), stay the same from day to day."""
    gateway = ScriptedGateway(*good_leg())
    research(repo, STEM, gateway)
    started = status(repo)["started_at"][:10]
    assert f"{contract.DATE_LABEL} {started}" in gateway.sent[0].user_messages()[0]
    assert f"{contract.DATE_LABEL} {started}" in writing_call(gateway).user_messages()[0]
    assert started not in PROMPT_VERSION and "{today}" not in WRITING_SYSTEM_PROMPT
    assert front_matter(repo)["prompt_version"] == PROMPT_VERSION


def test_the_writer_is_asked_for_recommendations_the_synthesis_can_align(repo: Path) -> None:
    gateway = ScriptedGateway(*good_leg())
    research(repo, STEM, gateway)
    system = writing_call(gateway).messages[0]["content"]
    assert "<decision>:** <pick> over <the alternatives> — <why, with its [S<n>] citations>; switch to " \
           "<alternative> when <condition>; confidence <high|medium|low>." in system
    assert "**Not recommended:** <option> for <decision>, because <the reason, with its [S<n>] citations>." \
           in system


# -- the plan, the gap check and the evidence gate ------------------------------------------------------
def test_the_first_turn_states_the_plan_that_the_gap_check_and_the_write_carry(repo: Path) -> None:
    gateway = ScriptedGateway(*good_leg())
    research(repo, STEM, gateway)
    check = gateway.sent[3]
    assert check.tool_choice == "none" and check.tools  # the answer is text; the tools stay declared
    assert check.last["content"] == contract.GAP_CHECK.format(
        stalled="", plan="1. How much communication DiLoCo saves, and at what quality cost — "
                          "https://arxiv.org/abs/2311.08105\n2. Which systems ran it at production scale — "
                          "https://www.primeintellect.ai/blog/intellect-2",
        read="S1, S2, S4", snippets="S3")  # what was read in full is the registry's to say
    write = writing_call(gateway).user_messages()[0]
    assert f"{contract.PLAN_LABEL}\n1. How much communication" in write
    research_summary = front_matter(repo)["research"]
    assert research_summary == {"plan_items": 2, "stalled": False, "gap_check": "answered", "gaps_researched": 0,
                                "dossier": {"sources": 4, "passages": 7, "left_out": 0}}


def test_a_plan_without_tool_calls_is_answered_with_the_start_of_research(repo: Path) -> None:
    gateway = ScriptedGateway(text(PLAN), search(), *good_leg()[1:])
    research(repo, STEM, gateway)
    assert gateway.sent[1].last == {"role": "user", "content": contract.START_RESEARCH}
    assert status(repo)["status"] == "ok"


def test_the_gap_check_sends_the_model_back_once_for_what_only_snippets_answer(repo: Path) -> None:
    """The model points at S3 for item 2 — only ever seen as a search snippet — (and at S9, which it was
    never shown: ignored), and at nothing for item 3: code says which are gaps, and the model gets one turn
    of tool calls for them; its reading runs, and the report is written (no second gap check)."""
    gateway = ScriptedGateway(
        calls(tool("web_search", {"query": "DiLoCo"}), content=PLAN + "\n3. Who maintains it"), extract(*URLS[:3]),
        text(DONE), text("1: S1, S2\n2: S3, S9\n3: none"), extract(URLS[3], query="INTELLECT-2 production scale"),
        text(report(2200)))
    research(repo, STEM, gateway)
    sent_back = gateway.sent[4].last["content"]
    assert sent_back == contract.GAPS.format(gaps=(
        "2. Which systems ran it at production scale — https://www.primeintellect.ai/blog/intellect-2 — only "
        "search snippets of S3: read them in full\n3. Who maintains it — no source yet"), turns=1)
    assert gateway.sent[4].tools and gateway.sent[4].tool_choice == "auto"
    assert writing_call(gateway) is gateway.sent[5] and gateway.left() == 0
    assert front_matter(repo)["research"]["gaps_researched"] == 2


def test_an_answer_that_calls_tools_is_not_run_and_the_report_is_written(repo: Path) -> None:
    """A provider that ignores `tool_choice: "none"` at the gap check: its tool calls are not run (and the
    writing call offers no tools at all, so it cannot spend the writing steps on them)."""
    scripted = ScriptedSearch()
    gateway = ScriptedGateway(planned_search(), extract(*URLS[:3]), text(DONE),
                              calls(tool("web_search", {"query": "one more"})), text(report(2200)))
    research(repo, STEM, gateway, scripted)
    assert len(scripted.searches) == 1 and status(repo)["status"] == "ok"
    write = writing_call(gateway)
    assert write.tools is None and write.tool_choice is None


def test_a_report_that_rests_on_snippets_only_says_so(repo: Path) -> None:
    """No page read: the report is never silently `ok`."""
    gateway = ScriptedGateway(planned_search(), text(DONE), text("1: S1, S2\n2: S3"),
                              search("DiLoCo again"), text(report(2200)))
    research(repo, STEM, gateway)
    done = status(repo)
    assert done["status"] == "degraded"
    assert "the report rests on search snippets only: none of its 3 cited source(s) was read in full" in \
           done["reasons"]


# -- the stall rule ------------------------------------------------------------------------------------
def test_searching_stalls_after_searches_that_find_nothing_new(repo: Path) -> None:
    """The first search shows every page; the next ones find only sources already shown. After
    `STALL_SEARCHES` of those, the loop says so (in the gap check) instead of letting the model spin."""
    spinning = [search(f"DiLoCo {n}") for n in range(STALL_SEARCHES)]
    gateway = ScriptedGateway(planned_search(), extract(*URLS[:3]), *spinning, text(COVERED), text(report(2200)))
    research(repo, STEM, gateway)
    check = gateway.sent[2 + STALL_SEARCHES].last["content"]
    assert check.startswith(contract.GAP_CHECK_PREFIX)
    assert contract.STALLED.format(count=STALL_SEARCHES) in check
    assert front_matter(repo)["research"]["stalled"] is True and gateway.left() == 0


def test_the_gap_turn_is_one_turn_and_then_the_report_is_written(repo: Path) -> None:
    """Sent back for gaps, the model gets one turn (its calls run at once); then the writing call, whatever
    it would have done next."""
    gateway = ScriptedGateway(planned_search(), extract(*URLS[:3]), text(DONE), text("1: S1\n2: none"),
                              calls(*(tool("web_search", {"query": f"q{n}"}) for n in range(3))),
                              text(report(2200)))
    research(repo, STEM, gateway)
    assert gateway.left() == 0 and writing_call(gateway) is gateway.sent[-1]


# -- the write from the dossier --------------------------------------------------------------------------
READ_FIRST_THREE = "1: S1, S2\n2: S3"
"""The gap check's answer of a leg whose brief names no URL: the three pages read are S1–S3."""


def _spec(budget: Budget | None = None) -> LegSpec:
    return LegSpec(topic_id="diloco-family", title="DiLoCo family", scope="DiLoCo and its descendants.",
                   model="deepseek/deepseek-v4-pro", provider=None, session_id="c:s",
                   words=WordBand(min=2000, max=2500), budget=budget or Budget(), today="2026-12-04")


def test_the_report_is_written_from_every_passage_shown_even_after_compaction() -> None:
    """The research history is compacted to stubs (a tiny context budget), yet the writing call carries
    every passage the model was shown of every source — and no tools."""
    tools = SearchTools(providers=[ScriptedSearch()], settings=SearchSettings())
    gateway = ScriptedGateway(planned_search(), extract(*URLS[:2]), extract(*URLS[2:]), text(DONE),
                              text("1: S1, S2\n2: S3, S4"), text(report(2200)))
    outcome = Researcher(gateway, tools, _spec(), context_budget_chars=500).run()
    assert outcome.compactions > 0 and outcome.draft == report(2200)
    write = writing_call(gateway)
    assert write.tools is None and write.tool_choice is None
    assert [m["role"] for m in write.messages] == ["system", "user"]
    shown = [p.text for s in tools.registry.all() for p in s.shown_passages]
    assert shown and all(passage in write.messages[1]["content"] for passage in shown)
    compacted = gateway.sent[3].tool_results()[0]
    assert compacted.count("[compacted:") == 1  # the research history kept its stubs


def test_the_dossier_is_cut_to_fit_the_context_window_and_says_so() -> None:
    tools = SearchTools(providers=[ScriptedSearch()], settings=SearchSettings())
    gateway = ScriptedGateway(planned_search(), extract(*URLS[:3]), text(DONE), text(READ_FIRST_THREE),
                              text(report(2200)), context_tokens=9_800)
    outcome = Researcher(gateway, tools, _spec()).run()
    assert outcome.dossier is not None and outcome.dossier.left_out > 0
    assert outcome.dossier.sources == 4  # every source is still listed, with some of its passages
    assert "passage(s) left out to fit this call" in writing_call(gateway).messages[1]["content"]


# -- the tools: concurrent, deterministic, primary sources reachable --------------------------------------
@dataclass
class SlowFirst(ScriptedSearch):
    """Every search blocks until all `expected` searches have started (so they must run at once), and the
    first one answers last; each query returns its own page."""

    expected: int = 3
    started: threading.Barrier = field(default_factory=lambda: threading.Barrier(3, timeout=10))

    def search(self, request: SearchQuery, *, bounds: CallBounds, timeout_s: float) -> list[Hit]:
        self.searches.append(request)
        self.started.wait()
        if request.query.endswith("0"):
            time.sleep(0.05)
        page = PAGES[int(request.query[-1])]
        return [Hit(page.url, page.title, page.snippet)]


def test_a_turns_tool_calls_run_at_once_and_keep_the_ids_of_call_order(tmp_path: Path) -> None:
    tools = SearchTools(providers=[SlowFirst()], settings=SearchSettings())
    gateway = ScriptedGateway(calls(*(tool("web_search", {"query": f"q{n}"}) for n in (2, 0, 1)), content=PLAN),
                              text(DONE), text(READ_FIRST_THREE), text(DONE), text(report(2200)))
    Researcher(gateway, tools, _spec()).run()
    assert [(s.id, s.url) for s in tools.registry.all()] == [(1, URLS[2]), (2, URLS[0]), (3, URLS[1])]
    results = gateway.sent[1].tool_results()
    assert ['<source id="S1"' in results[0], '<source id="S2"' in results[1], '<source id="S3"' in results[2]] == \
           [True] * 3


def test_the_briefs_urls_are_sources_from_the_start_and_readable_at_once(repo: Path) -> None:
    scripted = ScriptedSearch()
    brief_url = "https://www.primeintellect.ai/blog/intellect-2"
    gateway = ScriptedGateway(calls(tool("web_extract", {"urls": [brief_url], "query": "scale"}), content=PLAN),
                              search(), extract(*URLS[:3]), text(DONE), text("1: S1, S2\n2: S3"), text(report(2200)))
    research(repo, STEM, gateway, scripted)
    first = gateway.sent[0].user_messages()[0]
    assert ("Named in the brief and readable now with web_extract: S1 https://arxiv.org/abs/2311.08105, "
            f"S2 https://arxiv.org/abs/2501.18512, S3 {brief_url}.") in first
    assert scripted.extracts[0] == [brief_url]  # read at step 1, before any search returned it
    assert '<source id="S3"' in gateway.sent[1].tool_results()[0]
    assert status(repo)["status"] == "ok"


def test_an_internal_url_of_the_brief_is_never_sent_to_the_web_search_services() -> None:
    """A brief naming a page on an internal host (`allow_hosts` lets it through for the leg's MCP servers): it
    is not offered as readable with web_extract, and a web_extract of it is answered without calling the
    search service — which reads from its own network, so could not reach it, and would be told an internal
    address for nothing. The brief's public URL stays readable at once."""
    internal, public = "http://127.0.0.1:8765/notes/diloco", "https://www.primeintellect.ai/blog/intellect-2"
    scripted = ScriptedSearch()
    tools = SearchTools(providers=[scripted], settings=SearchSettings(),
                        destinations=DestinationPolicy.allowing(["127.0.0.1:8765"]))
    spec = _spec()
    spec.scope = f"DiLoCo and its descendants; the team's notes at {internal} and {public}."
    gateway = ScriptedGateway(calls(tool("web_extract", {"urls": [internal]}),
                                    tool("web_extract", {"urls": [internal, public]}), content=PLAN),
                              text(DONE), text("1: S1\n2: S1"), text(report(2200)))
    Researcher(gateway, tools, spec).run()
    first = gateway.sent[0].user_messages()[0]
    assert f"{contract.READABLE_LABEL} S1 {public}." in first and internal not in first.split(contract.DATE_LABEL)[1]
    assert scripted.extracts == [[public]]  # the internal page never reached the service
    alone, mixed = gateway.sent[1].tool_results()
    assert 'status="error"' in alone and "not sent to the web search services" in alone
    assert '<source id="S1"' in mixed and f"Not read: {internal}: not sent to the web search services" in mixed


@dataclass
class OnlyFirstFound(ScriptedSearch):
    def search(self, request: SearchQuery, *, bounds: CallBounds, timeout_s: float) -> list[Hit]:
        return super().search(request, bounds=bounds, timeout_s=timeout_s)[:1]


def _page_with_link(link: str) -> Page:
    return Page("https://arxiv.org/abs/2311.08105", "DiLoCo",
                f"DiLoCo trains on islands of devices. See [the follow-up]({link}) for the streaming variant.")


def test_a_link_in_a_passage_shown_is_readable_and_becomes_a_source() -> None:
    follow_up = "https://example.org/streaming-diloco"
    pages = (_page_with_link(follow_up), Page(follow_up, "Streaming DiLoCo", "Streaming DiLoCo overlaps "
                                                                            "communication with computation."))
    scripted = OnlyFirstFound(pages=pages)  # extract knows both pages; search finds only the first
    tools = SearchTools(providers=[scripted], settings=SearchSettings())
    tools.call("web_search", json.dumps({"query": "DiLoCo"}))
    before = tools.call("web_extract", json.dumps({"urls": [follow_up]}))
    assert before.is_error and "not a URL of this research" in before.content
    tools.call("web_extract", json.dumps({"urls": [pages[0].url]}))
    after = tools.call("web_extract", json.dumps({"urls": [follow_up], "query": "streaming"}))
    assert not after.is_error and '<source id="S2" url="https://example.org/streaming-diloco"' in after.content
    refused = SearchTools(providers=[ScriptedSearch(pages=(_page_with_link("http://169.254.169.254/x"),))],
                          settings=SearchSettings())
    refused.call("web_search", json.dumps({"query": "DiLoCo"}))
    refused.call("web_extract", json.dumps({"urls": [pages[0].url]}))
    assert refused.call("web_extract", json.dumps({"urls": ["http://169.254.169.254/x"]})).is_error


def test_an_arxiv_abs_and_its_pdf_are_one_source_and_two_readings() -> None:
    abs_url, pdf_url = "https://arxiv.org/abs/2311.08105", "https://arxiv.org/pdf/2311.08105"

    @dataclass
    class Arxiv(ScriptedSearch):
        def extract(self, urls: list[str], *, bounds: CallBounds, timeout_s: float) -> Any:
            from research_dispatch.tools.providers import Pages
            self.extracts.append(list(urls))
            return Pages(texts={u: ("The abstract of DiLoCo." if "/abs/" in u else
                                    "DiLoCo section 3: the outer optimizer is Nesterov momentum.") for u in urls})

    scripted = Arxiv()
    tools = SearchTools(providers=[scripted], settings=SearchSettings())
    tools.call("web_search", json.dumps({"query": "DiLoCo"}))
    first = tools.call("web_extract", json.dumps({"urls": [abs_url]}))
    second = tools.call("web_extract", json.dumps({"urls": [pdf_url]}))
    assert scripted.extracts == [[abs_url], [pdf_url]]  # each reading fetched as asked
    assert "The abstract of DiLoCo." in first.content and "Nesterov momentum" in second.content
    assert '<source id="S1"' in second.content and len(tools.registry) == len(PAGES)  # one source for both


def test_a_reading_is_chosen_by_the_models_question_alone() -> None:
    page = Page("https://arxiv.org/abs/2311.08105", "DiLoCo", "\n\n".join(
        [f"DiLoCo background paragraph {n} on distributed low-communication training of language models." * 6
         for n in range(6)] + ["The outer optimizer is Nesterov momentum, applied to the pseudo-gradient."]))
    tools = SearchTools(providers=[ScriptedSearch(pages=(page,))], settings=SearchSettings(),
                        topic_hint="DiLoCo distributed low-communication training language models background",
                        page_budget_chars=700, extract_budget_chars=700)
    tools.call("web_search", json.dumps({"query": "DiLoCo"}))
    read = tools.call("web_extract", json.dumps({"urls": [page.url], "query": "outer optimizer Nesterov"}))
    assert "Nesterov momentum" in read.content  # the brief's words do not pull the selection away


def test_the_reading_tool_says_a_second_reading_returns_further_passages() -> None:
    extract_ = next(t for t in SearchTools(providers=[ScriptedSearch()], settings=SearchSettings()).schemas
                    if t["function"]["name"] == "web_extract")
    assert "reading a page again returns further passages" in extract_["function"]["description"]
    assert "linked from a passage already shown" in extract_["function"]["description"]


# -- search spend -----------------------------------------------------------------------------------------
def test_search_credits_are_priced_and_counted_in_the_legs_dollars(repo: Path) -> None:
    """Tavily's documented list prices: an advanced search 2 credits, every five pages read 1 credit, at
    $0.008 a credit; the leg's dollars (its status) and its front matter count them."""
    gateway = ScriptedGateway(*good_leg())  # no model prices: every dollar here is search spend
    research(repo, STEM, gateway)
    spent = 2 * 0.008 + 3 / 5 * 1 * 0.008  # one advanced search; three pages read
    assert front_matter(repo)["search"]["cost_usd"] == round(spent, 6)
    assert status(repo)["cost_usd"] == round(spent, 6)
    meta = load_report(repo / "research" / f"{STEM}.md", repo=repo).meta
    assert meta.cost_usd == round(spent, 6)  # what the refresh summary and the PR count for the report


def test_a_stop_that_carries_its_coverage_is_the_gap_check(repo: Path) -> None:
    """The researcher's prompt asks the reply that ends research to say which sources answer each
    sub-question: when it does, no follow-up is spent asking again; code decides the gaps from it."""
    gateway = ScriptedGateway(planned_search(), extract(*URLS[:3]), text("Done.\n" + COVERED), text(report(2200)))
    research(repo, STEM, gateway)
    assert gateway.left() == 0 and writing_call(gateway) is gateway.sent[3]
    assert front_matter(repo)["research"]["gap_check"] == "answered"
    assert not any(m.startswith(contract.GAP_CHECK_PREFIX) for s in gateway.sent for m in s.user_messages())
