"""Is an extracted statement a finding? A code guard behind the extractor's prompt.

Why: reports quote their sources, and sources open with a description of themselves ("Repository for
torchtitan, PyTorch's reference platform…", "The TRL documentation page for the GRPO trainer"). An
extractor — a fake one or a real model — can hand such a sentence back as a "claim". It asserts nothing
about the subject, two reports quoting one page's description would then come out "convergent", and
the synthesis would present a page's blurb as a finding.

The extractor is told not to do this; this module drops what slips through, with a reason the ledger
keeps (so a reviewer can audit every drop). The rules are deliberately narrow, because dropping a real
finding is worse than keeping a description:

* **title** — the statement restates the title of one of the report's sources (its content words are
  nearly all the title's);
* **source description** — it opens with a document noun phrase ("Repository for …", "Cursor's launch
  post for …", "The paper behind …", "A critical analysis of …") and has no verb that asserts
  anything (no copula, modal, or reporting verb such as "shows" or "found");
* **about the document** — its subject is the document, its verb only says what the document covers,
  and nothing after it asserts anything ("The report covers the architecture and the pretraining
  run"); "The paper describes how …" and "… describes the library as experimental, lists …" stay;
* **no assertion** — no verb-like word at all (a bare noun phrase), unless it is a recommendation.

Pure functions; no model, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from research_dispatch.synthesis.common.text import token_set

_DOC_NOUNS = (r"(?:launch\s+|blog\s+|technical\s+|research\s+|release\s+|announcement\s+)?(?:paper|preprint|post|"
              r"article|repository|repo|readme|documentation(?:\s+page)?|docs(?:\s+page)?|page|announcement|report|"
              r"study|analysis|survey|reproduction|thesis|talk|tutorial|guide|website|homepage|follow-up|overview|"
              r"write-?up|newsletter|podcast|video|slides|dataset card|model card)")
_DESCRIPTION_OPENER = re.compile(
    r"^(?P<head>(?:[\w.+'’-]+\s+){0,6}?)" + _DOC_NOUNS +
    r"(?:\s+and\s+[\w-]+)?\s+(?:for|of|on|about|behind|introducing|describing|presenting|announcing|"
    r"proposing|that|from|by|to|covering|with)\b", re.IGNORECASE)
_ABOUT_DOCUMENT = re.compile(
    r"^(?:the|this|that|these|those|our|its|their|a|an)\s+(?:\w+\s+){0,2}?"
    r"(?:report|paper|post|article|page|repository|section|document|source|study|survey|blog post|readme|"
    r"documentation|chapter|talk|video)s?\s+"
    r"(?:describes|discusses|covers|presents|introduces|provides|outlines|explains|summari[sz]es|reviews|"
    r"focuses on|examines|looks at|is about|deals with|documents|announces|details|walks through)\b"
    r"(?!\s+(?:how|that|why|whether|what|when)\b)", re.IGNORECASE)
_FINITE = frozenset((
    "is", "are", "was", "were", "isn't", "aren't", "wasn't", "weren't", "has", "have", "had", "do", "does", "did",
    "can", "cannot", "could", "should", "must", "will", "would", "may", "might", "shall", "shows", "showed",
    "finds", "found", "reports", "reported", "demonstrates", "demonstrated", "concludes", "concluded", "estimates",
    "estimated", "measures", "measured", "confirms", "confirmed", "argues", "argued", "suggests", "suggested",
    "observes", "observed", "proves", "proved", "outperforms", "outperformed", "achieves", "achieved", "remains",
))
"""Words that make a statement assert something whatever else it does: copulas, modals, reporting verbs."""
_VERBS = _FINITE | frozenset(("be", "been", "being", "need", "recommend", "prefer", "adopt", "use", "choose",
                              "avoid", "keep", "remain", "lack", "beat", "made", "gave", "took", "ran"))
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
TITLE_OVERLAP = 0.8


def _verb_like(token: str) -> bool:
    """Could this (lower-case, non-name) word be a finite verb? Generous on purpose: keeps statements."""
    if token in _VERBS:
        return True
    if len(token) <= 3:
        return False
    if token.endswith("ed") and not token.endswith("eed"):
        return True
    return token.endswith("s") and not token.endswith(("ss", "us", "is", "ous", "ics", "'s", "’s"))


def _has_verb(statement: str) -> bool:
    """A verb-like word that is not part of a name (capitalised words past the first are names)."""
    words = _WORD.findall(statement)
    for index, word in enumerate(words):
        if index > 0 and word[:1].isupper():
            continue
        if _verb_like(word.lower()):
            return True
    return False


def _asserts(statement: str) -> bool:
    """A copula, modal or reporting verb: the statement claims something, whatever else it does."""
    return any(word.lower() in _FINITE for word in _WORD.findall(statement))


def restates_title(statement: str, titles: Iterable[str]) -> bool:
    words = token_set(statement)
    if not words:
        return False
    for title in titles:
        title_words = token_set(title)
        if not title_words:
            continue
        shared = len(words & title_words)
        if shared / len(words) >= TITLE_OVERLAP:
            return True
        if shared / len(title_words) >= TITLE_OVERLAP and len(words) <= len(title_words) + 3:
            return True
    return False


def not_a_finding(statement: str, stance: str, source_titles: Iterable[str] = ()) -> str | None:
    """Why `statement` is not a finding (a short reason for the ledger), or None when it is one."""
    text = statement.strip()
    if restates_title(text, source_titles):
        return "restates a source's title"
    opener = _DESCRIPTION_OPENER.match(text)
    if opener and not _has_verb(opener.group("head")) and not _asserts(text):
        return "describes a source rather than asserting a finding"
    about = _ABOUT_DOCUMENT.match(text)
    if about and not _has_verb(text[about.end():]):
        return "says what a document covers, not what is true"
    if stance != "recommend" and not _has_verb(text):
        return "asserts nothing (no verb)"
    return None
