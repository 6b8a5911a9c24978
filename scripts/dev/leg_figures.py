"""The research leg's quality figures (issue 32), computed from what a leg leaves behind.

One implementation for two callers: the benchmark (`scripts/dev/bench_leg.py`, on the offline fakes) and
the maintainers' real-model check (`scripts/dev/real_check.py`, on reports written by a real model). Each
figure is a pure function of a `LegFacts` — the report's body and sources, its evidence file, and the text
of the request that produced the report — so both callers measure exactly the same thing.

* **Evidence at write**: of the passage text the leg was shown for the sources its report cites (its
  evidence file), the share present verbatim in the request that produced the report. A loop that writes
  in its research conversation after compacting old tool results shows the writer stubs; a write from the
  dossier shows it every passage.
* **Snippet-only share**: cited sources never read in full (their only passage a search snippet) ÷ cited
  sources.
* **Brief-item coverage**: the brief's sub-questions (`brief_items`, split by code from the topic's scope,
  independently of any plan a model made) with a cited sentence of the report that carries at least half
  of the item's content words.
* **Recommendation structure**: the lines of the report's `## Recommendations` section that parse as a
  decision (decision, pick, alternatives, a citation, when to switch and confidence: the conversation
  contract's `RECOMMENDATION_RE`) or as a rejected option (`NOT_RECOMMENDED_RE`, with a citation) ÷ the
  section's lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_dispatch.leg.contract import NOT_RECOMMENDED_RE, RECOMMENDATION_RE
from research_dispatch.leg.evidence import parse_evidence

READ_TOOLS = ("web_extract", "mcp:")  # a passage from one of these is a page read in full
_CITATION = re.compile(r"\[(?:S?\d+)(?:\s*,\s*S?\d+)*\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*])")
_WORD = re.compile(r"[a-z][a-z0-9.+-]*[a-z0-9+]|[a-z]")
_STOP = frozenset(re.findall(r"[a-z]+", """
a an and are as at be by can could did do does each for from has have how in into is it its
of on or that the their them these this those to was were what when where which while who why will with within
would about any also both other than then there such only more most much what whether which whom
answer find explain state say list cover decide describe known public publicly particular precise exact each
"""))


@dataclass(frozen=True)
class Passage:
    """One evidence line: a text the researcher was shown for a source."""

    url: str
    tool: str
    text: str


@dataclass(frozen=True)
class LegFacts:
    """What one leg left: the report (body, cited sources), its evidence, and the writing request."""

    stem: str
    topic: str
    scope: str
    body: str
    cited_urls: tuple[str, ...]
    evidence: tuple[Passage, ...]
    write_request: str | None  # every message text of the call that produced the report (None: unknown)
    status: str = ""
    reasons: tuple[str, ...] = ()
    words: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    cost_usd: float = 0.0  # the model calls'
    search_cost_usd: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def request_text(messages: Iterable[dict[str, Any]]) -> str:
    """Every text of a request's messages, joined (content strings and text parts)."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


# ----------------------------------------------------------------------------------------------
# evidence


def evidence_at_write(facts: LegFacts) -> tuple[int, int]:
    """(characters of the cited sources' shown passages present in the writing request, all of them)."""
    cited = set(facts.cited_urls)
    passages = [p for p in facts.evidence if p.url in cited]
    total = sum(len(p.text) for p in passages)
    if facts.write_request is None:
        return 0, total
    return sum(len(p.text) for p in passages if p.text in facts.write_request), total


def snippet_only(facts: LegFacts) -> tuple[int, int]:
    """(cited sources never read in full, cited sources)."""
    read = {p.url for p in facts.evidence if p.tool.startswith(READ_TOOLS)}
    return sum(1 for url in facts.cited_urls if url not in read), len(facts.cited_urls)


# ----------------------------------------------------------------------------------------------
# brief items


def _top_level_split(text: str, separators: str) -> list[str]:
    """`text` split at any of `separators` outside parentheses."""
    pieces, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char in separators and depth <= 0:
            pieces.append(current)
            current = ""
        else:
            current += char
    pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]


_ASKING = re.compile(r"^(conclude|end|decide|judge|compare|assess|survey|reconstruct|cover|state|say|list)\b",
                     re.IGNORECASE)


