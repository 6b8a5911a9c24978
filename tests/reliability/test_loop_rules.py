"""The research loop's rules at the model seam: caps, finish reasons and model mistakes.

Each case runs the leg's own code (`run_leg`: the research loop, the toolset, citations, the judgement of
the outcome, the all-or-nothing write) over a scripted in-process model and scripted search
(`tests/seam.py`), then asserts the outcome on disk exactly as the wire cases do: the status file, the
front matter, the call log, the trace, and that a previous good report was left intact. No HTTP: these
rules are about what the loop does with a reply, not about how the reply travelled. What is about the
wire (status codes, HTTP-200 errors, retries, timeouts, the other leg untouched by a shared server's
faults) is in test_gateway_faults.py, against the HTTP fakes.

Time runs on an injected clock, so nothing here depends on the speed of the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from research_dispatch.gateway.endpoints import Pricing
from research_dispatch.leg import contract
from tests.reliability.conftest import TARGET, TickClock, assert_clean, configure, set_topic_budget, view
from tests.seam import (
    Reply,
    ScriptedGateway,
    ScriptedSearch,
    Sent,
    calls,
    good_leg,
    report,
    research,
    research_turns,
    search,
    split,
    text,
    tool,
)

reliability = pytest.mark.reliability
PRICES = Pricing(prompt=100e-6, completion=100e-6)  # $100 per million tokens either way: money runs out fast
SNIPPETS_ONLY = "the report rests on search snippets only: none of its 3 cited source(s) was read in full"
"""What a report says when its legs only searched (the evidence gate): never silently `ok`."""


def seeded(repo: Path) -> str:
    """A previous good report of the target leg."""
    configure(repo)
    research(repo, TARGET.stem, ScriptedGateway(*good_leg()))
    text_ = (repo / "research" / f"{TARGET.stem}.md").read_text(encoding="utf-8")
    assert "status: ok" in text_
    return text_


def failed_cleanly(repo: Path, previous: str | None, error: str) -> None:
    """The target failed with exactly this message and wrote no report over the previous one."""
    target = view(repo, TARGET)
    assert target.status["status"] == "failed", target.status
    assert target.status["error"] == error, target.status["error"]
    assert target.status["exit_code"] == 1
    assert target.text == previous


def forced_to_write(sent: Sent) -> None:
    """The call is the writing call: a fresh conversation (brief, plan, dossier) with no tools at all."""
    assert sent.purpose == "write" and sent.tools is None and sent.tool_choice is None
    assert [m["role"] for m in sent.messages] == ["system", "user"]
    assert contract.DOSSIER_LABEL in sent.messages[1]["content"]


def follows_tool_choice(sent: Sent) -> Reply:
    """A model that researches while it may and writes when it is asked for the report."""
    if sent.tools is None:
        return text(report(2200))
    return search(f"DiLoCo question {len(sent.tool_results()) + 1}")


# -- budgets --------------------------------------------------------------------------------------
@reliability(area="budget", case="step budget nearly spent",
             expect="research ends, the report is written from the dossier (no gap check: no budget to act on "
                    "it): exactly max_steps=2 calls; degraded with 'step budget (budget.max_steps) reached while "
                    "researching' in the front matter")
def test_step_budget_forces_the_report(repo: Path) -> None:
    configure(repo)
    set_topic_budget(repo, TARGET, "{max_steps: 2}")
    gateway = ScriptedGateway(search(), text(report(2200)))
    research(repo, TARGET.stem, gateway)
    assert len(gateway.sent) == 2 and gateway.sent[0].tool_choice == "auto"
    forced_to_write(gateway.sent[1])
    target = view(repo, TARGET)
    assert target.meta is not None and target.meta["status"] == "degraded" and target.meta["calls"] == 2
    assert target.meta["status_reasons"] == ["step budget (budget.max_steps) reached while researching; "
                                             "report written from the evidence gathered so far", SNIPPETS_ONLY]


@reliability(area="budget", case="step cap with a runaway tool loop",
             expect="a model that keeps calling tools even when asked for the report (no tools offered) runs "
                    "none: 4 searches, then 2 writing calls answered with tool calls; failed: 'the model "
                    "answered the writing call with tool calls (no tools were offered), not a report'")
def test_runaway_loop_stops_at_the_step_cap(repo: Path) -> None:
    previous = seeded(repo)
    set_topic_budget(repo, TARGET, "{max_steps: 6}")
    gateway = ScriptedGateway(*[search(f"query {n}") for n in range(1, 9)])  # it never stops calling tools
    scripted_search = ScriptedSearch()
    research(repo, TARGET.stem, gateway, scripted_search)
    assert len(gateway.sent) == 6
    assert len(scripted_search.searches) == 4  # the calls of the writing conversation never reached search
    assert [s.tools is None for s in gateway.sent] == [False] * 4 + [True] * 2
    assert gateway.sent[-1].last == {"role": "user", "content": contract.EMPTY_REPLY}
    target = view(repo, TARGET)
    assert target.status["calls"] == 6
    failed_cleanly(repo, previous, "the model answered the writing call with tool calls (no tools were offered), "
                                   "not a report")


@reliability(area="budget", case="time budget nearly spent (injected clock)",
             expect="at 80% of timeout_minutes research ends and the report is written from the dossier; degraded "
                    "with 'time budget reached while researching' in the front matter")
def test_time_budget_forces_the_report(repo: Path) -> None:
    configure(repo)
    gateway = ScriptedGateway(*[follows_tool_choice] * 5)
    research(repo, TARGET.stem, gateway, clock=TickClock(200.0))  # 200 s per loop turn; the cap is 12 min
    assert [s.tool_choice for s in gateway.sent] == ["auto", "auto", None]
    forced_to_write(gateway.sent[-1])
    meta = view(repo, TARGET).meta
    assert meta is not None and meta["status"] == "degraded"
    assert meta["status_reasons"] == ["time budget (budget.timeout_minutes) reached while researching; "
                                      "report written from the evidence gathered so far", SNIPPETS_ONLY]


@reliability(area="budget", case="time cap reached (injected clock)",
             expect="no call starts after timeout_minutes: 1 call, then failed 'no report was produced: time cap "
                    "reached (12 min)'; previous report intact")
def test_time_cap_stops_the_leg(repo: Path) -> None:
    previous = seeded(repo)
    gateway = ScriptedGateway(*[follows_tool_choice] * 5)
    research(repo, TARGET.stem, gateway, clock=TickClock(400.0))
    assert len(gateway.sent) == 1
    failed_cleanly(repo, previous, "no report was produced: time cap reached (budget.timeout_minutes: 12 min)")


@reliability(area="budget", case="dollar budget nearly spent",
             expect="when writing the report now would no longer fit in max_cost_usd (gateway prices × prompt and a "
                    "band-maximum report from the dossier) and the search services' prices, research ends and "
                    "the report is written; the leg never spends past the cap; degraded with 'dollar budget "
                    "(budget.max_cost_usd) reached while researching'")
def test_dollar_budget_forces_the_report(repo: Path) -> None:
    configure(repo)
    set_topic_budget(repo, TARGET, "{max_cost_usd: 1.0}")
    gateway = ScriptedGateway(*[follows_tool_choice] * 8, prices=PRICES)
    research(repo, TARGET.stem, gateway)
    assert gateway.sent[0].tool_choice == "auto" and len(gateway.sent) >= 2
    forced_to_write(gateway.sent[-1])
    target = view(repo, TARGET)
    assert target.status["cost_usd"] <= 1.0  # a hard cap on model calls and search credits: never crossed
    assert target.meta is not None and target.meta["search"]["cost_usd"] > 0
    assert target.meta is not None, target.status
    assert target.meta["status"] == "degraded"
    assert target.meta["status_reasons"] == ["dollar budget (budget.max_cost_usd) reached while researching; "
                                             "report written from the evidence gathered so far", SNIPPETS_ONLY]


@reliability(area="budget", case="dollar cap reached",
             expect="no call starts that the remaining budget cannot pay for (prompt at list price plus a minimal "
                    "output): 0 calls, then failed 'no report was produced: dollar cap reached "
                    "(budget.max_cost_usd: $0.0000 spent of $0.05; the next call could not be paid for)'; "
                    "previous report intact")
def test_dollar_cap_stops_the_leg(repo: Path) -> None:
    previous = seeded(repo)
    set_topic_budget(repo, TARGET, "{max_cost_usd: 0.05}")
    gateway = ScriptedGateway(prices=PRICES)
    research(repo, TARGET.stem, gateway)
    assert gateway.sent == []
    failed_cleanly(repo, previous, "no report was produced: dollar cap reached (budget.max_cost_usd: $0.0000 "
                                   "spent of $0.05; the next call could not be paid for)")


# -- finish reasons -------------------------------------------------------------------------------
@reliability(area="gateway", case="finish_reason: length once",
             expect="continued ('Continue exactly where you stopped'); leg ok")
def test_length_once_is_continued(repo: Path) -> None:
    configure(repo)
    first, rest = split(report(2200), 0.6)
    gateway = ScriptedGateway(*research_turns(), text(first, finish_reason="length"), text(rest))
    research(repo, TARGET.stem, gateway)
    assert gateway.sent[5].last == {"role": "user", "content": contract.CONTINUE}
    assert gateway.sent[5].messages[-2] == {"role": "assistant", "content": first}
    target = assert_clean(repo, TARGET)
    assert target.meta is not None and target.meta["words"] == 2200  # the cut and its continuation, spliced


@reliability(area="gateway", case="finish_reason: length on every writing call",
             expect="two continuations, then degraded with 'report truncated … (finish_reason=length)' in the "
                    "front matter")
def test_length_persistent_is_degraded(repo: Path) -> None:
    configure(repo)
    parts = split(report(2200), 0.4, 0.7)
    gateway = ScriptedGateway(*research_turns(), *[text(p, finish_reason="length") for p in parts])
    research(repo, TARGET.stem, gateway)
    assert len(gateway.sent) == 7 and gateway.left() == 0
    assert [s.last["content"] for s in gateway.sent[5:]] == [contract.CONTINUE, contract.CONTINUE]
    target = view(repo, TARGET)
    truncated = "report truncated: the model hit its output limit (finish_reason=length)"
    assert target.status["status"] == "degraded" and truncated in target.reasons
    assert target.meta is not None
    assert target.meta["status"] == "degraded" and truncated in target.meta["status_reasons"]


@reliability(area="gateway", case="finish_reason: content_filter with no draft",
             expect="failed: 'the provider's content filter returned no report'; previous report intact")
def test_content_filter_without_draft_fails(repo: Path) -> None:
    previous = seeded(repo)
    gateway = ScriptedGateway(*research_turns(), Reply(finish_reason="content_filter"))
    research(repo, TARGET.stem, gateway)
    failed_cleanly(repo, previous, "the provider's content filter returned no report")
    assert "the provider's content filter stopped the output" in view(repo, TARGET).reasons


@reliability(area="gateway", case="finish_reason: content_filter on a revision",
             expect="the previous full draft is kept; degraded with the filter and the word band in the front "
                    "matter")
def test_content_filter_after_a_draft_is_degraded(repo: Path) -> None:
    configure(repo)
    short = report(800)
    gateway = ScriptedGateway(*research_turns(), text(short), Reply(finish_reason="content_filter"))
    research(repo, TARGET.stem, gateway)
    assert gateway.sent[5].last["content"].startswith(contract.REVISE_PREFIX)
    target = view(repo, TARGET)
    assert target.meta is not None and target.meta["status"] == "degraded" and target.meta["words"] == 800
    assert "the provider's content filter stopped the output" in target.meta["status_reasons"]
    assert any("outside the 2000–2500 band" in r for r in target.meta["status_reasons"])


# -- model mistakes -------------------------------------------------------------------------------
@reliability(area="gateway", case="malformed tool arguments",
             expect="answered with a tool error ('arguments were not valid JSON'); the model recovers; leg ok")
def test_malformed_tool_arguments(repo: Path) -> None:
    configure(repo)
    gateway = ScriptedGateway(calls(tool("web_search", '{"query": "DiLoCo low-comm')), *good_leg())
    research(repo, TARGET.stem, gateway)
    target = assert_clean(repo, TARGET)
    assert target.tool_errors() == ["malformed_arguments"]
    assert any("arguments were not valid JSON" in m for m in gateway.sent[1].tool_results())


@reliability(area="gateway", case="missing tool arguments",
             expect="answered with a tool error ('invalid arguments: query: Field required'); leg ok")
def test_missing_tool_arguments(repo: Path) -> None:
    configure(repo)
    gateway = ScriptedGateway(calls(tool("web_search", {})), *good_leg())
    research(repo, TARGET.stem, gateway)
    target = assert_clean(repo, TARGET)
    assert target.tool_errors() == ["invalid_arguments"]
    assert any("invalid arguments: query: Field required" in m for m in gateway.sent[1].tool_results())


@reliability(area="gateway", case="tool call to an unknown tool",
             expect="refused with a tool error naming the two real tools; nothing executed; leg ok")
def test_unknown_tool(repo: Path) -> None:
    configure(repo)
    scripted_search = ScriptedSearch()
    gateway = ScriptedGateway(calls(tool("delete_repository", {"name": "review"})), *good_leg())
    research(repo, TARGET.stem, gateway, scripted_search)
    target = assert_clean(repo, TARGET)
    assert target.tool_errors() == ["unknown_tool"]
    assert any("unknown tool 'delete_repository'; available: web_search, web_extract" in m
               for m in gateway.sent[1].tool_results())
    assert len(scripted_search.searches) == 1 and len(scripted_search.extracts) == 1  # only the real calls ran


@reliability(area="gateway", case="empty completion once",
             expect="the model is told its reply was empty and continues; leg ok")
def test_empty_completion_once(repo: Path) -> None:
    configure(repo)
    search_, extract_, *rest = good_leg()
    gateway = ScriptedGateway(search_, extract_, Reply(), *rest)
    research(repo, TARGET.stem, gateway)
    assert_clean(repo, TARGET)
    assert gateway.sent[3].last == {"role": "user", "content": contract.EMPTY_REPLY}


@reliability(area="gateway", case="empty completions every time",
             expect="failed after 2 calls: 'the model returned empty completions'; previous report intact")
def test_empty_completions_fail(repo: Path) -> None:
    previous = seeded(repo)
    gateway = ScriptedGateway(Reply(), Reply(), Reply())
    research(repo, TARGET.stem, gateway)
    assert len(gateway.sent) == 2
    failed_cleanly(repo, previous, "the model returned empty completions")
