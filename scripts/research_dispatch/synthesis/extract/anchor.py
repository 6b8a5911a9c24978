"""Anchor a claim in its report: where the quote is, the section it is in, and the markers it carries.

The extractor proposes a quote, a section and citation numbers; code establishes them from the report
body itself (docs/ARCHITECTURE.md, "Evidence and checked claims — FIXED"):

* the quote must be found verbatim (`verbatim.find`); the anchored quote is the body's own text at that
  place, so the document can only ever show the report's words;
* the section is the nearest Markdown heading above the quote (None before the first heading). The
  model's section is a hint only: when the quote occurs more than once, the first occurrence in a
  section of that name wins, else the first occurrence;
* the citation markers are those of the quoted sentence — the sentence(s) the quote overlaps, inside
  its block (a paragraph, list item or table row), plus a marker right after the sentence's end. When
  that sentence carries none, the model's numbers that are markers somewhere in the same block are
  taken (a paragraph that cites once at its end); numbers that appear nowhere near the quote are not.

Pure functions of the body, and a fixed point: anchoring the anchored quote under the section code
found gives the same anchor, so a claim replayed from the ledger is the claim that was written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from research_dispatch.core.sanitize import one_line
from research_dispatch.synthesis.read import verbatim

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(```|~~~).*?(?:^ {0,3}\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_BLOCK_BREAK = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:[-*+][ \t]|\d{1,3}[.)][ \t]|\||#|>))")
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s|$)")
_MARKERS = re.compile(r"\[(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\](?!\()")
_LEADING_MARKERS = re.compile(r"\s*(?:\[(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\](?!\())+")


@dataclass(frozen=True)
class Anchor:
    """Where a quote sits in the report body, as code found it."""

    quote: str  # the body's own words at that place, on one line (sanitised)
    section: str | None  # the heading above it; None before the first heading
    markers: tuple[int, ...]  # citation numbers the quoted sentence carries (sorted, distinct)
    start: int
    end: int


def headings(body: str) -> list[tuple[int, str]]:
    """(offset, heading text) of every Markdown heading outside fenced code, in order."""
    fenced = [(m.start(), m.end()) for m in _FENCE.finditer(body)]
    out = []
    for match in _HEADING.finditer(body):
        if any(start <= match.start() < end for start, end in fenced):
            continue
        out.append((match.start(), one_line(match.group(2).strip(), 300)))
    return out


class ReportBody:
    """A report body prepared for anchoring many quotes: normalised once, its headings found once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.searchable = verbatim.Searchable(text)
        self.headings = headings(text)

    def section_at(self, offset: int) -> str | None:
        """The heading of the section `offset` is in (the last heading that starts before it)."""
        current = None
        for start, text in self.headings:
            if start > offset:
                break
            current = text
        return current


def _block(body: str, start: int, end: int) -> tuple[int, int]:
    """The paragraph, list item or table row around `[start, end)` (a quote may span several)."""
    begin = 0
    for match in _BLOCK_BREAK.finditer(body, 0, start):
        begin = match.end()
    stop = _BLOCK_BREAK.search(body, end)
    return begin, stop.start() if stop else len(body)


def _numbers(groups: Iterable[str]) -> set[int]:
    return {int(n) for group in groups for n in re.split(r"\s*[,;]\s*", group) if n.strip()}


def sentence_markers(body: str, start: int, end: int) -> tuple[set[int], set[int]]:
    """(markers of the sentence(s) `[start, end)` overlaps, markers of its whole block)."""
    block_start, block_end = _block(body, start, end)
    sentence_start = block_start
    for match in _SENTENCE_END.finditer(body, block_start, start):
        sentence_start = match.end()
    finish = _SENTENCE_END.search(body, max(start, end - 1), block_end)
    sentence_end = finish.end() if finish else block_end
    trailing = _LEADING_MARKERS.match(body, sentence_end, block_end)
    if trailing:
        sentence_end = trailing.end()
    sentence = _numbers(m.group(1) for m in _MARKERS.finditer(body, sentence_start, sentence_end))
    block = _numbers(m.group(1) for m in _MARKERS.finditer(body, block_start, block_end))
    return sentence, block


def _locate(quote: str, body: ReportBody, hint: str | None) -> verbatim.Span | None:
    spans = verbatim.find_all(quote, body.searchable)
    if not spans:
        return None
    if hint:
        wanted = verbatim.comparable(hint)
        for span in spans:
            section = body.section_at(span.start)
            if section is not None and verbatim.comparable(section) == wanted:
                return span
    return spans[0]


def anchor(quote: str, body: ReportBody, *, section_hint: str | None, numbers: Iterable[int]) -> Anchor | None:
    """Anchor `quote` in `body`, or None when it is not a verbatim span of it.

    `numbers` are the extractor's citation numbers (used only when the quoted sentence has none, and
    only those that are markers of the same block). A span that sanitising would change (hostile text
    such as an HTML comment inside the sentence) is not anchored: the quote shown must be the report's.
    """
    span = _locate(quote, body, section_hint)
    if span is None:
        return None
    original = body.text[span.start:span.end]
    words = one_line(original, len(original) + 1)
    if verbatim.comparable(words) != verbatim.comparable(original):
        return None
    sentence, block = sentence_markers(body.text, span.start, span.end)
    markers = sentence or (block & set(numbers))
    return Anchor(quote=words, section=body.section_at(span.start), markers=tuple(sorted(markers)),
                  start=span.start, end=span.end)
