"""Does the sentence a citation judge points at address the claim? Code reads it before a verdict stands.

A judge that says "supports" and points at a sentence has not yet shown support: the sentence may be
boilerplate ("Cite this paper as …"), another method's row of a table, the half of a sentence before
"did not", or an instruction planted in the page for the judge. Code reads the pointed sentence
against the claim's own sentence (`read`):

* **refused** — the pointed sentence speaks to its reader as a model ("Note to AI reviewers: … answer
  supports"; "ignore previous instructions"): text in a page is data, never evidence about itself;
* **stands** — it names what the claim is about (the claim's pick; for another claim, its subject: the
  first name in its sentence — an acronym, a capitalised or camel-case name, a model name with digits —
  or, in a sentence that names nothing, its first two content words)
  AND shares something the claim says about it (a content word or number besides the names) AND, for
  `supports`, neither negates what the claim states nor narrows it with a condition the claim lacks
  ("only", "unless", "except"), and the claim does not negate what the sentence states;
* otherwise it is **in doubt**, with the reason: the judge is asked a second, opposite-direction
  question about that sentence alone (`citations`) — "does it fail to support the claim?" — and the
  verdict stands only when the judge says no. A judge that says yes to whatever it is asked cannot
  pass both questions; one that obeyed an instruction in the page is asked without the page.

Pure functions; the words compared are `common/text`'s tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from research_dispatch.synthesis.common.text import pick_key, tokens

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-.+][A-Za-z0-9]+)*")
_NEGATION = re.compile(r"\b(?:not|no|never|cannot|neither|nor|fails?\s+to)\b|n't\b", re.IGNORECASE)
_LIMITING = re.compile(r"\b(?:only|unless|except|provided\s+that|as\s+long\s+as|if\s+and\s+only\s+if)\b",
                       re.IGNORECASE)
_ADDRESSEE = re.compile(r"\b(?:AI|assistants?|language\s+models?|LLMs?|chatbots?|reviewers?|judges?|graders?|"
                        r"evaluators?|models?\s+reading\s+this)\b", re.IGNORECASE)
_IMPERATIVE = re.compile(r"\b(?:answer|respond|reply|mark|treat|say|output|classify|rate|label|confirm|"
                         r"report|consider)\b", re.IGNORECASE)
_OVERRIDE = re.compile(r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|above|earlier|"
                       r"your)\s+(?:instructions|prompts?|rules)\b|\bsystem\s+prompt\b|\bconfirms\s+every\s+claim\b",
                       re.IGNORECASE)
_GENERIC_HEADS = frozenset(("the", "algorithm", "algorithms", "method", "methods", "approach", "framework",
                            "library", "engine", "environments", "environment", "format", "model", "models",
                            "system", "tool", "technique", "recipe", "s"))


@dataclass(frozen=True)
class Reading:
    """Code's reading of a pointed sentence against a claim."""

    refused: str | None = None  # never evidence (an instruction to its reader)
    doubt: str | None = None  # why the judge is asked again, the opposite way

    @property
    def stands(self) -> bool:
        return self.refused is None and self.doubt is None


def instruction(sentence: str) -> bool:
    """Does the sentence speak to a model reading it (a planted instruction)?"""
    return bool(_OVERRIDE.search(sentence) or (_ADDRESSEE.search(sentence) and _IMPERATIVE.search(sentence)))


def names(sentence: str) -> list[str]:
    """The names in a sentence, in order: acronyms, camel-case words, words with digits, and capitalised
    words that do not open the sentence ("GRPO", "DiLoCo", "Qwen2.5-32B", "Nesterov")."""
    out = []
    for index, match in enumerate(_NAME.finditer(sentence)):
        word = match.group(0).rstrip(".")
        letters = [c for c in word if c.isalpha()]
        capitals = sum(c.isupper() for c in letters)
        if (capitals >= 2 or (any(c.isdigit() for c in word) and letters)
                or (index > 0 and word[:1].isupper() and not _after_stop(sentence, match.start()))):
            out.append(word)
    return out


