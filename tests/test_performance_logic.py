"""The token economy's logic (issue 7): result dedup, passage ranking and dedup, compaction (pure logic).

No timings here: performance is measured only by scripts/dev/bench.py. These tests pin the behaviour the
benchmark's figures rest on, with a scripted stand-in for the Tavily client (a third-party client, not
our code) and hand-built histories.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import Budget, SearchSettings, WordBand
from research_dispatch.gateway import client
from research_dispatch.leg.researcher import LegSpec, Researcher, compact_tool_result
from research_dispatch.tools.chunks import chunk_key, lead, link_share, select_chunks
from research_dispatch.tools.search import UNTRUSTED_NOTE, SearchTools
from tests.seam import ScriptedSearch

SOURCE = re.compile(r'<source id="(S\d+)"[^>]*>\n(.*?)\n</source>', re.DOTALL)


def page(topic: str, paragraphs: int = 30) -> str:
    return "\n\n".join(f"Paragraph {i} about {topic}: " + f"detail {i} of the {topic} method. " * 12
                       for i in range(paragraphs))


class ScriptedTavily:
    """Returns the given result lists in order; extracts return the pages it was built with."""

    def __init__(self, searches: list[list[str]], pages: dict[str, str] | None = None) -> None:
        self.searches = list(searches)
        self.pages = pages or {}

    def search(self, **kwargs: Any) -> dict[str, Any]:
        urls = self.searches.pop(0)
        return {"results": [{"url": u, "title": f"Title of {u}", "content": f"Snippet of {u}. " + "More words. " * 40}
                            for u in urls]}

    def extract(self, **kwargs: Any) -> dict[str, Any]:
        return {"results": [{"url": u, "raw_content": self.pages[u]} for u in kwargs["urls"] if u in self.pages],
                "failed_results": []}


def tools(client: ScriptedTavily, **kwargs: Any) -> SearchTools:
    return SearchTools(api_key="tvly-test-000000", base_url=None, settings=SearchSettings(), client=client,
                       **kwargs)


def search(t: SearchTools, query: str = "q") -> str:
    return t.call("web_search", json.dumps({"query": query})).content


def extract(t: SearchTools, urls: list[str], query: str = "q") -> str:
    return t.call("web_extract", json.dumps({"urls": urls, "query": query})).content


# ----------------------------------------------------------------------------------------------
# chunks


def test_lead_cuts_at_a_sentence_end_or_a_word_with_an_ellipsis() -> None:
    text = "DiLoCo is a method. It cuts communication by 500x across workers. More follows here."
    assert lead(text, 200) == text
    assert lead(text, 70) == "DiLoCo is a method. It cuts communication by 500x across workers."
    assert lead("one two three four five six", 12) == "one two…"
    assert len(lead("x" * 500, 100)) <= 100


def test_select_chunks_skips_passages_already_shown_then_runs_dry() -> None:
    text = page("DiLoCo")
    first = select_chunks(text, "DiLoCo detail", 2000)
    assert first.excerpt and first.kept < first.total and first.skipped == 0
    second = select_chunks(text, "DiLoCo detail", 2000, skip=first.keys)
    assert second.skipped == first.kept and not (second.keys & first.keys)
    shown = set(first.keys)
    while (step := select_chunks(text, "DiLoCo", 2000, skip=shown)).excerpt:
        shown |= step.keys
    assert step.kept == 0 and step.skipped == step.total == len(shown)


def test_a_page_that_fits_comes_back_whole_once() -> None:
    short = "A short page. It fits."
    whole = select_chunks(short, "page", 500)
    assert whole.excerpt == short and whole.keys == {chunk_key(short)}
    assert select_chunks(short, "page", 500, skip=whole.keys).excerpt == ""


def test_link_lists_rank_below_prose_with_the_same_terms() -> None:
    prose = "DiLoCo synchronises workers rarely, so DiLoCo training needs little bandwidth between sites. " * 6
    links = " ".join(f"[DiLoCo paper {i}](https://example.org/diloco/{i})" for i in range(12))
    assert link_share(links) > 0.8 > link_share(prose)
    text = "\n\n".join([links, prose, links])
    picked = select_chunks(text, "DiLoCo training bandwidth", len(prose) + 10)
    assert prose.strip() in picked.excerpt and "example.org" not in picked.excerpt


# ----------------------------------------------------------------------------------------------
# search tools


def test_a_source_already_shown_is_listed_by_id_not_sent_again() -> None:
    t = tools(ScriptedTavily([["https://a.org/1", "https://b.org/2"], ["https://b.org/2", "https://c.org/3"]]))
    first, second = search(t), search(t)
    assert [m[0] for m in SOURCE.findall(first)] == ["S1", "S2"] and UNTRUSTED_NOTE in first
    assert [m[0] for m in SOURCE.findall(second)] == ["S3"]
    assert "Also matched, shown earlier in this research: S2." in second
    assert all(len(text) <= 200 for _, text in SOURCE.findall(first))  # snippets are leads
    naive = tools(ScriptedTavily([["https://a.org/1"], ["https://a.org/1"]]), dedupe=False)
    search(naive)
    assert [m[0] for m in SOURCE.findall(search(naive))] == ["S1"]


def test_results_over_the_search_budget_are_not_registered() -> None:
    urls = [f"https://site{i}.org/page" for i in range(8)]
    t = tools(ScriptedTavily([urls]), search_budget_chars=700)
    shown = [m[0] for m in SOURCE.findall(search(t))]
    assert 1 <= len(shown) < 8 and len(t.registry) == len(shown)  # nothing citable that the model never saw


def test_the_query_is_echoed_only_when_it_was_changed() -> None:
    t = tools(ScriptedTavily([["https://a.org/1"], ["https://b.org/2"]]))
    assert "Search results.\n" in search(t, "plain query")
    assert 'Search results for "DiLoCo"' in search(t, "DiLoCo site:arxiv.org")


def test_reading_a_page_again_returns_other_passages() -> None:
    url = "https://a.org/1"
    t = tools(ScriptedTavily([[url]], {url: page("DiLoCo")}))
    search(t)
    first, second = extract(t, [url], "DiLoCo detail"), extract(t, [url], "DiLoCo detail")

    def passages(content: str) -> set[str]:
        return {p for p in SOURCE.findall(content)[0][1].split("\n\n") if not p.startswith("[")}

    assert passages(first) and passages(second) and not passages(first) & passages(second)
    assert "shown earlier in this research are not repeated" in second
    for _ in range(20):
        last = extract(t, [url], "DiLoCo")
    assert "passages of this page were shown earlier in this research" in last


# ----------------------------------------------------------------------------------------------
# compaction


def result(tool: str, blocks: list[tuple[str, str]], extra: str = "") -> str:
    body = "\n".join(f'<source id="{sid}" url="https://x.org/{sid}" title="T {sid}">\n{text}\n</source>'
                     for sid, text in blocks)
    return f'<tool_result tool="{tool}" status="ok">\nHeader.\n{UNTRUSTED_NOTE}\n{body}{extra}\n</tool_result>'


def test_compaction_keeps_every_id_citable() -> None:
    long = "First sentence of the passage. " + "Filler words here. " * 80
    content = result("web_extract", [("S1", long), ("S2", long)])
    compacted = compact_tool_result(content, defined={"S1"})
    assert UNTRUSTED_NOTE not in compacted and "[compacted: shown in full earlier" in compacted
    assert "passages of S1, introduced above]" in compacted  # S1 is introduced by an earlier result
    assert '<source id="S1"' not in compacted
    ((sid, text),) = SOURCE.findall(compacted)
    assert sid == "S2" and text.startswith("First sentence") and len(text) <= 200
    assert compacted.startswith('<tool_result tool="web_extract" status="ok">') and compacted.endswith("</tool_result>")
    assert compact_tool_result('<tool_result tool="web_search" status="error">ERROR: x</tool_result>') == \
        '<tool_result tool="web_search" status="error">ERROR: x</tool_result>'


class _NoGateway:
    """`_compact_history` never calls the gateway; this stands in for it."""


def researcher(budget: int, compact_to: float = 0.5) -> Researcher:
    spec = LegSpec(topic_id="t", title="T", scope="s", model="a/b", provider=None, session_id="c:t",
                   words=WordBand(min=2000, max=2500), budget=Budget())
    tools = SearchTools(providers=[ScriptedSearch()], settings=SearchSettings())
    return Researcher(_NoGateway(), tools, spec, context_budget_chars=budget,  # type: ignore[arg-type]
                      compact_to=compact_to)


def add_turn(r: Researcher, n: int, tool: str, text_chars: int) -> None:
    r.messages.append({"role": "assistant", "content": None,
                       "tool_calls": [{"id": f"c{n}", "type": "function",
                                       "function": {"name": tool, "arguments": "{}"}}]})
    text = "Lead sentence of the page. " + "w" * text_chars
    r.messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result(tool, [(f"S{n}", text)])})


def test_compaction_waits_for_the_budget_then_goes_well_below_it_and_spares_recent_turns() -> None:
    r = researcher(budget=10_000)
    for n in range(1, 4):
        add_turn(r, n, "web_extract", 2500)
    before = json.dumps(r._compact_history())
    assert "[compacted" not in before  # under budget: untouched
    add_turn(r, 4, "web_extract", 2500)
    add_turn(r, 5, "web_search", 2500)
    sent = r._compact_history()
    tools_chars = [len(m["content"]) for m in sent if m["role"] == "tool"]
    assert sum(tools_chars) <= 10_000
    compacted = [i for i, m in enumerate(sent) if m["role"] == "tool" and "[compacted" in m["content"]]
    assert compacted and all(i < len(sent) - 4 for i in compacted)  # the last two tool turns are spared
    count = len(sent)
    prefix = json.dumps(sent)
    add_turn(r, 6, "web_search", 100)  # a small result: still under budget, nothing rewritten
    assert json.dumps(r._compact_history()[:count]) == prefix


def test_search_results_are_compacted_before_extracted_passages() -> None:
    r = researcher(budget=8_000, compact_to=0.9)
    add_turn(r, 1, "web_extract", 2000)  # message 3
    add_turn(r, 2, "web_search", 3000)  # message 5
    add_turn(r, 3, "web_search", 100)
    add_turn(r, 4, "web_search", 2600)
    sent = r._compact_history()
    assert "[compacted" in sent[5]["content"] and "[compacted" not in sent[3]["content"]


def test_every_gateway_shares_one_tls_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first = client._shared_tls_context()
    assert client._shared_tls_context() is first
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # a later command in this process, another CA setting
    other = client._shared_tls_context()
    assert other is not first and client._shared_tls_context() is other