def brief_items(scope: str) -> list[str]:
    """The brief's sub-questions, split by code: the clauses of a list after a colon (`Find: a; b; c`, or
    comma-separated when there is no semicolon), and every sentence that asks for something without one
    (`Conclude with …`, `Compare …`). Deterministic and independent of any model's plan."""
    text = re.sub(r"\s*\(\s*https?://[^)\s]*\s*\)", "", scope)
    text = " ".join(re.sub(r"https?://[^\s)]+", "", text).split())
    items: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text):
        sentence = sentence.strip().rstrip(".")
        head, colon, rest = sentence.partition(":")
        if colon and rest.strip() and len(head.split()) <= 12 and not _ASKING.match(head):
            clauses = _top_level_split(rest, ";")
            if len(clauses) == 1:
                clauses = _top_level_split(re.sub(r",?\s+and\s+(?=(how|what|which|the|whether)\b)", ", ", rest), ",")
            items += [re.sub(r"^(and|or)\s+", "", c) for c in clauses]
        elif _ASKING.match(sentence):
            items.append(sentence)
    return [item for item in items if len(content_words(item)) >= 2]


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def cited_sentences(body: str) -> list[str]:
    """The report's sentences that carry a citation marker (`[3]`, `[1, 4]`, or `[S3]` in a draft)."""
    out: list[str] = []
    for line in body.splitlines():
        if line.lstrip().startswith("#"):
            continue
        out += [s for s in _SENTENCE.split(line) if _CITATION.search(s)]
    return out


def covered(items: Sequence[str], body: str) -> list[bool]:
    """Per item: does some cited sentence carry at least half (and at least two) of its content words?"""
    sentences = [content_words(s) for s in cited_sentences(body)]
    out = []
    for item in items:
        words = content_words(item)
        need = max(2, (len(words) + 1) // 2) if len(words) >= 2 else len(words)
        out.append(any(len(words & s) >= need for s in sentences))
    return out


# ----------------------------------------------------------------------------------------------
# recommendations


def section(body: str, name: str) -> str:
    """The text of the `## <name>` section (to the next `#`/`##` heading), '' when there is none."""
    match = re.search(rf"^##\s+{re.escape(name)}\s*$(.*?)(?=^#{{1,2}}\s|\Z)", body, re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def recommendation_units(body: str) -> list[str]:
    """The Recommendations section's lines: one per list item or paragraph line (a wrapped list item's
    continuation joins its item)."""
    units: list[str] = []
    for line in section(body, "Recommendations").splitlines():
        if not line.strip():
            continue
        if units and line.startswith((" ", "\t")) and not re.match(r"\s*([-*+]|\d+[.)])\s", line):
            units[-1] += " " + line.strip()
        else:
            units.append(line.strip())
    return units


@dataclass(frozen=True)
class Recommendation:
    kind: str  # "decision" | "rejected"
    fields: dict[str, str]


def parse_recommendation(unit: str) -> Recommendation | None:
    """A decision (decision, pick, alternatives, condition, confidence, and a citation in its evidence) or
    a rejected option (option, decision, a cited reason); None when the line is neither."""
    decision = RECOMMENDATION_RE.match(unit)
    if decision is not None and _CITATION.search(decision.group("evidence")):
        return Recommendation("decision", {k: v for k, v in decision.groupdict().items() if v})
    rejected = NOT_RECOMMENDED_RE.match(unit)
    if rejected is not None and _CITATION.search(rejected.group("evidence")):
        return Recommendation("rejected", {k: v for k, v in rejected.groupdict().items() if v})
    return None


def recommendation_structure(body: str) -> tuple[int, int]:
    """(lines of the Recommendations section that parse, lines)."""
    units = recommendation_units(body)
    return sum(1 for unit in units if parse_recommendation(unit) is not None), len(units)


def recommend_claims_structured(claims: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """(extracted recommend-claims with a decision and a condition, extracted recommend-claims) of a
    synthesis ledger's `claims`."""
    recommend = [c for c in claims if c.get("stance") == "recommend"]
    return sum(1 for c in recommend if c.get("decision") and c.get("condition")), len(recommend)


# ----------------------------------------------------------------------------------------------
# reading a leg's files (the real-model check; the bench reads the fake gateway's log instead)


def read_evidence(path: Path) -> tuple[Passage, ...]:
    """A leg's evidence file through the product's own parser of the format (`leg/evidence.parse_evidence`)."""
    if not path.is_file():
        return ()
    return tuple(Passage(line.url, line.tool, line.text) for line in parse_evidence(path.read_text(encoding="utf-8")))


def write_request_from_trace(path: Path) -> str | None:
    """The writing request of a leg from its trace (`build/traces/<stem>.jsonl`): the messages of its last
    `write` event. None for a trace without one (a leg of a version that wrote in its research conversation:
    its request is not in the trace)."""
    if not path.is_file():
        return None
    found: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("event") == "write" and isinstance(event.get("messages"), list):
            found = request_text(event["messages"])
    return found


def ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None
