"""Does a model's copy of some text match it? The tolerant cross-check behind a pointer.

The extractor and the citation judge point at numbered units and sentences (`units`), and may add a
few words copied from what they point at. Those words are only a cross-check: code takes the text
from the pointer, never from the copy. They are compared tolerantly, because a faithful copy slips in
ways that change nothing — a capitalised first letter, wrapping quotation marks, a leading or trailing
ellipsis, an added final period, a citation marker written `(3)` or `[S3]`, ligatures and hyphenated
line breaks of PDF text read through, Markdown link syntax and emphasis dropped:

* both sides are reduced to their words (letters and digits, lower case), ligatures unfolded and words
  hyphenated across a line break joined; only *markup* is skipped — on the source's side its citation
  markers, emphasis and link targets, on the model's side its quotation marks, ellipses and markers;
* the copy matches when every word it holds appears in the text, in order, consecutively — except where
  the model wrote an ellipsis, which may stand for any words left out.

A copy shorter than `MIN_WORDS` words matches nothing: "use GRPO" is in any report about GRPO and shows
nothing. Nothing here ever makes text to show: it only says whether, and where, a copy fits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MIN_WORDS = 3
_LIGATURES = {ord("\ufb00"): "ff", ord("\ufb01"): "fi", ord("\ufb02"): "fl", ord("\ufb03"): "ffi",
              ord("\ufb04"): "ffl", ord("\ufb05"): "st", ord("\ufb06"): "st"}
_HYPHEN_BREAK = re.compile(r"(?<=[^\W\d_])-[ \t]*\n[ \t]*(?=[^\W\d_])")
_SOURCE_MARKUP = re.compile(r"\[\s*\d{1,4}(?:\s*[,;]\s*\d{1,4})*\s*\](?!\()|\]\([^)\s]*\)|[*_`]")
_MODEL_MARKERS = re.compile(r"[\[(]\s*[SU]?\d{1,4}(?:\s*[,;]\s*[SU]?\d{1,4})*\s*[\])]", re.IGNORECASE)
_ELLIPSIS = re.compile(r"\.{3,}|…")
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """A text's words as compared here (see the module docstring)."""
    return _WORD.findall(_HYPHEN_BREAK.sub("", text.translate(_LIGATURES)).casefold())


def source_words(text: str) -> list[str]:
    """The words of source text (a report unit, a passage sentence), its markup skipped."""
    return words(_SOURCE_MARKUP.sub(" ", text))


def copy_segments(copy: str) -> list[list[str]]:
    """The words of a model's copy, in the stretches its ellipses separate."""
    text = _MODEL_MARKERS.sub(" ", _HYPHEN_BREAK.sub("", copy.translate(_LIGATURES)))
    return [segment for segment in (words(part) for part in _ELLIPSIS.split(text)) if segment]


def matches(copy: str, text: str) -> bool:
    """Is `copy` a faithful copy of (part of) `text`? (module docstring)"""
    segments = copy_segments(copy)
    if sum(len(s) for s in segments) < MIN_WORDS:
        return False
    haystack = source_words(text)
    position = 0
    for segment in segments:
        found = _find(haystack, segment, position)
        if found < 0:
            return False
        position = found + len(segment)
    return True


def _find(haystack: list[str], needle: list[str], start: int) -> int:
    for index in range(start, len(haystack) - len(needle) + 1):
        if haystack[index:index + len(needle)] == needle:
            return index
    return -1


def where(copy: str, texts: Sequence[str]) -> list[int]:
    """The indices of the texts `copy` matches (each alone), in order."""
    return [index for index, text in enumerate(texts) if matches(copy, text)]
