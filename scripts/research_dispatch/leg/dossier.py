"""The research plan, the gap check's answer, and the dossier the report is written from.

Let the model extract, let code decide (docs/ARCHITECTURE.md): the model numbers the brief's sub-questions
in its first turn (`parse_plan` reads them back, and code numbers them afresh), and at the gap check it
points at source ids per sub-question (`parse_coverage`). Which of those ids were read in full and which
only seen as search snippets is the registry's to say, not the model's; so is which gaps send the model
back (`gaps`). And the report is written from a dossier code rebuilds from the registry (`build_dossier`):
every source shown, with every passage the model was shown of it, ordered by plan item — never from a
conversation whose old tool results were compacted to stubs.

Pure functions over the registry; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Sized
from dataclasses import dataclass, field

from research_dispatch.core import sanitize
from research_dispatch.tools.sources import Source, SourceRegistry, source_header

MAX_PLAN_ITEMS = 12
READ = "read in full"
SNIPPET = "search snippet only"
"""How the dossier says the model knew a source (its `seen` attribute): code's record, not the model's word."""
_ITEM = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?\(?(\d{1,2})[.):](?:\*\*)?\s+(.+?)\s*$")
_COVERAGE = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?(?:item\s+)?(\d{1,2})\s*[.):\-]?(?:\*\*)?\s*(.*?)\s*$",
                       re.IGNORECASE)
_IDS = re.compile(r"\bS(\d{1,6})\b")
_URL = re.compile(r"https?://[^\s<>()\"'`\]]+")


@dataclass(frozen=True)
class PlanItem:
    """One sub-question of the brief, as the model stated it, numbered by code (1, 2, …)."""

    number: int
    text: str

    @property
    def expected_source(self) -> str | None:
        """The primary source the model expects to settle it: a URL it named, if any."""
        match = _URL.search(self.text)
        return match.group(0).rstrip(".,;:") if match else None


def parse_plan(text: str) -> list[PlanItem]:
    """The numbered items of a reply (`1. …`, `2) …`, `**3.** …`), renumbered from 1 in the order given;
    a repeated item is kept once. At most `MAX_PLAN_ITEMS`."""
    items: list[str] = []
    for line in text.splitlines():
        match = _ITEM.match(line)
        if match is None:
            continue
        item = sanitize.one_line(match.group(2).strip("* "), 400)
        if item and item not in items:
            items.append(item)
    return [PlanItem(n, item) for n, item in enumerate(items[:MAX_PLAN_ITEMS], start=1)]


@dataclass(frozen=True)
class Coverage:
    """The gap check's answer: per plan item, the source ids the model says answer it (empty: none)."""

    answered: dict[int, tuple[int, ...]] = field(default_factory=dict)
    items: tuple[PlanItem, ...] = ()  # the plan it answers (the model's own numbering when it had none)

    @property
    def understood(self) -> bool:
        """Did the answer name any item at all? (A reply code cannot read sends nobody back.)"""
        return bool(self.answered)


def parse_coverage(text: str, plan: Sequence[PlanItem], registry: SourceRegistry) -> Coverage:
    """Read `<n>: S3, S7` / `<n>: none` lines (and `<n>. <sub-question>: S3` when there was no plan).

    Ids that are not sources the model was shown are ignored: a model points only at what it saw. An item
    of the plan the answer does not mention is unanswered."""
    answered: dict[int, tuple[int, ...]] = {}
    stated: list[PlanItem] = []
    for line in text.splitlines():
        match = _COVERAGE.match(line)
        if match is None:
            continue
        number, rest = int(match.group(1)), match.group(2)
        if plan and not any(item.number == number for item in plan):
            continue
        ids = []
        for found in _IDS.findall(rest):
            source = registry.get(int(found))
            if source is not None and source.shown and source.id not in ids:
                ids.append(source.id)
        answered[number] = tuple(ids)
        if not plan:
            question = _IDS.sub("", rest.rsplit(":", 1)[0] if ":" in rest else rest).strip(" :,-*")
            stated.append(PlanItem(number, sanitize.one_line(question, 400) or f"sub-question {number}"))
    items = tuple(plan) if plan else tuple(stated)
    return Coverage({item.number: answered.get(item.number, ()) for item in items} if answered else {}, items)


@dataclass(frozen=True)
class Gap:
    """A sub-question that is not settled: no source answers it, or only sources never read in full."""

    item: PlanItem
    snippets: tuple[str, ...] = ()  # labels of the snippet-only sources that answer it (empty: none does)

    def describe(self) -> str:
        if self.snippets:
            return (f"{self.item.number}. {self.item.text} — only search snippets of {', '.join(self.snippets)}: "
                    "read them in full")
        return f"{self.item.number}. {self.item.text} — no source yet"


