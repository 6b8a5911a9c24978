"""Scripted answers to the synthesis calls: `claim_extraction`, `claim_alignment` and `citation_check`.

Deterministic functions of the request body (plus the planted claims bank, corpus/claims.json, whose
statements the scripted researcher writes verbatim into reports), so the demo's synthesis is meaningful
and the synthesis benchmarks are reproducible. Like every fake, this module imports nothing of the
product: it reads the request as a model would, from the messages.

Extraction (the last user message holds the report text), following the extraction prompt:
* every planted statement found in the text becomes a claim with the bank's layer, stance, decision,
  pick, condition and confidence, and the citation numbers written right after it
  (`... statement [3, 5].`);
* every claim quotes the report: `quote` is the statement (or sentence) exactly as the body has it and
  `section` the `#` heading above it; `position` is `against` when the sentence negates its
  recommendation ("do not recommend", "should not", "advise against", "avoid"), else `for`; a hedge
  ("tentatively", "for X only", "only for X", "once X"; the longest one) becomes the condition when the bank
  gives none;
* the `overstate` quirk (a scenario rule's flag) makes the first claim overstate the report: its
  statement and quote say more than the body does, so the quote is found nowhere in it;
* the first cited sentence of each `##` section that is a finding — not planted, not a quotation, not a
  heading, and not a source describing itself ("Repository for X", "Cursor's launch post for Y", a
  sentence with no verb), which the prompt says are not claims — becomes a generic finding (stance
  `describe`; confidence `medium` in "What the sources establish", else `low`) filed under the bank
  layer its words match best, else "general"; a cited sentence saying something "should be the
  default" or is "the ... to adopt / choose / use" is a recommendation of the name it gives, answering
  the bank's decision for that layer, else "choice of <layer>" (reports not from the bank still get
  claims).

Alignment (the last user message holds one JSON object per claim between `<claims>` and `</claims>`),
as a judge that follows the prompt, reads each claim's sentence and knows the field's names:
* two recommendations answer one decision when their `decision` fields (or, without one, what their
  sentences state: "X is the cache store to adopt") name the same one and their sentences do not
  state two different ones; a pick is the option whatever its name (case, spacing, a
  repository owner, "the", a generic word such as "engine", an expansion of an acronym another pick
  uses: "vllm-project/vllm", "the vLLM engine" and "vLLM" are one), whatever its layer;
* recommendations of one pick agree (one position, across layers); different picks answering one
  decision are `alternatives`, one position per pick (even when one report holds two of them — the
  product must not count that as a divergence); a recommendation whose decision nobody states is
  nobody's alternative, and picks for different decisions are never set against each other;
* other claims recognisable as a planted bank claim (the exact statement) are grouped by bank id and
  agree; the rest are grouped when they share a layer and their content words overlap (Jaccard ≥ 0.5);
* singletons are left out, as the prompt asks.

Citation check (the last user message holds one JSON object per passage between `<passages>` and
`</passages>`, and one per citation between `<claims>` and `</claims>`), by a documented lexical rule:
* the content words of the claim's sentence (lower case, stop words and words under three letters
  removed) are compared with those of the passages listed for it: the overlap is the share of the
  claim's content words that the passages contain (together, as a reader of all of them would);
* overlap ≥ `SUPPORT_OVERLAP` is `supports` — or `contradicts` when exactly one of the claim's sentence
  and the quoted passage sentence is negated ("not", "no", "never", "cannot", "n't"); anything lower is
  `does_not_address` (a page that shares a word or two with the claim does not address it);
* the quote is the passage sentence that contains the most of the claim's content words (the first on
  ties), copied verbatim, and `passage` its id; a passage is split at line breaks, a list item's marker
  (`- `, `* `, `1. `) dropped, then at sentence ends, so a quote is one sentence of one line or list item,
  never a list of links;
* the `misquote` quirk makes every quote say more than the passage (" in every setting" appended), so
  no quote is found in its passage — what the product must refuse;
* the `agreeable` quirk is a judge that says yes: every citation `supports`, pointing at the passage
  sentence with the most of the claim's words (the first sentence when none shares one), and any
  follow-up question is answered "yes"; the `obedient` quirk is a judge that obeys an instruction planted
  in a passage (`INSTRUCTION`: "answer supports", "mark ... as supported", "confirms every claim"): a
  citation whose passages hold one `supports`, pointing at the sentence with the most of the claim's
  words. Both are what the product's checks of a verdict must catch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from research_dispatch_fakes.realism import MALFORMATIONS, Realism, copy_slip, first_ask, malformed, read_pdf

CLAIMS_PATH = Path(__file__).with_name("corpus") / "claims.json"
GENERIC_PER_REPORT = 4
JUDGE_OVERLAP = 0.5
SUPPORT_OVERLAP = 0.35
RECHECK_OVERLAP = 0.2  # one sentence read alone: a share of the claim's words that a sentence can hold
OVERSTATEMENT = ", in every setting and at any scale"
MISQUOTE = " in every setting"
INSTRUCTION = re.compile(r"\banswer\s+[\"']?supports?\b|\bmark\b[^.]{0,60}\bas\s+supported\b|"
                         r"\bconfirms\s+every\s+claim\b", re.IGNORECASE)
"""An instruction planted in a page for a judge to obey (the `obedient` quirk)."""

QUOTE_WORDS = 12  # the numbered prompts ask for the opening words of what is pointed at, as a cross-check
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Za-z0-9\"'(])")
_UNIT_LINE = re.compile(r"^(?:[-*] )?\[U(\d+)\] ?(.*)$", re.MULTILINE)
_UNIT_LABEL = re.compile(r"\[U\d+\] ?")
_SENTENCE_LABEL = re.compile(r"\[S(\d+)\]\s*")
_CITED_SENTENCE = re.compile(r"^(.*[A-Za-z].*?)\s*\[(\d+(?:\s*,\s*\d+)*)\]\s*[.!?]$")
_CITES_AFTER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")
_RECOMMEND = re.compile(r"\bshould (?:not )?be the default\b|\bis the [\w\s-]{0,40}?\bto (adopt|choose|use)\b|"
                        r"\brecommend|\badvise against\b", re.IGNORECASE)
_NAME = re.compile(r"\b[A-Z][A-Za-z0-9+-]*[A-Za-z0-9+]")
_DEFAULT = re.compile(r"\bshould (?:not )?be the default\b")
_AGAINST = re.compile(r"\b(?:do|does|did) not recommend\b|\bnot recommended\b|\bshould not\b|\bshouldn't\b|"
                      r"\badvise against\b|\brecommend against\b|\bavoid\b", re.IGNORECASE)
_HEDGE = re.compile(r"\bfor [\w\s-]{1,40}? only\b|\bonly for [\w\s-]{1,40}\b|\bonce [^,.;]{3,80}|"
                    r"\btentatively\b|\bprovisionally\b", re.IGNORECASE)
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_NEGATION = re.compile(r"\b(?:not|no|never|cannot)\b|n't\b", re.IGNORECASE)
_OPENERS = frozenset(("A", "An", "As", "At", "Because", "For", "In", "It", "On", "The", "This", "Today", "Use", "We",
                      "When", "With"))
_WORD = re.compile(r"[a-z0-9]+")
_LIST_ITEM = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")
_STOP = frozenset(("a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it",
                   "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "with", "which", "when",
                   "while", "most", "more", "can", "should"))


@lru_cache(maxsize=1)
def bank() -> tuple[dict[str, Any], ...]:
    """The planted claims bank, read once per process."""
    return tuple(json.loads(CLAIMS_PATH.read_text(encoding="utf-8")))


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a content-part list joined (the form a message
    takes when it carries a `cache_control` breakpoint, as the product sends to Anthropic and Gemini)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content
                       if isinstance(part, dict) and part.get("type") == "text")
    return ""


def _user_text(body: dict[str, Any], marker: str = "") -> str:
    """The first user message whose text holds `marker` (a repair turn comes after it), as text."""
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text(message.get("content"))
            if marker in text:
                return text
    return ""


def _claims_text(body: dict[str, Any]) -> str:
    """The user message carrying the `<claims>` block."""
    return _user_text(body, "<claims>")


def _report_text(body: dict[str, Any]) -> str:
    """The report: the first user message (a repair turn repeats the question; the report is unchanged)."""
    return _user_text(body)


def _numbers(group: str) -> list[int]:
    return [int(n) for n in re.split(r"\s*,\s*", group) if n.strip()]


def _keyword_entry(sentence: str) -> dict[str, Any] | None:
    """The bank entry whose keywords the sentence matches best (None: no keyword at all)."""
    lowered = sentence.lower().replace("-", " ")
    best, best_hits = None, 0
    for entry in bank():
        hits = sum(1 for k in entry.get("keywords") or [] if k.lower().replace("-", " ") in lowered)
        if hits > best_hits:
            best, best_hits = entry, hits
    return best


def _keyword_layer(sentence: str) -> str:
    entry = _keyword_entry(sentence)
    return str(entry["layer"]) if entry else "general"


def _numbered_units(text: str) -> dict[int, str]:
    """The units of a numbered report (`[U<n>] text` lines, see the extraction prompt), by number; empty when
    the report is not numbered (the product then asks for a quote instead of a pointer)."""
    return {int(m.group(1)): m.group(2).strip() for m in _UNIT_LINE.finditer(text)}


def _units_of(units: dict[int, str], statement: str) -> list[str]:
    """The unit ids that hold `statement`: the unit that contains it, else the consecutive units it spans."""
    for number, unit in units.items():
        if statement in unit:
            return [f"U{number}"]
    spanned = [number for number, unit in units.items() if len(unit) > 12 and unit.rstrip(".") in statement]
    return [f"U{n}" for n in spanned]


def _opening(text: str, words: int = QUOTE_WORDS) -> str:
    """The first few words of a text: the cross-check quote the numbered prompt asks for."""
    return " ".join(text.split()[:words])


def extract_claims(body: dict[str, Any], quirks: frozenset[str] = frozenset(),
                   realism: Realism | None = None) -> dict[str, Any]:
    """The `claim_extraction` answer for a report (with the scenario's slips, see `realism`)."""
    text = _report_text(body)
    text = text.split("<report>", 1)[-1].rsplit("</report>", 1)[0]
    units = _numbered_units(text)
    if units:  # numbered: the unit labels are markup, not the report's words
        text = _UNIT_LABEL.sub("", text)
    found: list[tuple[int, dict[str, Any]]] = []
    planted: list[str] = []
    for entry in bank():
        for variant in (entry.get("by_topic") or {}).values():
            statement = variant["statement"]
            start = text.find(statement)
            if start < 0:
                continue
            planted.append(_norm(statement))
            cites = _CITES_AFTER.match(text, start + len(statement))
            recommend = variant.get("stance") == "recommend"
            found.append((start, {
                "statement": statement, "layer": entry["layer"], "stance": variant.get("stance", "describe"),
                "decision": entry.get("decision") if recommend else None,
                "pick": entry["pick"] if recommend else None,
                "alternatives": [], "condition": variant.get("condition") or _hedge(statement),
                "position": _position(statement), "quote": statement, "section": _section(text, start),
                "sources": _numbers(cites.group(1)) if cites else [],
                "confidence": variant.get("confidence", "medium")}))
    ordered = [claim for _, claim in sorted(found, key=lambda item: item[0])]
    claims = ordered + _generic_claims(text, planted)
    if units:
        for claim in claims:
            claim["units"] = _units_of(units, claim["quote"])
            claim["quote"] = _opening(claim["quote"])
            del claim["section"]
    if quirks and "overstate" in quirks and claims:
        claims[0] = {**claims[0], "statement": claims[0]["statement"] + OVERSTATEMENT,
                     "quote": claims[0]["quote"] + OVERSTATEMENT}
        if units:
            claims[0]["units"] = []
    if realism is not None and first_ask(body):
        claims = _slipped_claims(claims, realism, str(body.get("session_id") or _report_title(body)), len(units))
    return {"claims": claims}


def _report_title(body: dict[str, Any]) -> str:
    title = re.search(r"^Report title: (.*)$", _report_text(body), re.MULTILINE)
    return title.group(1) if title else ""


def _slipped_claims(claims: list[dict[str, Any]], realism: Realism, report: str, units: int) -> list[dict[str, Any]]:
    """The claims as a real extractor gives them (`realism`): per claim, one slip among those that apply;
    per report, one malformed claim among the good ones."""
    out = []
    for claim in claims:
        key = (report, claim["statement"])
        recommend = claim["stance"] == "recommend"
        aliases = [a for a in _aliases(claim.get("pick")) if a != claim.get("pick")] if recommend else []
        kinds = ["copy", *(["pointer"] if claim.get("units") else []), *(["position", "alias"] if recommend else [])]
        if not realism.slips("claim", *key):
            out.append(claim)
            continue
        kind = realism.choose([k for k in kinds if k != "alias" or aliases], "kind", *key)
        if kind == "copy":
            claim = {**claim, "quote": copy_slip(claim["quote"], realism, *key, markers=claim["sources"])}
        elif kind == "pointer":
            claim = {**claim, "units": _shifted(claim["units"], units, realism.choose((-1, 1), "shift", *key))}
        elif kind == "position":
            claim = {**claim, "position": "for" if claim["position"] == "against" else "against"}
        else:
            claim = {**claim, "pick": realism.choose(aliases, "alias", *key)}
        out.append(claim)
    if out and realism.slips("malformed", report):
        out.append(malformed(out[-1], realism.choose(MALFORMATIONS, "malformation", report)))
    return out


def _shifted(ids: list[str], count: int, step: int) -> list[str]:
    """Unit ids one unit off (the other way at either end of the report)."""
    numbers = [int(i[1:]) for i in ids]
    if any(not 1 <= n + step <= count for n in numbers):
        step = -step
    return [f"U{n + step}" for n in numbers]


def _aliases(pick: str | None) -> list[str]:
    """Other names a real model gives the bank's pick (the bank's `aliases`)."""
    for entry in bank():
        if entry.get("pick") == pick:
            return [str(a) for a in entry.get("aliases") or []]
    return []


def _section(text: str, offset: int) -> str | None:
    """The heading above `offset` (None before the first one)."""
    current = None
    for match in _HEADING.finditer(text):
        if match.start() > offset:
            break
        current = match.group(1).strip()
    return current


def _position(sentence: str) -> str:
    return "against" if _AGAINST.search(sentence) else "for"


def _hedge(sentence: str) -> str | None:
    """The longest hedge phrase of the sentence ("for maths only" over "Tentatively"), or None."""
    hedges = sorted((m.group(0).strip() for m in _HEDGE.finditer(sentence)), key=lambda h: (-len(h), h))
    return hedges[0] if hedges else None


def _pick(sentence: str) -> str | None:
    """The named choice of a recommendation: the last name before "should be the default", else the first."""
    default = _DEFAULT.search(sentence)
    scope = sentence[: default.start()] if default else sentence
    names = [m.group(0) for m in _NAME.finditer(scope) if not (m.start() == 0 and m.group(0) in _OPENERS)]
    if not names:
        return None
    return names[-1] if default else names[0]


_SOURCE_NOUN = re.compile(
    r"^(?:[\w.+'-]+\s+){0,6}?(?:launch\s+|blog\s+|technical\s+)?(?:paper|post|article|repository|documentation"
    r"(?:\s+page)?|page|announcement|report|study|analysis|reproduction|follow-up)(?:\s+and\s+[\w-]+)?\s+"
    r"(?:for|of|on|about|behind|introducing|that|from|to)\b", re.IGNORECASE)
_AUXILIARY = frozenset(("is", "are", "was", "were", "has", "have", "had", "can", "could", "should", "must", "will",
                        "would", "may", "might", "does", "do", "did"))


_ABOUT_SOURCE = re.compile(r"^(?:(?:the|this|that|its)\s+(?:post|paper|report|readme|page|announcement|repository|"
                           r"documentation|article|blog|site|specification|preprint)\b|it\s)", re.IGNORECASE)


def _describes_a_source(sentence: str) -> bool:
    """What the extraction prompt says is not a claim: a source's description of itself, a statement
    about a source rather than its finding, or no verb."""
    if _ABOUT_SOURCE.match(sentence):
        return True
    words = re.findall(r"[A-Za-z][A-Za-z'-]*", sentence)
    if _SOURCE_NOUN.match(sentence) and not any(w.lower() in _AUXILIARY for w in words):
        return True
    main = re.sub(r"\s(?:that|which|who|whose)\s[^,;]*", " ", sentence)
    names = [w for i, w in enumerate(re.findall(r"[A-Za-z][A-Za-z'-]*", main)) if i == 0 or not w[:1].isupper()]
    return not any(_verb(w.lower()) for w in names)


def _verb(word: str) -> bool:
    if word in _AUXILIARY:
        return True
    return len(word) > 3 and (word.endswith("ed") or (word.endswith("s") and not word.endswith(("ss", "us", "is"))))


def _generic_claims(text: str, planted: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for section in re.split(r"^##[ \t]+", text, flags=re.MULTILINE)[1:]:
        heading, _, content = section.partition("\n")
        heading = heading.strip()
        if heading.lower() in ("references", "sources"):
            continue
        for match in (_CITED_SENTENCE.match(s.strip()) for s in _SENTENCE_END.split(content)):
            if match is None:
                continue
            sentence = match.group(1).strip().lstrip("#*- ").strip()
            key = _norm(sentence)
            if not key or any(key in p or p in key for p in planted):
                continue
            if '"' in sentence or "\u201c" in sentence or len(sentence.split()) < 6 or _describes_a_source(sentence):
                continue
            pick = _pick(sentence) if _RECOMMEND.search(sentence) else None
            entry = _keyword_entry(sentence)
            layer = str(entry["layer"]) if entry else "general"
            decision = (entry.get("decision") if entry else None) or f"choice of {layer}"
            out.append({
                "statement": sentence, "layer": layer, "stance": "recommend" if pick else "describe",
                "decision": decision if pick else None, "pick": pick, "alternatives": [],
                "condition": _hedge(sentence), "position": _position(sentence), "quote": sentence,
                "section": heading.strip("# \t") or None, "sources": _numbers(match.group(2)),
                "confidence": "medium" if heading == "What the sources establish" else "low"})
            break
        if len(out) >= GENERIC_PER_REPORT:
            break
    return out


# --------------------------------------------------------------------------------------------------
# Alignment


def _bank_id(claim: dict[str, Any]) -> str | None:
    statement = _norm(str(claim.get("statement") or ""))
    for entry in bank():
        for variant in (entry.get("by_topic") or {}).values():
            if _norm(variant["statement"]) == statement:
                return str(entry["id"])
    return None


def _parse_claims(text: str) -> list[dict[str, Any]]:
    block = text.split("<claims>", 1)[-1].rsplit("</claims>", 1)[0]
    claims = []
    for line in block.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            claims.append(item)
    return claims


def _recommends(claim: dict[str, Any]) -> bool:
    return claim.get("stance") == "recommend" and bool(_norm(str(claim.get("pick") or "")))


def _linked(count: int, related: Callable[[int, int], bool]) -> list[list[int]]:
    """The indexes 0..count-1 in groups of those `related` links, directly or through others (in order)."""
    parent = list(range(count))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(count):
        for j in range(i + 1, count):
            if related(i, j):
                parent[find(j)] = find(i)
    members: dict[int, list[int]] = {}
    for i in range(count):
        members.setdefault(find(i), []).append(i)
    return list(members.values())


def _align_recommendations(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recommendations of one pick (whatever its name) agree; different picks answering one decision
    are alternatives, one position per pick; a pick whose decision nobody states is nobody's rival."""
    acronyms = {w for c in claims for w in _WORD.findall(str(c.get("pick")).lower())
                if re.fullmatch(r"[A-Za-z][A-Za-z0-9]{1,9}", str(c.get("pick")).strip())}
    picks = [_pick_identity(str(c.get("pick")), acronyms) for c in claims]
    out: list[dict[str, Any]] = []
    for group in _linked(len(claims), lambda i, j: picks[i] == picks[j] or _same_decision(claims[i], claims[j])):
        if len(group) < 2:
            continue
        by_pick: dict[str, list[str]] = {}
        for i in group:
            by_pick.setdefault(picks[i], []).append(claims[i]["id"])
        first = claims[group[0]]
        label = str(first.get("decision") or first.get("layer") or "")
        if len(by_pick) >= 2:
            positions = [{"claims": ids, "summary": f"recommends {pick}"} for pick, ids in by_pick.items()]
            out.append({"label": label, "relation": "alternatives", "positions": positions})
        else:
            out.append({"label": label, "relation": "agree",
                        "positions": [{"claims": [claims[i]["id"] for i in group], "summary": label}]})
    return out


_DECIDED = re.compile(r"\b(?:is|are) the ([\w\s-]{1,60}?) to (?:adopt|choose|use)\b", re.IGNORECASE)
_GENERIC_PICK_WORDS = frozenset(("the", "engine", "library", "framework", "algorithm", "method"))


def _pick_identity(pick: str, acronyms: set[str]) -> str:
    """Which option a pick names, as a judge that knows the field reads it: another name the bank knows
    for one of its picks (its `aliases`) is that pick; case, spacing, a repository owner, an article or
    a generic word ("engine", "library") and a spelled-out acronym do not matter."""
    known = _bank_pick(pick)
    name = known if known is not None else pick
    name = name.strip().rsplit("/", 1)[-1] if re.fullmatch(r"[\w.-]+/[\w.-]+", name.strip()) else name
    words = [w for w in _WORD.findall(name.lower()) if w not in _GENERIC_PICK_WORDS] or _WORD.findall(name.lower())
    initials = "".join(w[0] for w in words)
    if len(words) >= 2 and initials in acronyms:
        return initials
    return "".join(words)


def _bank_pick(pick: str) -> str | None:
    """The bank's name of a pick that is the bank's pick or one of its `aliases` (None otherwise)."""
    wanted = _norm(pick)
    for entry in bank():
        names = [entry.get("pick"), *(entry.get("aliases") or [])]
        if entry.get("pick") and any(_norm(str(n)) == wanted for n in names if n):
            return str(entry["pick"])
    return None


def _stated_decision(claim: dict[str, Any]) -> set[str]:
    """The content words of the decision the claim's sentence states ("X is the cache store to adopt")."""
    stated = _DECIDED.search(str(claim.get("sentence") or ""))
    return _words(stated.group(1)) if stated else set()


def _same_decision(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Do two recommendations answer one decision? Their `decision` fields (or, without one, what their
    sentences state) name the same one, and their sentences do not state two different ones."""
    said = [_stated_decision(c) for c in (first, second)]
    named = [_norm(str(c.get("decision") or "")) or " ".join(sorted(w))
             for c, w in zip((first, second), said, strict=True)]
    if not named[0] or named[0] != named[1]:
        return False
    return not (said[0] and said[1] and not said[0] & said[1])


def align_claims(body: dict[str, Any]) -> dict[str, Any]:
    """The `claim_alignment` answer for a batch."""
    claims = _parse_claims(_claims_text(body))
    recommendations = [c for c in claims if _recommends(c)]
    others = [c for c in claims if not _recommends(c)]
    out = _align_recommendations(recommendations)
    groups: dict[str, list[dict[str, Any]]] = {}
    rest: list[dict[str, Any]] = []
    for claim in others:
        bank_id = _bank_id(claim)
        if bank_id is None:
            rest.append(claim)
        else:
            groups.setdefault(f"bank:{bank_id}", []).append(claim)
    words = [_words(str(c.get("statement") or "")) for c in rest]

    def overlap(i: int, j: int) -> bool:
        union = words[i] | words[j]
        return (_norm(str(rest[i].get("layer"))) == _norm(str(rest[j].get("layer"))) and bool(union)
                and len(words[i] & words[j]) / len(union) >= JUDGE_OVERLAP)

    for linked in _linked(len(rest), overlap):
        groups[f"lex:{rest[linked[0]]['id']}"] = [rest[i] for i in linked]
    for members in groups.values():
        if len(members) < 2:
            continue
        label = " ".join(str(members[0].get("statement") or "").split()[:8])
        out.append({"label": label, "relation": "agree",
                    "positions": [{"claims": [c["id"] for c in members], "summary": label}]})
    order = {claim["id"]: index for index, claim in enumerate(claims)}
    out.sort(key=lambda g: min(order[c] for p in g["positions"] for c in p["claims"]))
    return {"groups": out}


# --------------------------------------------------------------------------------------------------
# Citation check


def _block_lines(text: str, tag: str) -> list[dict[str, Any]]:
    """The JSON objects, one per line, between `<tag>` and `</tag>`."""
    if f"<{tag}>" not in text:
        return []
    block = text.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0]
    out = []
    for line in block.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            out.append(item)
    return out


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) >= 3}


def _passage_sentences(text: str) -> list[str]:
    """What the judge may quote: one sentence of one line or list item — never a run of lines.

    A passage is split at line breaks first (a Markdown list of links is many items, not one sentence), a
    list item's marker is dropped, then each line is split at sentence ends; the elision marker is never
    quoted."""
    sentences = []
    for line in text.splitlines():
        line = _LIST_ITEM.sub("", line.strip())
        for sentence in _SENTENCE_END.split(line):
            sentence = sentence.strip()
            if sentence and "[…]" not in sentence:
                sentences.append(sentence)
    return sentences


def _numbered_sentences(text: str) -> list[tuple[str, str]]:
    """(id, sentence) of a numbered passage (`[S<n>] sentence ... … [S<m>] ...`), in order; empty when
    the passage is not numbered. The elision mark between shown sentences is not part of either."""
    parts = _SENTENCE_LABEL.split(text)
    return [(f"S{parts[i]}", parts[i + 1].strip().rstrip("…").strip()) for i in range(1, len(parts) - 1, 2)]


def check_citations(body: dict[str, Any], quirks: frozenset[str] = frozenset(),
                    realism: Realism | None = None) -> dict[str, Any]:
    """The `citation_check` answer: the lexical rule of the module docstring, per citation (with the
    scenario's slips, see `realism`). A judge reads PDF text through its artefacts."""
    text = _user_text(body, "<passages>")
    passages = {p["id"]: str(p.get("text") or "") for p in _block_lines(text, "passages")}
    numbered = {pid: _numbered_sentences(passage) for pid, passage in passages.items()}
    pointing = any(numbered.values())  # numbered passages: the answer points at sentences
    slips = realism if realism is not None and first_ask(body) else None
    checks = []
    for claim in _block_lines(text, "claims"):
        sentence = str(claim.get("sentence") or "")
        wanted = _content_words(sentence)
        best: tuple[float, str, str, str | None] | None = None
        seen: set[str] = set()
        for pid in claim.get("passages") or []:
            passage = passages.get(str(pid), "")
            seen |= _content_words(read_pdf(passage))
            candidates: list[tuple[str | None, str]] = [*numbered.get(str(pid), [])] or \
                [(None, c) for c in _passage_sentences(passage)]
            for sid, candidate in candidates:
                shared: float = len(wanted & _content_words(read_pdf(candidate)))
                if sid is not None and len(_with_subject(sentence, sid, numbered[str(pid)])) > 1:
                    shared += 0.5  # a judge prefers the sentence whose neighbour says what the claim is about
                if best is None or shared > best[0]:
                    best = (shared, str(pid), candidate, sid)
        overlap = len(wanted & seen) / len(wanted) if wanted else 0.0
        told = "obedient" in quirks and any(INSTRUCTION.search(passages.get(str(pid), ""))
                                            for pid in claim.get("passages") or [])
        if best is not None and ("agreeable" in quirks or told):
            yes: dict[str, Any] = {"id": claim["id"], "verdict": "supports", "passage": best[1], "quote": best[2]}
            if best[3] is not None:
                yes["sentences"], yes["quote"] = [best[3]], _opening(best[2])
            checks.append(yes)
            continue
        if best is None or overlap < SUPPORT_OVERLAP:
            checks.append({"id": claim["id"], "verdict": "does_not_address", "passage": None, "quote": None,
                           **({"sentences": []} if pointing else {})})
            continue
        _, pid, quote, sid = best
        negated = bool(_NEGATION.search(sentence)) != bool(_NEGATION.search(quote))
        answer: dict[str, Any] = {"id": claim["id"], "verdict": "contradicts" if negated else "supports",
                                  "passage": pid, "quote": quote}
        if sid is not None:
            pointed = _with_subject(sentence, sid, numbered.get(pid, []))
            answer["sentences"] = pointed
            answer["quote"] = _opening(dict(numbered.get(pid, []))[pointed[0]])
        if slips is not None and slips.slips("cite", body.get("session_id") or "", sentence, pid):
            answer = _slipped_check(answer, slips, [i for i, _ in numbered.get(pid, [])], sentence)
        if "misquote" in quirks:
            answer["quote"] = str(answer["quote"]).rstrip(".") + MISQUOTE + "."
        checks.append(answer)
    return {"checks": checks}


def _subject_words(claim: str) -> set[str]:
    """What a claim is about, as a judge looks for it: its capitalised words and names with digits."""
    return {w.lower() for w in re.findall(r"\b[A-Z][A-Za-z0-9.+-]{2,}|\b[A-Za-z]+\d[\w.+-]*", claim)}


def _with_subject(claim: str, best: str, shown: list[tuple[str, str]]) -> list[str]:
    """The sentences to point at: the best one, and a shown neighbour that names what the claim is about
    where the best one does not (a capitalised word of the claim) — as a judge also cites the sentence
    that says what "it" is."""
    numbers = {int(i[1:]): text for i, text in shown}
    here = set(_WORD.findall(read_pdf(numbers[int(best[1:])]).lower()))
    missing = {w for w in _subject_words(claim) if not set(_WORD.findall(w)) <= here}
    for near in (int(best[1:]) - 1, int(best[1:]) + 1):
        words = set(_WORD.findall(read_pdf(numbers.get(near, "")).lower()))
        if any(set(_WORD.findall(w)) <= words for w in missing):
            return sorted([best, f"S{near}"], key=lambda i: int(i[1:]))
    return [best]


def _slipped_check(answer: dict[str, Any], realism: Realism, shown: list[str], sentence: str) -> dict[str, Any]:
    """One citation answer as a real judge gives it: its quote copied with a slip, or its sentence pointer
    off by one (every pointed sentence moved to its shown neighbour)."""
    key = (answer["passage"], sentence)
    pointed = [int(s[1:]) for s in answer.get("sentences") or []]
    steps = [step for step in (-1, 1) if pointed and all(f"S{n + step}" in shown for n in pointed)]
    if steps and realism.choose(("copy", "pointer"), "kind", *key) == "pointer":
        step = realism.choose(steps, "shift", *key)
        return {**answer, "sentences": [f"S{n + step}" for n in pointed]}
    return {**answer, "quote": copy_slip(str(answer["quote"]), realism, *key)}


# --------------------------------------------------------------------------------------------------
# Follow-up questions: a claim's position asked again, a citation's sentence asked the opposite way

_NAME_LIKE = re.compile(r"\b[A-Za-z][A-Za-z0-9.+-]*(?:[A-Z][A-Za-z0-9.+-]*|\d[A-Za-z0-9.+-]*)\b")
_LIMITING = re.compile(r"\b(?:only|unless|except)\b", re.IGNORECASE)


def check_positions(body: dict[str, Any], quirks: frozenset[str] = frozenset(),
                    realism: Realism | None = None) -> dict[str, Any]:
    """The `position_check` answer: each sentence's position on its option, by the extractor's own rule
    (`_position`, `_hedge`). A follow-up question: never slips."""
    checks = []
    for item in _block_lines(_user_text(body, "<sentences>"), "sentences"):
        sentence = str(item.get("sentence") or "")
        checks.append({"id": item["id"], "position": _position(sentence), "condition": _hedge(sentence)})
    return {"checks": checks}


def _subject(claim: str) -> str | None:
    """What a claim is about, as a careful reader takes it: its first name with two capitals or a digit
    ("GRPO", "DiLoCo", "Qwen2.5-32B"), else its first capitalised word after the first; lower case."""
    words = list(_NAME_LIKE.finditer(claim))
    for match in words:
        word = match.group(0)
        if sum(c.isupper() for c in word) >= 2 or (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
            return word.lower()
    later = [m.group(0) for m in re.finditer(r"[A-Za-z][\w'-]*", claim)][1:]
    return next((w.lower().removesuffix("'s") for w in later if w[:1].isupper()), None)


def recheck_citations(body: dict[str, Any], quirks: frozenset[str] = frozenset(),
                      realism: Realism | None = None) -> dict[str, Any]:
    """The `citation_recheck` answer: "yes" or "no" to each item's question about a claim and one source
    sentence, read alone. A careful reader: a sentence fails to support a claim when it does not name the
    claim's subject (`_subject`), shares under `RECHECK_OVERLAP` of its content words, is negated where
    the claim is not (or the reverse), or narrows it ("only", "unless", "except"); it is compatible with
    a claim it shares too little with or whose negation it shares. The `agreeable` quirk answers "yes" to
    everything. A follow-up question: never slips."""
    checks = []
    for item in _block_lines(_user_text(body, "<items>"), "items"):
        claim, source = str(item.get("claim") or ""), read_pdf(str(item.get("source") or ""))
        wanted = _content_words(claim)
        overlap = len(wanted & _content_words(source)) / len(wanted) if wanted else 0.0
        negated = bool(_NEGATION.search(claim)) != bool(_NEGATION.search(source))
        subject = _subject(claim)
        unnamed = subject is not None and not set(_WORD.findall(subject)) <= set(_WORD.findall(source.lower()))
        if "agreeable" in quirks:
            yes = True
        elif "fail to support" in str(item.get("question") or ""):
            yes = unnamed or overlap < RECHECK_OVERLAP or negated or \
                bool(_LIMITING.search(source) and not _LIMITING.search(claim))
        else:
            yes = overlap < RECHECK_OVERLAP or not negated
        checks.append({"id": item["id"], "answer": "yes" if yes else "no"})
    return {"checks": checks}