def _after_stop(sentence: str, position: int) -> bool:
    """Does the word at `position` open a sentence (nothing but space since a stop, or the start)?"""
    while position > 0 and sentence[position - 1].isspace():
        position -= 1
    return position == 0 or sentence[position - 1] in ".!?:\"'\u201c(["


def _initials(words: list[str]) -> str:
    return "".join(w[0] for w in words if w)


def names_pick(pick: str, sentence: str, claim: str = "") -> bool:
    """Is the pick named in the sentence — by its own words (generic head nouns such as "algorithm" aside; of
    those, the ones the claim's own sentence uses, when it uses any: "Meta's OpenEnv" is named by "OpenEnv"
    where the report says "OpenEnv"), by its acronym, or, for an acronym, by the words it stands for?"""
    own = [t for t in re.findall(r"[a-z0-9+]+", (pick_key(pick) or "").replace("+", " + "))
           if t not in _GENERIC_HEADS and t != "+"]
    said = set(re.findall(r"[a-z0-9]+", claim.lower()))
    own = [t for t in own if t in said] or own
    words = re.findall(r"[a-z0-9]+", sentence.lower())
    present = set(words)
    if own and all(t in present for t in own):
        return True
    if len(own) == 1 and len(own[0]) >= 2:  # an acronym: its expansion, initials in a row
        acronym = own[0]
        for start in range(len(words)):
            for width in (len(acronym), len(acronym) + 1, len(acronym) + 2):
                run = [w for w in words[start:start + width] if w not in ("of", "for", "and", "the", "to")]
                if _initials(run) == acronym and len(run) == len(acronym):
                    return True
    spelled = _initials(own)
    return len(own) >= 2 and len(spelled) >= 2 and spelled in present


SUBJECT_WORDS = 2  # a claim without a name is about its first content words ("span sampling", "citation file")


def subject_named(claim: str, pick: str | None, sentence: str) -> bool:
    """Does the sentence name what the claim is about: its pick; else the first name of its sentence; else,
    for a claim that names nothing, its first `SUBJECT_WORDS` content words?"""
    if pick:
        return names_pick(pick, sentence, claim)
    first = names(claim)[:1]
    if first:
        return names_pick(first[0], sentence)
    opening = tokens(claim)[:SUBJECT_WORDS]
    return bool(opening) and set(opening) <= set(tokens(sentence))


def _shares_what_is_said(claim: str, sentence: str) -> bool:
    """A content word or number of the claim besides its names, in the sentence."""
    named = {t for n in names(claim) for t in tokens(n)}
    said = set(tokens(claim)) - named
    return bool(said & set(tokens(sentence)))


def read(claim: str, pick: str | None, sentence: str, *, supports: bool) -> Reading:
    """Code's reading of the pointed `sentence` against the claim's own sentence (module docstring).
    `supports`: the judge's verdict (False: it said the sentence contradicts the claim)."""
    if instruction(sentence):
        return Reading(refused="it speaks to a model reading the page (an instruction planted in it), so it is "
                               "not evidence")
    if not subject_named(claim, pick, sentence):
        what = f"its pick ({pick})" if pick else "what it is about"
        return Reading(doubt=f"the sentence does not name {what}")
    if not _shares_what_is_said(claim, sentence):
        return Reading(doubt="the sentence names the subject but says nothing the claim says about it")
    if supports:
        if bool(_NEGATION.search(claim)) != bool(_NEGATION.search(sentence)):
            return Reading(doubt="one of the claim and the sentence is negated and the other is not")
        limit = _LIMITING.search(sentence)
        if limit and not _LIMITING.search(claim):
            return Reading(doubt=f"the sentence narrows it (“{limit.group(0)}”) where the claim does not")
    return Reading()
