"""The named steps of a leg that are pure logic: the resume key, the write reserve, the quality reasons.

The loop and the leg end to end run against the fakes elsewhere (test_researcher_loop.py,
test_research_leg.py, tests/reliability); these pin the rules themselves.
"""

from __future__ import annotations

import pytest

from research_dispatch.config.settings import Budget, McpServerSettings, SearchSettings, WordBand
from research_dispatch.leg.execute import MIN_CITED_SOURCES, input_hash, quality_reasons
from research_dispatch.leg.report import CitedSource, FinalBody
from research_dispatch.leg.researcher import (
    PROMPT_VERSION,
    RESEARCH_TIME_SHARE,
    WRITE_RESERVE_STEPS,
    ResearchOutcome,
    write_reserve,
)
from research_dispatch.tools.search import SearchStats
from research_dispatch.tools.sources import SourceRegistry

BAND = WordBand(min=100, max=200)


# ----------------------------------------------------------------------------------------------
# the resume key


def test_input_hash_is_byte_identical_to_what_existing_reports_carry() -> None:
    """Reports written before the hash moved to leg.py carry these values; a change would make every
    existing report of the cycle look stale and run its leg again."""
    assert PROMPT_VERSION == "researcher@2+ff215cd6"  # the research leg of issue 32: plan, gap check, dossier
    base = dict(topic_sha256="ab" * 32, model="deepseek/deepseek-v3.2", provider=None, words=WordBand(),
                budget=Budget(), search=SearchSettings())
    assert input_hash(**base) == "fa07c0e55134a8d6"  # type: ignore[arg-type]
    mcp = {"docs": McpServerSettings(url="https://mcp.example.org/mcp", tools=("read_docs",)).model_dump(
        mode="json", exclude={"egress_proxy"})}  # as `_leg_hash` dumps it: `egress_proxy` only when off
    toolset = {**base, "provider": "deepseek", "words": WordBand(min=600, max=800),
               "budget": Budget(max_steps=12, max_cost_usd=0.5, timeout_minutes=5),
               "search": SearchSettings(providers=("tavily", "exa")), "mcp": mcp}
    assert input_hash(**toolset) == "507585e8f6f1dbfa"  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# cap heuristics


@pytest.mark.parametrize(("max_steps", "reserve"), [(1, 1), (2, 1), (5, 1), (6, 2), (8, 2), (9, 3), (40, 3),
                                                    (400, 3)])
def test_the_write_reserve_is_three_steps_or_a_third_of_a_small_budget(max_steps: int, reserve: int) -> None:
    assert write_reserve(max_steps) == reserve
    assert 1 <= write_reserve(max_steps) <= WRITE_RESERVE_STEPS


def test_research_leaves_time_to_write() -> None:
    assert 0 < RESEARCH_TIME_SHARE < 1


# ----------------------------------------------------------------------------------------------
# quality reasons


def _registry(extracted: bool) -> SourceRegistry:
    registry = SourceRegistry()
    for n in range(1, 4):
        registry.add(f"https://example.org/{n}", f"Page {n}").extracted = extracted
    return registry


def _final(sources: int = 3, body_words: int = 150, dropped: int = 0, unlinked: int = 0) -> FinalBody:
    return FinalBody(body=" ".join(["word"] * body_words),
                     sources=[CitedSource(id=n, url=f"https://example.org/{n}", title=f"Page {n}")
                              for n in range(1, sources + 1)],
                     dropped_citations=dropped, unknown_ids=["S99"] * dropped, unlinked_urls=unlinked)


def test_a_clean_leg_has_no_reasons() -> None:
    stats = SearchStats(searches=2, extracts=1)
    outcome = ResearchOutcome(draft="x", records=[])
    assert quality_reasons(outcome, stats, _registry(extracted=True), BAND, _final()) == []


def test_reasons_come_in_a_fixed_order_loop_then_search_then_report() -> None:
    stats = SearchStats(searches=2, extracts=1, empty_searches=2)
    for kind in ("timeout", "mcp_timeout", "malformed_arguments"):  # the last is the model's: not a reason
        stats.count_error(kind)
    outcome = ResearchOutcome(draft="x", records=[], reasons=["step budget reached while researching"],
                              failure="the model returned empty completions")
    reasons = quality_reasons(outcome, stats, _registry(extracted=False), BAND,
                              _final(sources=1, body_words=50, dropped=2, unlinked=1))
    assert reasons == [
        "step budget reached while researching",
        "search service errors reached the researcher (timeout×1)",
        "MCP tool errors reached the researcher (mcp_timeout×1)",
        "all 2 search(es) returned no results",
        "no page could be read in full (every extraction failed); the report rests on search snippets",
        "stopped early: the model returned empty completions",
        "dropped 2 citation(s) to sources never retrieved (S99, S99)",
        "removed 1 link(s) to pages never retrieved",
        f"cites 1 retrieved source(s); at least {MIN_CITED_SOURCES} expected",
        "50 words, outside the 100–200 band",
    ]


def test_without_a_report_only_the_loop_and_search_reasons_count() -> None:
    stats = SearchStats(searches=1, empty_searches=1)
    outcome = ResearchOutcome(draft=None, records=[], reasons=["step cap reached (2 calls)"], failure="boom")
    assert quality_reasons(outcome, stats, SourceRegistry(), BAND) == [
        "step cap reached (2 calls)", "all 1 search(es) returned no results"]


def test_the_band_is_said_once() -> None:
    outcome = ResearchOutcome(draft="x", records=[], reasons=["250 words, outside the 100–200 band"])
    reasons = quality_reasons(outcome, SearchStats(), SourceRegistry(), BAND, _final(body_words=250))
    assert reasons == ["250 words, outside the 100–200 band"]
