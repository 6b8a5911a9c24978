"""A report over the size limit is cut to what the product reads back (issue 11, build 3).

Before: a model that repeated itself produced a 2.3 MB report that `verify` and `synthesize` refused
(over the 2 MiB read limit), and the whole refresh's synthesis failed after the money was spent. Now
the leg cuts the body at the last section boundary that fits `MAX_REPORT_BYTES` — the one limit both
the writer and every reader use — and marks the report degraded, saying why.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research_dispatch.leg.report import (
    MAX_REPORT_BYTES,
    CitedSource,
    ReportMeta,
    SourceEntry,
    Usage,
    cap_report,
    count_words,
    parse_report_text,
    render_report,
)
from tests.bounds.conftest import child_env, fake_env, figure, make_repo, run_process
from tests.bounds.proxy import InflatingProxy
from tests.clirun import run_cli
from tests.profiles import examples

reliability = pytest.mark.reliability


def _meta(sources: list[CitedSource], words: int) -> ReportMeta:
    return ReportMeta(
        topic="t", title="T", requested_model="a/b", family="a", served_models=["a/b"], served_providers=["A"],
        route="exact", route_verified=True, calls=1, generation_ids=["gen-1"], status="ok", words=words,
        usage=Usage(), sources=[SourceEntry(id=s.id, url=s.url, title=s.title) for s in sources],
        started_at="2026-07-01T00:00:00Z", finished_at="2026-07-01T00:01:00Z")


def _report(sections: int, words_per_section: int = 60) -> tuple[str, list[CitedSource]]:
    sources = [CitedSource(id=n, url=f"https://example.org/{n}", title=f"Source {n}") for n in range(1, sections + 1)]
    parts = ["# Title", "", "Opening paragraph [1]."]
    for n in range(1, sections + 1):
        parts += ["", f"## Section {n}", "", " ".join(["word"] * words_per_section) + f" [{n}]."]
    return "\n".join(parts), sources


def test_a_report_within_the_limit_is_unchanged() -> None:
    body, sources = _report(5)
    meta = _meta(sources, count_words(body))
    capped = cap_report(meta, body, sources)
    assert not capped.truncated and capped.text == render_report(meta, body, sources)


def test_an_oversize_report_is_cut_at_a_section_boundary_and_marked_degraded() -> None:
    body, sources = _report(200)
    meta = _meta(sources, count_words(body))
    limit = len(render_report(meta, body, sources).encode()) // 3
    capped = cap_report(meta, body, sources, limit=limit)
    assert capped.truncated and len(capped.text.encode()) <= limit
    report = parse_report_text(capped.text, display="r.md")
    assert report.meta.status == "degraded"
    assert any("truncated to fit" in reason for reason in report.meta.status_reasons)
    kept = re.findall(r"^## Section (\d+)$", report.body, re.MULTILINE)
    assert kept == [str(n) for n in range(1, len(kept) + 1)] and 10 < len(kept) < 200
    last = int(kept[-1])
    assert report.body.split(f"## Section {last}\n", 1)[1].lstrip().startswith("word")  # the section is whole
    assert "[Report truncated" in report.body and "section boundary" in report.body
    assert [s.id for s in report.meta.sources] == list(range(1, last + 1))  # cited sources only, numbers kept
    assert f"{last}. Source {last}" in report.body and f"{last + 1}. Source" not in report.body
    assert report.meta.words == count_words(report.body.split("*[Report truncated")[0].split("## References")[0])


def test_a_single_huge_section_is_cut_at_a_paragraph_then_a_line() -> None:
    sources = [CitedSource(id=1, url="https://example.org/1", title="One")]
    body = "# Title\n\nIntro [1].\n\n" + "\n\n".join("the same sentence again [1]." for _ in range(20000))
    meta = _meta(sources, count_words(body))
    capped = cap_report(meta, body, sources, limit=100_000)
    assert capped.truncated and len(capped.text.encode()) <= 100_000
    assert "paragraph boundary" in capped.body
    parse_report_text(capped.text, display="r.md")


@pytest.mark.slow
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections=st.integers(1, 60), words=st.integers(1, 400), fraction=st.floats(0.05, 1.5),
       fence=st.booleans())
def test_capped_reports_always_fit_and_parse(sections: int, words: int, fraction: float, fence: bool) -> None:
    body, sources = _report(sections, words)
    if fence:
        body = body.replace("## Section 2\n", "## Section 2\n\n```\ncode line\n" * 3, 1)
    meta = _meta(sources, count_words(body))
    empty = len(render_report(meta, "x", []).encode()) + 400  # room for the front matter and the note
    full = len(render_report(meta, body, sources).encode())
    limit = max(empty, int(full * fraction))
    capped = cap_report(meta, body, sources, limit=limit)
    assert len(capped.text.encode()) <= limit
    report = parse_report_text(capped.text, display="r.md")
    assert capped.truncated == (full > limit)
    if capped.truncated:
        assert report.meta.status == "degraded"
        assert capped.body.count("```") % 2 == 0


@pytest.mark.slow
@reliability(area="bounds", case="a model that repeats itself writes a 2.3 MB report (`research`, fresh process)",
             expect="the report is cut at a section boundary to at most MAX_REPORT_BYTES (the limit verify "
                    "reads with), marked degraded with the reason; `verify` accepts it (exit 0, route exact)")
def test_a_repeating_model_gives_a_capped_degraded_report_that_verify_reads(tmp_path: Path, gateway: Any,
                                                                           tavily: Any) -> None:
    repo = make_repo(tmp_path, ("02-",))
    with InflatingProxy(gateway.base_url, target_bytes=2_300_000) as proxy:
        env = child_env({**fake_env(gateway, tavily), "OPENROUTER_BASE_URL": proxy.base_url})
        # a process: its peak memory while it cuts a 2.3 MB answer is the figure (a test worker's is not)
        done = run_process("research", "diloco-family", "--repo", str(repo), env=env)
        assert proxy.inflated >= 1
    figure("oversize report: research", wall_s=done.seconds, peak_rss_mb=done.peak_rss_mb)
    assert done.code == 0, done.output
    assert "Traceback" not in done.output
    report_path = repo / "research" / "02-diloco-family.md"
    size = report_path.stat().st_size
    assert 1_000_000 < size <= MAX_REPORT_BYTES
    text = report_path.read_text(encoding="utf-8")
    report = parse_report_text(text, display="research/02-diloco-family.md")
    assert report.meta.status == "degraded"
    assert any("truncated to fit" in reason for reason in report.meta.status_reasons)
    status = json.loads((repo / "build" / "legs" / "02-diloco-family.json").read_text(encoding="utf-8"))
    assert status["status"] == "degraded" and status["words"] == report.meta.words
    checked = run_cli("verify", "--repo", str(repo), env=child_env())
    assert checked.code == 0, checked.output
    assert "exact" in checked.stdout


def test_a_citation_id_with_thousands_of_digits_is_dropped_not_a_crash() -> None:
    """Python refuses int() of more than 4300 digits; a hostile model must not turn that into a crash."""
    from research_dispatch.leg.report import finalize_citations
    from research_dispatch.tools.sources import SourceRegistry

    final = finalize_citations("A claim [S" + "9" * 5000 + "].", SourceRegistry())
    assert final.dropped_citations == 1 and final.body == "A claim."
