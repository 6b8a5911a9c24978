"""Is this quote verbatim in that text? The one comparison behind anchoring and citation checking.

A model's quote counts only if code finds it in the text it claims to quote: the report body (is the
claim anchored?) and a stored evidence passage (does the judge's verdict stand?). Both use this module,
so a quote means the same thing everywhere.

What is normalised, on both sides, before comparing — only what differs between a faithful copy and
its source through typography or Markdown, never the words:

* runs of whitespace (line breaks inside a paragraph) become one space, and none is kept before
  closing punctuation (`statement [3].` and `statement.` compare equal);
* curly and other typographic quotation marks become `'` and `"`; dashes and the minus sign become `-`;
* invisible characters (zero-width spaces, bidi controls) are removed; so are Markdown emphasis and
  code marks (`*`, `_` and backticks), and the report's citation markers (`[3]`, `[1, 4]`), which a
  model may keep or leave out when it quotes a sentence.

Case is kept and nothing is paraphrased: "GRPO should not be the default" is never found in "GRPO should
be the default". A quote shorter than `MIN_WORDS` words is never found: a two-word quote such as "use
GRPO" is somewhere in any report about GRPO and shows nothing.

`find_all` answers with the spans of the ORIGINAL text the quote covers, so callers can take the
section heading above it and the citation markers of its sentence from the report itself. A text that
is searched many times (a report body, for each of its claims) is normalised once (`Searchable`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from research_dispatch.core.sanitize import strip_invisible

MIN_WORDS = 4
_WORD = re.compile(r"\w+")
_TYPOGRAPHY = {ord(c): "'" for c in "\u2018\u2019\u201a\u201b\u2032\u00b4\u02bc"}
_TYPOGRAPHY.update({ord(c): '"' for c in "\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb"})
_TYPOGRAPHY.update({ord(c): "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"})
_TYPOGRAPHY.update({ord("\u00a0"): " ", ord("\u202f"): " ", ord("\u2009"): " "})
_CLOSING = frozenset(".,;:!?)")  # no space before these (one may be left where a marker was dropped)
_DROPPED = re.compile(r"\[\s*\d{1,4}(?:\s*[,;]\s*\d{1,4})*\s*\]|[*_`]")


@dataclass(frozen=True)
class Span:
    """Where a quote was found: `text[start:end]` of the original text."""

    start: int
    end: int


@dataclass(frozen=True)
class Normalised:
    """A text in comparable form, with the offset in the original text of every character kept."""

    text: str
    offsets: tuple[int, ...]


def normalise(text: str) -> Normalised:
    """`text` in comparable form (see the module docstring), keeping where each character came from."""
    kept: list[str] = []
    offsets: list[int] = []
    dropped = _dropped_positions(text)
    pending_space = False
    for index, char in enumerate(text):
        if index in dropped or (not (char.isascii() and char.isprintable()) and not strip_invisible(char)):
            continue
        char = char.translate(_TYPOGRAPHY)
        if char.isspace():
            pending_space = bool(kept)
            continue
        if pending_space and char not in _CLOSING:
            kept.append(" ")
            offsets.append(index)
        pending_space = False
        kept.append(char)
        offsets.append(index)
    return Normalised("".join(kept), tuple(offsets))


def _dropped_positions(text: str) -> set[int]:
    return {i for match in _DROPPED.finditer(text) for i in range(match.start(), match.end())}


def comparable(text: str) -> str:
    """Just the comparable form (what two quotes are compared by)."""
    return normalise(text).text


def words(text: str) -> int:
    return len(_WORD.findall(text))


class Searchable:
    """A text normalised once, to look many quotes up in."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.normalised = normalise(text)


def find_all(quote: str, text: str | Searchable) -> list[Span]:
    """Every span of `text` that `quote` reproduces after normalisation, in order (maybe none).

    A quote of fewer than `MIN_WORDS` words is never found, nor one that starts or ends inside a word of
    `text` ("RPO should be the default" is not in "GRPO should be the default").
    """
    needle = comparable(quote).strip()
    if words(needle) < MIN_WORDS:
        return []
    haystack = (text if isinstance(text, Searchable) else Searchable(text)).normalised
    spans: list[Span] = []
    position = haystack.text.find(needle)
    while position >= 0:
        end = position + len(needle)
        if _whole_words(haystack.text, position, end):
            spans.append(Span(haystack.offsets[position], haystack.offsets[end - 1] + 1))
        position = haystack.text.find(needle, position + 1)
    return spans


def _whole_words(text: str, start: int, end: int) -> bool:
    """The match neither starts nor ends in the middle of a word."""
    cut_before = start > 0 and text[start - 1].isalnum() and text[start].isalnum()
    cut_after = end < len(text) and text[end - 1].isalnum() and text[end].isalnum()
    return not (cut_before or cut_after)


def contains(text: str | Searchable, quote: str) -> bool:
    """True when `quote` is verbatim in `text` (after normalisation, at least `MIN_WORDS` words)."""
    return bool(find_all(quote, text))