def gaps(coverage: Coverage, registry: SourceRegistry) -> list[Gap]:
    """The sub-questions worth one more round: those no source answers, and those whose sources were all
    only seen as search snippets (`Source.extracted` is the registry's record of a page read)."""
    out: list[Gap] = []
    for item in coverage.items:
        sources = [s for s in (registry.get(i) for i in coverage.answered.get(item.number, ())) if s is not None]
        if not sources:
            out.append(Gap(item))
        elif not any(s.extracted for s in sources):
            out.append(Gap(item, tuple(s.label for s in sources)))
    return out


def format_plan(items: Sequence[PlanItem]) -> str:
    return "\n".join(f"{item.number}. {item.text}" for item in items)


# ----------------------------------------------------------------------------------------------
# the dossier


@dataclass(frozen=True)
class Dossier:
    """What the writing call is given: `text` (the `<source>` elements, by plan item) and what it holds."""

    text: str
    sources: int
    passages: int
    left_out: int  # passages cut to fit the writing call (context window and dollars)
    chars_shown: int  # characters of every passage shown in the leg (what a complete dossier would hold)

    @property
    def complete(self) -> bool:
        return self.left_out == 0


def ordered_sources(registry: SourceRegistry, coverage: Coverage | None) -> list[tuple[PlanItem | None, Source]]:
    """Every source the model was shown, each once, by plan item: the sources the gap check said answer item
    1 (in the order it named them), then item 2's, …, then the rest in id order."""
    shown = [s for s in registry.all() if s.shown and s.shown_passages]
    placed: list[tuple[PlanItem | None, Source]] = []
    seen: set[int] = set()
    if coverage is not None:
        for item in coverage.items:
            for source_id in coverage.answered.get(item.number, ()):
                source = registry.get(source_id)
                if source is not None and source in shown and source.id not in seen:
                    placed.append((item, source))
                    seen.add(source.id)
    placed += [(None, s) for s in shown if s.id not in seen]
    return placed


def round_robin(lists: Sequence[Sized]) -> list[tuple[int, int]]:
    """(list index, position) of every element, first elements of every list first, then the seconds, …:
    the order in which to keep passages when not all fit, so that as many sources as possible keep some
    (the dossier here, the evidence file in `evidence.gather`)."""
    depth = max((len(items) for items in lists), default=0)
    return [(index, rank) for rank in range(depth) for index, items in enumerate(lists) if rank < len(items)]


def build_dossier(registry: SourceRegistry, coverage: Coverage | None, *, budget_chars: int) -> Dossier:
    """The dossier within `budget_chars`: every shown source's header (id, URL, title) and passages, in plan
    order; when everything does not fit, passages are kept round-robin over the sources (each one's first,
    then each one's second, …) while they fit, and a line says how many were left out. The text of each
    passage is exactly what the model was shown (`Source.shown_passages`), so the citation check's evidence
    and the writer's input are the same text."""
    placed = ordered_sources(registry, coverage)
    texts = [[p.text for p in source.shown_passages] for _, source in placed]
    headers = [source_header(source, seen=READ if source.extracted else SNIPPET) for _, source in placed]
    used = sum(len(h) + 12 for h in headers) + sum(len(_item_line(item)) for item, _ in placed if item is not None)
    kept: list[set[int]] = [set() for _ in placed]
    total = sum(len(t) for passages in texts for t in passages)
    left_out = 0
    for index, rank in round_robin(texts):
        size = len(texts[index][rank]) + 2
        if used + size <= budget_chars:
            kept[index].add(rank)
            used += size
        else:
            left_out += 1
    blocks: list[str] = []
    current: PlanItem | None = None
    started = False
    for (item, _), header, passages, keep in zip(placed, headers, texts, kept, strict=True):
        if item is not current or not started:
            started = True
            current = item
            blocks.append(_item_line(item))
        body = "\n\n".join(text for rank, text in enumerate(passages) if rank in keep)
        blocks.append(f"{header}\n{body or '(its passages were left out to fit this call)'}\n</source>")
    text = "\n".join(blocks)
    if left_out:
        text += f"\n[{left_out} passage(s) left out to fit this call; every source is still listed]"
    return Dossier(text=text, sources=len(placed), passages=sum(len(k) for k in kept), left_out=left_out,
                   chars_shown=total)


def _item_line(item: PlanItem | None) -> str:
    return f"[Plan item {item.number}: {item.text}]" if item is not None else "[Other sources]"
