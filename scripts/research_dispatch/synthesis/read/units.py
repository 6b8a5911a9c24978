"""Number what models point at: a report body's units and a stored passage's sentences.

Models point, code quotes (DESIGN.md, "Evidence and checked claims" — FIXED). A model asked to copy a
sentence slips — a capitalised first letter, wrapping quotation marks, an ellipsis, an added period, a
PDF ligature read as two letters — and a verbatim sub-span can drop the negation around it. So code
numbers the text, the extractor and the citation judge answer with numbers, and what is written and
shown is always the text's own whole unit (ALCE, FActScore and Anthropic's citations API do the same).

* **A report body** is cut into *units*: each sentence of a paragraph, each list item, each table row.
  Headings are recorded (each unit knows its section) and are not units; fenced code, table separator
  rows and blank lines are not units either. Unit numbers run from 1 in body order.
* **A stored passage** is cut into *sentences*: its paragraphs' sentences, its list items' and table
  rows' sentences, numbered from 1. A line break inside a sentence (text extracted from a PDF wraps its
  lines, and hyphenates words across them) is not a boundary; a blank line, a new list item, a heading,
  a table row and the elision mark `[…]` are. A "sentence" longer than `MAX_SENTENCE_CHARS` (a run of
  text with no sentence end) is cut at clause punctuation, else at a space, so that what the judge is
  shown and what code quotes stay whole units of the same size.

Sentence ends are `.`, `!` or `?` (with closing quotes or brackets and the report's citation markers
`[3]` after it) followed by a space and a capital, a digit or an opening quote or bracket — except after
common abbreviations ("e.g.", "i.e.", "vs.", "et al.", "Fig.") and initials.

Both numberings are pure functions of the text: the same body gives the same unit numbers on every run
(so a cached extraction replays exactly), and the same passage the same sentence numbers (so a cached
verdict names the same sentences).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

from research_dispatch.core import sanitize

MAX_SENTENCE_CHARS = 600
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+")
_ROW = re.compile(r"^[ \t]*\|")
_SEPARATOR_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])[ \t]*(\1[ \t]*){2,}$")
_QUOTE_MARK = re.compile(r"^[ \t]*>[ \t]?")
_ELISION = re.compile(r"\[…\]|\[\.\.\.\]")
_MARKERS = re.compile(r"\[(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\](?!\()")
_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?:\s*\[\d{1,4}(?:\s*[,;]\s*\d{1,4})*\](?!\())*(?=\s|$)")
_STARTER = re.compile(r"\s+(?!\[\d)[\"'\u201c\u2018(\[*_`]*\w")
_ABBREVIATIONS = frozenset(("e.g", "i.e", "vs", "cf", "al", "fig", "figs", "eq", "eqs", "dr", "mr", "mrs", "ms",
                            "no", "nos", "approx", "incl", "resp", "sec", "ch", "vol", "pp", "jr", "sr", "st", "etc",
                            "inc", "ltd", "co", "ca", "viz", "ref", "refs", "tab", "u.s", "u.k", "ph.d"))
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_CLAUSE = re.compile(r"[;:]\s|,\s")


class UnitKind(str, enum.Enum):
    SENTENCE = "sentence"  # a sentence of a paragraph
    ITEM = "item"  # a list item, whole
    ROW = "row"  # a table row


@dataclass(frozen=True)
class Span:
    """One numbered piece of a text, `text[start:end]`: a sentence of a passage (`S<n>`)."""

    number: int
    start: int
    end: int

    prefix = "S"

    @property
    def label(self) -> str:
        return f"{self.prefix}{self.number}"


@dataclass(frozen=True)
class Unit(Span):
    """One numbered unit of a report body (`U<n>`): a sentence of a paragraph, a list item, a table row."""

    kind: UnitKind = UnitKind.SENTENCE
    block: int = 0  # which paragraph, item or row it belongs to (units of one paragraph share it)
    section: str | None = None  # the heading above it (None before the first heading)

    prefix = "U"


S = TypeVar("S", bound=Span)


@dataclass(frozen=True)
class Numbered(Generic[S]):
    """A text and its numbered pieces, looked up by label ("U12", "S3", "12") or number."""

    text: str
    items: tuple[S, ...]

    def get(self, label_or_number: str | int) -> S | None:
        """The piece of a label or number; None when there is no such piece."""
        number = label_or_number if isinstance(label_or_number, int) else _number(label_or_number)
        return self.items[number - 1] if number is not None and 1 <= number <= len(self.items) else None

    def words(self, item: S) -> str:
        return self.text[item.start:item.end]

    def quote(self, items: Iterable[S]) -> str:
        """The pieces' words, in text order, on one line: what a claim's or a citation's `quote` is. Pieces
        that are not next to each other are joined by an elision mark, so a quote never reads as one run of
        text that the source does not have."""
        out: list[str] = []
        previous: int | None = None
        for item in sorted(set(items), key=lambda i: i.number):
            if previous is not None:
                out.append(" " if item.number == previous + 1 else " … ")
            out.append(one_line(self.words(item)))
            previous = item.number
        return "".join(out)


def one_line(text: str) -> str:
    """A unit's words on one line, as written (whitespace collapsed)."""
    return " ".join(text.split())


