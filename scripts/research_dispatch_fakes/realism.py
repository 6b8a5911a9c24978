"""Realism: the fakes answer the way real models and real pages do, not the way our own code would.

Why: a fake that copies text perfectly hides every defect of the code that reads its answers. Real
extractors and judges capitalise a quote's first letter, wrap it in quotation marks, cut it with an
ellipsis, add a final period, write citation markers as `(3)` or `[S3]`; they name one method
differently from report to report, take a negated recommendation for a positive one now and then,
point at the sentence next to the one they mean, and slip one malformed item into an otherwise good
answer. Real pages read from PDFs carry ligatures and words hyphenated across line breaks. A scenario
turns this on:

    "realism": {"rate": 0.3, "seed": 7}

in the fake gateway's scenario (its extractor and judges), and in the fake Tavily's and Exa's (the
pages they serve). `rate` (0 to 1) is the probability of a slip at each place one can happen, `seed`
makes the draws reproducible: every draw is a hash of the seed and of what is being answered (the
session, the statement, the passage), never of the order of calls, so the same request slips the same
way on every run and in every process.

Where it slips (each place draws on its own):

* **Extraction** (`claim_extraction`), per claim, one slip among those that apply: its quote copied with
  a slip (`COPY_SLIPS`); its unit pointer off by one (when the report is numbered); its `position`
  swapped (recommendations only); its pick under another name for the same thing (the bank's
  `aliases`, recommendations only). Per report, one malformed claim among the good ones
  (`MALFORMATIONS`: an over-long statement or a type slip of a `json_object`-mode model) — an extra
  claim the perfect answer does not have.
* **Citation check** (`citation_check`), per citation: its quote copied with a slip (including a PDF
  artefact read through: ligatures unfolded and a hyphenated word joined, as a model writes it), or its
  sentence pointer off by one (when the passages are numbered).
* **Pages** (the fake Tavily's `/extract` and Exa's `/contents`): an arXiv page or a PDF, with
  probability `rate` per page, reads as text extracted from a PDF does (`pdf_artefacts`).

A question asked again — a repair turn after a rejected answer, or any follow-up question about one
specific answer (a position re-ask, a second question about one citation) — is answered without
slips: a model shown one precise question about its own answer usually gets it right, and the tests'
property (any slip of the first answers leaves the counted set unchanged) rests on it.

Off by default and in the demo; the tests and the benchmarks turn it on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")

COPY_SLIPS = ("capitalised", "wrapped", "ellipsis_start", "ellipsis_end", "final_period", "markers", "pdf_read")
"""How a model's copy of a sentence differs from the sentence, harmlessly."""
MALFORMATIONS = ("overlong_statement", "sources_as_text", "confidence_as_number")
"""The malformed claim a real model sometimes slips in: too long for the schema, or a type slip."""
OVERLONG_CHARS = 1800  # longer than any statement the product's schema takes
_LIGATURES = (("ffi", "\ufb03"), ("ffl", "\ufb04"), ("ff", "\ufb00"), ("fi", "\ufb01"), ("fl", "\ufb02"))
_UNFOLD = {ord(lig): plain for plain, lig in _LIGATURES}
_HYPHEN_BREAK = re.compile(r"(?<=[a-z])-(?:[ \t]*\n[ \t]*|[ \t]+)(?=[a-z])")  # "compu-\ntation", "compu- tation"
_LONG_WORD = re.compile(r"\b[a-z]{9,}\b")
HYPHENATE_EVERY = 7  # every n-th long lower-case word of a PDF page is split across a line break


