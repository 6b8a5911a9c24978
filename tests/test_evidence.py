"""A leg's evidence (leg/evidence.py, tools/search.py `Source.show`): the rules, as pure logic.

What the researcher was shown is recorded where a tool result is built, and only that: these tests
drive the real `SearchTools` with a scripted stand-in for the Tavily client (a third-party client, not
ours; the same one the token-economy tests use) and compare the recorded passages with the tool
results the model received. The file's rules — FIXED line shape, sorted, deterministic, capped by
whole lines round-robin over the cited sources, bound to its report by `evidence_sha256` — are
checked on `gather`, `report_with_evidence` and `check`, with `hypothesis` for the properties.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.core.redact import register_secrets
from research_dispatch.leg.evidence import (
    MAX_EVIDENCE_BYTES,
    EvidenceLine,
    check,
    gather,
    parse_evidence,
    parse_line,
    report_with_evidence,
    sha256_text,
)
from research_dispatch.leg.report import CitedSource, FinalBody, Report, ReportMeta, Usage, parse_report_text
from research_dispatch.tools.search import SearchTools
from research_dispatch.tools.sources import WEB_EXTRACT, WEB_SEARCH, SourceRegistry
from tests.profiles import examples
from tests.test_performance_logic import ScriptedTavily, extract, page, search, tools

URLS = [f"https://example.org/paper-{i}" for i in range(4)]


def _shown_by_id(contents: list[str]) -> dict[str, str]:
    """Every text shown inside `<source id=..>` elements, per source id (whitespace-normalised)."""
    shown: dict[str, str] = {}
    for content in contents:
        for sid, body in re.findall(r'<source id="(S\d+)"[^>]*>\n(.*?)\n</source>', content, re.DOTALL):
            shown[sid] = shown.get(sid, "") + " " + " ".join(body.split())
    return shown


def _researched() -> tuple[SearchTools, list[str]]:
    pages = {u: page(f"topic {i}", paragraphs=30) for i, u in enumerate(URLS)}
    t = tools(ScriptedTavily([URLS[:3], URLS], pages))
    contents = [search(t), extract(t, URLS[:2], "topic 0 method"), extract(t, URLS[:1], "detail 7"),
                search(t)]
    return t, contents


def test_only_what_a_tool_result_showed_is_recorded_under_the_tool_that_showed_it() -> None:
    t, contents = _researched()
    shown = _shown_by_id(contents)
    for source in t.registry.all():
        assert source.shown_passages, source.label  # every registered source was shown something
        for passage in source.shown_passages:
            assert " ".join(passage.text.split()) in shown[source.label], (source.label, passage.text[:80])
    first, second, third = (t.registry.get(i) for i in (1, 2, 3))
    assert first is not None and second is not None and third is not None
    assert {p.tool for p in first.shown_passages} == {WEB_SEARCH, WEB_EXTRACT}
    assert {p.tool for p in third.shown_passages} == {WEB_SEARCH}  # never read: its snippet only
    # a page is kept as the passages the model saw, not whole; a re-read adds its next passages
    read = [p for p in first.shown_passages if p.tool == WEB_EXTRACT]
    assert sum(len(p.text) for p in read) < len(page("topic 0", paragraphs=30)) // 2
    assert len(read) == len({p.text for p in read}) > 3


def test_a_search_result_over_the_budget_is_neither_registered_nor_evidence() -> None:
    t = tools(ScriptedTavily([URLS]), search_budget_chars=500)
    search(t)
    assert 0 < len(t.registry) < len(URLS)
    assert all(s.shown_passages for s in t.registry.all())


def test_the_file_covers_the_cited_sources_only_sorted_with_the_fixed_line_shape() -> None:
    t, _ = _researched()
    second, first = t.registry.get(2), t.registry.get(1)
    assert first is not None and second is not None
    cited = [CitedSource(1, second.url, second.title), CitedSource(2, first.url, first.title)]
    evidence = gather(cited, t.registry)
    rows = [json.loads(line) for line in evidence.text.splitlines()]
    assert {r["url"] for r in rows} == {first.url, second.url}  # S3 and S4 were shown but are not cited
    assert [(r["url"], r["sha256"]) for r in rows] == sorted((r["url"], r["sha256"]) for r in rows)
    for raw, row in zip(evidence.text.splitlines(), rows, strict=True):
        assert list(json.loads(raw)) == ["sha256", "text", "title", "tool", "url"]  # keys sorted
        assert row["sha256"] == sha256_text(row["text"]) and raw.isascii()
    assert len(rows) == sum(len(s.shown_passages) for s in (first, second))
    assert evidence.text == gather(cited, t.registry).text  # deterministic bytes
    assert evidence.dropped == 0 and evidence.cut_reason is None


def test_the_cap_drops_whole_lines_round_robin_so_every_cited_source_keeps_its_first_passage() -> None:
    t, _ = _researched()
    cited = [CitedSource(i, s.url, s.title) for i, s in enumerate(t.registry.all(), start=1)]
    full = gather(cited, t.registry)
    limit = len(full.text) // 3
    cut = gather(cited, t.registry, limit=limit)
    assert len(cut.text.encode()) <= limit and cut.dropped == len(full.lines) - len(cut.lines) > 0
    assert {line.url for line in cut.lines} == {s.url for s in cited}
    assert set(cut.lines) <= set(full.lines)
    for source in t.registry.all():
        first_shown = source.shown_passages[0].text
        assert any(line.url == source.url and line.text == first_shown for line in cut.lines)
    assert cut.cut_reason is not None and f"{cut.dropped} of {len(full.lines)} passages" in cut.cut_reason


def _meta(sources: list[CitedSource]) -> ReportMeta:
    return ReportMeta(topic="t", title="T", requested_model="a/b", family="a", served_models=["a/b"],
                      served_providers=["P"], route="exact", route_verified=True, calls=1, generation_ids=["g"],
                      status="ok", words=3, usage=Usage(), sources=[], started_at="s", finished_at="f")


def test_the_report_names_its_evidence_and_a_cut_is_a_reason_that_degrades_it() -> None:
    t, _ = _researched()
    cited = [CitedSource(i, s.url, s.title) for i, s in enumerate(t.registry.all(), start=1)]
    final = FinalBody(body="Findings [1], [2], [3] and [4].", sources=cited, dropped_citations=0)
    written, evidence = report_with_evidence(_meta(cited), final, t.registry, finish=lambda text: text)
    report = parse_report_text(written.text, display="research/x.md")
    assert report.meta.evidence_sha256 == evidence.sha256 and report.meta.status == "ok"
    assert check(report, evidence.text).warnings == []
    small, cut = report_with_evidence(_meta(cited), final, t.registry, finish=lambda text: text, limit=2000)
    meta = parse_report_text(small.text, display="research/x.md").meta
    assert cut.dropped and meta.status == "degraded" and cut.cut_reason in meta.status_reasons
    assert meta.evidence_sha256 == cut.sha256


def test_a_report_cut_to_its_size_limit_keeps_evidence_of_the_sources_it_still_cites() -> None:
    t, _ = _researched()
    cited = [CitedSource(i, s.url, s.title) for i, s in enumerate(t.registry.all(), start=1)]
    body = "\n\n".join(f"## Part {i}\n\n" + "Words and more words. " * 200 + f"[{i}]" for i in range(1, 5))
    final = FinalBody(body=body, sources=cited, dropped_citations=0)
    written, evidence = report_with_evidence(_meta(cited), final, t.registry, finish=lambda text: text,
                                             report_limit=12_000)
    assert written.truncated and 0 < len(written.sources) < len(cited)
    assert {line.url for line in evidence.lines} == {s.url for s in written.sources}
    assert parse_report_text(written.text, display="r.md").meta.evidence_sha256 == evidence.sha256


def _report(evidence_sha: str | None, urls: list[str]) -> Report:
    sources = "".join(f"- {{id: {i}, url: '{u}', title: T{i}}}\n" for i, u in enumerate(urls, start=1))
    key = f"evidence_sha256: {evidence_sha}\n" if evidence_sha else ""
    text = ("---\nschema: research-dispatch/report@1\ntopic: t\ntitle: T\nrequested_model: a/b\nfamily: a\n"
            "served_models: [a/b]\nserved_providers: [P]\nroute: exact\nroute_verified: true\ncalls: 0\n"
            "generation_ids: []\nstatus: ok\nwords: 1\nusage: {}\nsources:\n" + sources + key +
            "started_at: s\nfinished_at: f\n---\n\nBody [1].\n")
    return parse_report_text(text, display="research/01-t.md")


def test_check_tells_an_older_report_from_a_lost_changed_or_thin_evidence_file() -> None:
    lines = [EvidenceLine.of(URLS[0], "T1", WEB_SEARCH, "a passage"), EvidenceLine.of(URLS[1], "T2", WEB_EXTRACT, "b")]
    text = "".join(line.to_json() + "\n" for line in lines)
    older = check(_report(None, URLS[:2]), None)
    assert older.warnings == ["no evidence file (research/01-t.evidence.jsonl): the report predates evidence files, "
                              "so its citations cannot be checked"]
    lost = check(_report(sha256_text(text), URLS[:2]), None)
    assert lost.warnings == ["research/01-t.evidence.jsonl is missing"]
    assert check(_report(sha256_text(text), URLS[:2]), text).warnings == []
    thin = check(_report(sha256_text(text), URLS[:3]), text)
    assert thin.warnings == [f"1 cited source(s) without evidence: [3] {URLS[2]}"]
    changed = text.splitlines()[0] + "\n" + "{not json\n"
    damaged = check(_report(sha256_text(text), URLS[:2]), changed)
    assert damaged.uncovered[0].url == URLS[1] and damaged.lines == 1
    assert [w.split(" (")[0] for w in damaged.warnings] == [
        "research/01-t.evidence.jsonl is not the evidence file written with the report",
        "research/01-t.evidence.jsonl: 1 damaged line(s) ignored", "1 cited source(s) without evidence: [2] " + URLS[1]]


@pytest.mark.parametrize(("change", "field"), [
    ({"sha256": "0" * 64}, "sha256: not the sha256 of text"), ({"tool": "shell"}, "tool"),
    ({"text": 7}, "text"), ({"text": ""}, "text"), ({"extra": 1}, "extra: unknown key"), ({"url": ""}, "url")])
def test_a_damaged_line_is_refused_naming_its_field(change: dict[str, object], field: str) -> None:
    good = json.loads(EvidenceLine.of(URLS[0], "T", "mcp:aws-docs__read_documentation", "text").to_json())
    with pytest.raises(ValueError, match=re.escape(field)):
        parse_line(json.dumps({**good, **change}))
    with pytest.raises(ValueError, match=r"^line 2: not an evidence line"):
        parse_evidence(json.dumps(good) + "\n" + json.dumps({**good, **change}) + "\n")


passages = st.lists(st.tuples(st.integers(0, 5), st.sampled_from([WEB_SEARCH, WEB_EXTRACT, "mcp:d__read"]),
                              st.text(min_size=1, max_size=300)), max_size=40)


@settings(max_examples=examples(60), deadline=None)
@given(passages, st.integers(min_value=0, max_value=6000), st.lists(st.integers(0, 7), max_size=6, unique=True))
def test_property_the_file_is_sorted_unique_within_its_cap_and_drawn_from_what_was_shown(
        shown: list[tuple[int, str, str]], limit: int, cited_ids: list[int]) -> None:
    registry = SourceRegistry()
    for index in range(6):
        registry.add(f"https://example.org/{index}", f"Title {index}")
    for index, tool, text in shown:
        source = registry.by_url(f"https://example.org/{index}")
        assert source is not None
        source.show(tool, text)
    cited = [CitedSource(n, f"https://example.org/{i}", f"Title {i}") for n, i in enumerate(cited_ids, start=1)]
    evidence = gather(cited, registry, limit=limit)
    text = evidence.text
    assert len(text.encode("utf-8")) <= limit <= MAX_EVIDENCE_BYTES
    parsed = parse_evidence(text)
    assert parsed == list(evidence.lines)
    keys = [line.key for line in parsed]
    assert keys == sorted(set(keys))
    every = {(s.url, p.text) for s in registry.all() for p in s.shown_passages
             if s.url in {c.url for c in cited}}
    assert {(line.url, line.text) for line in parsed} <= every
    assert len(parsed) + evidence.dropped == len(every)
    assert gather(cited, registry, limit=limit).text == text


def test_a_key_a_page_echoes_is_redacted_before_hashing() -> None:
    register_secrets(["tvly-evidence-canary-0001"])
    registry = SourceRegistry()
    source = registry.add(URLS[0], "T")
    source.show(WEB_EXTRACT, "The page printed tvly-evidence-canary-0001 in its footer.\u202e")
    (line,) = gather([CitedSource(1, URLS[0], "T")], registry).lines
    assert line.text == "The page printed [REDACTED] in its footer." and line.sha256 == sha256_text(line.text)