def shows_as_written(text: str) -> bool:
    """Does the text survive sanitising for a document unchanged (no HTML comment, workflow command, ...)?
    A unit that does not cannot be quoted as the report's own words."""
    return sanitize.one_line(text, len(text) + 1) == one_line(text)


# --------------------------------------------------------------------------------------------------
# Sentences


def _abbreviation_before(text: str, end: int) -> bool:
    """Is the period at `end` that of an abbreviation or an initial ("e.g.", "et al.", "J.")?"""
    word = _WORD_BEFORE.search(text, max(0, end - 24), end)
    if word is None:
        return False
    token = word.group(1).rstrip(".").lower()
    return token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences of `text[start:end]` (one paragraph), as trimmed (start, end) offsets."""
    out: list[tuple[int, int]] = []
    begin = start
    for match in _END.finditer(text, start, end):
        stop = match.end()
        period = match.group(0).lstrip("!?")[:1] == "."
        if period and _abbreviation_before(text, match.start()) and not match.group(0).startswith(".."):
            continue
        if not _STARTER.match(text, stop, end):
            continue
        out.append((begin, stop))
        begin = stop
    out.append((begin, end))
    return [span for span in (_trimmed(text, s, e) for s, e in out) if span is not None]


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _bounded(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """`text[start:end]` in pieces of at most `limit` characters, cut at clause punctuation or a space."""
    pieces = []
    while end - start > limit:
        window = text[start:start + limit]
        cuts = [m.end() for m in _CLAUSE.finditer(window) if m.end() > limit // 3]
        cut = cuts[-1] if cuts else (window.rfind(" ") + 1 if window.rfind(" ") > limit // 3 else limit)
        piece = _trimmed(text, start, start + cut)
        if piece is not None:
            pieces.append(piece)
        start += cut
    last = _trimmed(text, start, end)
    return [*pieces, *([last] if last else [])]


# --------------------------------------------------------------------------------------------------
# Blocks


@dataclass
class _Block:
    kind: UnitKind  # SENTENCE: a paragraph
    start: int
    end: int
    section: str | None


def _lines(text: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, line) of every line of `text`, without its newline."""
    position = 0
    for line in text.split("\n"):
        yield position, position + len(line), line
        position += len(line) + 1


def _blocks(text: str) -> list[_Block]:
    """Paragraphs, list items and table rows in order, each knowing its section; headings, blank lines,
    fenced code, rules and table separators end a block; other lines continue the block they follow (a
    paragraph's wrapped lines, a list item's continuation)."""
    blocks: list[_Block] = []
    current: _Block | None = None
    section: str | None = None
    fenced = False
    for start, end, line in _lines(text):
        if _FENCE.match(line):
            fenced, current = not fenced, None
            continue
        if fenced:
            continue
        heading = _HEADING.match(line)
        if heading:
            section, current = sanitize.one_line(heading.group(2).strip(), 300), None
            continue
        if not line.strip() or _RULE.match(line) or ("|" in line and _SEPARATOR_ROW.match(line)):
            current = None
            continue
        if _ROW.match(line):
            blocks.append(_Block(UnitKind.ROW, start, end, section))
            current = None
            continue
        item = _ITEM.match(line)
        if item:
            current = _Block(UnitKind.ITEM, start + item.end(), end, section)
            blocks.append(current)
            continue
        quoted = _QUOTE_MARK.match(line)
        begin = start + (quoted.end() if quoted else 0)
        if current is None:
            current = _Block(UnitKind.SENTENCE, begin, end, section)
            blocks.append(current)
        else:
            current.end = end
    return blocks


