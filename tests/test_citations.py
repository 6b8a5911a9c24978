"""Citations are finalised in code: renumbered by first use, unknown ids dropped, references rendered."""

from __future__ import annotations

from research_dispatch.leg.report import count_words, finalize_citations, render_references
from research_dispatch.tools.sources import SourceRegistry, normalise_url


def registry(n: int) -> SourceRegistry:
    """`n` sources, each shown to the model (a search result or a reading): citable."""
    reg = SourceRegistry()
    for i in range(1, n + 1):
        reg.add(f"https://example.org/paper-{i}", f"Paper {i}").shown = True
    return reg


def test_a_source_registered_but_never_shown_is_not_citable() -> None:
    """A URL the brief names is registered before the first call (readable at once), but the model was
    never shown a word of it until it is read: a citation to it is dropped, a link to it removed, as for
    an id never handed out (its evidence would be empty)."""
    reg = registry(1)
    reg.add("https://arxiv.org/abs/2311.08105", "https://arxiv.org/abs/2311.08105")
    final = finalize_citations("Read [S1]. Named only [S2], see https://arxiv.org/abs/2311.08105 too.", reg)
    assert final.body.startswith("Read [1]. Named only, see (link removed")
    assert final.unknown_ids == ["S2"] and final.unlinked_urls == 1 and len(final.sources) == 1


def test_renumbered_by_first_use_and_unknown_dropped() -> None:
    draft = "Alpha [S3]. Beta [S1, S3]. Gamma [S9]. Delta [S2][S3]."
    final = finalize_citations(draft, registry(3))
    assert final.body == "Alpha [1]. Beta [2, 1]. Gamma. Delta [3][1]."
    assert [(s.id, s.url) for s in final.sources] == [
        (1, "https://example.org/paper-3"), (2, "https://example.org/paper-1"), (3, "https://example.org/paper-2")]
    assert final.dropped_citations == 1 and final.unknown_ids == ["S9"]


def test_model_written_reference_list_is_replaced() -> None:
    draft = "Body [S1].\n\n## References\n\n1. Something invented https://evil.example/x\n"
    final = finalize_citations(draft, registry(1))
    assert "evil" not in final.body and "References" not in final.body
    assert render_references(final.sources).splitlines()[-1] == "1. Paper 1 — <https://example.org/paper-1>"


def test_links_to_pages_never_retrieved_are_removed() -> None:
    draft = ("See [the paper](https://example.org/paper-1) and [a fake](https://evil.example/paper) "
             "and https://evil.example/raw plus https://example.org/paper-1/ [S1].")
    final = finalize_citations(draft, registry(1))
    assert "evil.example" not in final.body
    assert "[the paper](https://example.org/paper-1)" in final.body
    assert "a fake" in final.body
    assert final.unlinked_urls == 2


def test_hostile_markup_is_stripped() -> None:
    draft = ("Fine [S1]. <!-- research-refresh:v1 cycle=2026-H2 --> \u202eevil\u202c ok\n"
             "::add-mask::x\n<script>alert(1)</script> ${{ secrets.GITHUB_TOKEN }}")
    final = finalize_citations(draft, registry(1))
    assert "<!--" not in final.body and "\u202e" not in final.body
    assert "<script>" not in final.body
    assert "\n::" not in final.body and "${{" not in final.body


def test_word_count_ignores_citations_and_urls() -> None:
    assert count_words("Two words [S1] [1, 2] https://example.org/a-b-c") == 2
    assert count_words("# Title\n\n- GRPO+DAPO is the default.") == 6


def test_url_normalisation_dedupes_sources() -> None:
    reg = SourceRegistry()
    a = reg.add("https://arxiv.org/abs/2311.08105", "DiLoCo")
    b = reg.add("http://www.arxiv.org/pdf/2311.08105v2?utm_source=x#frag", "DiLoCo PDF")
    c = reg.add("https://arxiv.org/abs/2501.18512/", "Streaming")
    assert a.id == b.id == 1 and c.id == 2
    assert normalise_url("HTTPS://Example.org/a/?b=2&a=1") == "https://example.org/a?a=1&b=2"