@dataclass(frozen=True)
class Realism:
    """The scenario's `realism` setting: a slip rate and a seed."""

    rate: float
    seed: int

    @classmethod
    def parse(cls, raw: Any) -> Realism | None:
        """The setting from a scenario value (None or an empty object: off). ValueError when malformed: a
        typo in a test's scenario must fail loudly, not run without slips."""
        if raw is None or raw == {}:
            return None
        if not isinstance(raw, dict) or set(raw) - {"rate", "seed"}:
            raise ValueError("scenario.realism must be an object with keys rate and seed")
        rate, seed = raw.get("rate", 0.0), raw.get("seed", 0)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= float(rate) <= 1.0:
            raise ValueError("scenario.realism.rate must be a number from 0 to 1")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError("scenario.realism.seed must be an integer")
        return cls(rate=float(rate), seed=seed)

    def draw(self, *keys: object) -> float:
        """A number in [0, 1) that depends only on the seed and `keys`."""
        digest = hashlib.sha256("\x1f".join([str(self.seed), *map(str, keys)]).encode("utf-8")).hexdigest()
        return int(digest[:13], 16) / float(16 ** 13)

    def slips(self, *keys: object) -> bool:
        """Does the answer slip at this place?"""
        return self.rate > 0 and self.draw("slip", *keys) < self.rate

    def choose(self, options: Sequence[T], *keys: object) -> T:
        """One of `options`, drawn (options must not be empty)."""
        return options[min(len(options) - 1, int(self.draw("choose", *keys) * len(options)))]


def first_ask(body: dict[str, Any]) -> bool:
    """Is this the first time the question is asked (no earlier answer in the conversation)? Only first
    answers slip (module docstring)."""
    return not any(isinstance(m, dict) and m.get("role") == "assistant" for m in body.get("messages") or [])


def copy_slip(text: str, realism: Realism, *keys: object, markers: Sequence[int] = ()) -> str:
    """`text` as a model copies it with one harmless slip (one of `COPY_SLIPS` that changes it)."""
    candidates = [kind for kind in COPY_SLIPS if _copied(text, kind, markers) != text]
    if not candidates:
        return text
    return _copied(text, realism.choose(candidates, "copy", *keys), markers)


def _copied(text: str, kind: str, markers: Sequence[int]) -> str:
    if kind == "capitalised":
        return text[:1].upper() + text[1:]
    if kind == "wrapped":
        return f"\u201c{text}\u201d"
    if kind == "ellipsis_start":
        return f"... {text}"
    if kind == "ellipsis_end":
        return text.rstrip(".") + "..."
    if kind == "final_period":
        return text if text.endswith((".", "!", "?")) else text + "."
    if kind == "markers":
        return f"{text} ({markers[0]})" if markers else text
    if kind == "pdf_read":
        return read_pdf(text)
    raise ValueError(kind)


def pdf_like(url: str) -> bool:
    """Is this page read from a PDF (an arXiv paper, a .pdf URL)?"""
    parts = urlsplit(url)
    return parts.netloc.lower().endswith("arxiv.org") or parts.path.lower().endswith(".pdf")


def pdf_artefacts(text: str, realism: Realism | None, url: str) -> str:
    """A page's text as a PDF extraction gives it, when the page is PDF-like and the draw says so:
    ligatures for ff/fi/fl/ffi/ffl, and every `HYPHENATE_EVERY`-th long word hyphenated across a line
    break. Otherwise the text unchanged."""
    if realism is None or not pdf_like(url) or not realism.slips("pdf", url):
        return text
    count = 0

    def hyphenate(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        word = match.group(0)
        return f"{word[:len(word) // 2]}-\n{word[len(word) // 2:]}" if count % HYPHENATE_EVERY == 0 else word

    text = _LONG_WORD.sub(hyphenate, text)
    for plain, ligature in _LIGATURES:
        text = text.replace(plain, ligature)
    return text


def read_pdf(text: str) -> str:
    """PDF text as a reader takes it in: ligatures unfolded, hyphenated words joined."""
    return _HYPHEN_BREAK.sub("", text.translate(_UNFOLD))


def malformed(claim: dict[str, Any], kind: str) -> dict[str, Any]:
    """A malformed copy of a claim (one of `MALFORMATIONS`), restated so it is a claim of its own."""
    bad = {**claim, "statement": f"{claim['statement']}, as the report also notes"}
    if kind == "overlong_statement":
        bad["statement"] = (bad["statement"] + " ") * (OVERLONG_CHARS // max(1, len(bad["statement"])) + 1)
    elif kind == "sources_as_text":
        bad["sources"] = ", ".join(f"[{n}]" for n in claim.get("sources") or [1])
    elif kind == "confidence_as_number":
        bad["confidence"] = 0.8
    else:
        raise ValueError(kind)
    return bad