# --------------------------------------------------------------------------------------------------
# Report units


class ReportUnits(Numbered[Unit]):
    """A report body and its numbered units."""

    @property
    def units(self) -> tuple[Unit, ...]:
        return self.items

    def markers(self, units: Iterable[Unit]) -> set[int]:
        """The citation numbers the units carry."""
        return {int(n) for u in units for group in _MARKERS.findall(self.words(u))
                for n in re.split(r"\s*[,;]\s*", group) if n.strip()}

    def block_markers(self, units: Iterable[Unit]) -> set[int]:
        """The citation numbers of the whole paragraphs (items, rows) the units are in."""
        blocks = {u.block for u in units}
        return self.markers(u for u in self.items if u.block in blocks)

    def numbered(self) -> str:
        """The body as the extractor reads it: headings as written, then each unit on a line of its own
        behind its label (`[U12] ...`; a list item `- [U12] ...`), blocks a blank line apart. Untrusted
        text, prepared for a model (`sanitize.for_model`)."""
        lines: list[str] = []
        section: str | None = None
        block, kind = -1, UnitKind.SENTENCE
        for unit in self.items:
            if unit.section != section and unit.section is not None:
                lines += ["", f"## {sanitize.for_model(unit.section)}"]
                section = unit.section
            if unit.block != block and lines and not (unit.kind is kind and kind is not UnitKind.SENTENCE):
                lines.append("")  # paragraphs apart; a list's items and a table's rows together
            block, kind = unit.block, unit.kind
            prefix = "- " if unit.kind is UnitKind.ITEM else ""
            lines.append(f"{prefix}[{unit.label}] {sanitize.for_model(one_line(self.words(unit)))}")
        return "\n".join(lines).strip("\n")


@lru_cache(maxsize=64)
def report_units(body: str) -> ReportUnits:
    """Number a report body's units (module docstring). Cached: extraction, replays and claims of one
    report all number the same body."""
    units: list[Unit] = []
    for index, block in enumerate(_blocks(body)):
        spans = sentences(body, block.start, block.end) if block.kind is UnitKind.SENTENCE else \
            [s for s in [_trimmed(body, block.start, block.end)] if s]
        for start, end in spans:
            units.append(Unit(len(units) + 1, start, end, block.kind, index, block.section))
    return ReportUnits(body, tuple(units))


def _number(label: str) -> int | None:
    """The number of a label a model wrote: "U12", "[U12]", "u12", "S3", "3"."""
    match = re.fullmatch(r"\s*\[?[A-Za-z]?(\d{1,6})\]?\s*", label)
    return int(match.group(1)) if match else None


# --------------------------------------------------------------------------------------------------
# Passage sentences


class PassageSentences(Numbered[Span]):
    """A stored passage and its numbered sentences."""

    def shown(self, numbers: Iterable[int]) -> str:
        """Some of the sentences as the judge reads them: each behind its label, in passage order, an
        elision mark where sentences are left out between them."""
        out: list[str] = []
        previous = 0
        for number in sorted(set(numbers)):
            span = self.get(number)
            if span is None:
                continue
            if out and number != previous + 1:
                out.append("…")
            out.append(f"[{span.label}] {one_line(self.words(span))}")
            previous = number
        return " ".join(out)


def passage_sentences(text: str) -> PassageSentences:
    """Number a passage's sentences (module docstring)."""
    pieces: list[tuple[int, int]] = []
    for block in _blocks(text):
        for start, end in _between_elisions(text, block.start, block.end):
            for s, e in sentences(text, start, end):
                pieces += _bounded(text, s, e, MAX_SENTENCE_CHARS)
    return PassageSentences(text, tuple(Span(i + 1, s, e) for i, (s, e) in enumerate(pieces)))


def _between_elisions(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The stretches of `text[start:end]` between elision marks (`[…]`: text left out is a boundary)."""
    out, begin = [], start
    for match in _ELISION.finditer(text, start, end):
        out.append((begin, match.start()))
        begin = match.end()
    out.append((begin, end))
    return [span for span in (_trimmed(text, s, e) for s, e in out) if span is not None]
