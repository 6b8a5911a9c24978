"""Classify (deterministic code): convergent, same-family, divergent, single-source, unsupported, excluded.

The rules, written as code so that the PR diff is explainable (docs/METHODOLOGY.md states them for
readers). A *cluster* is a set of claims that agree (one position, `for` or `against` its pick);
support counts only the claims that count (`counting`: a counted report, an anchored claim, a
supported citation), and each report counts once however many of its claims a cluster holds.

* **convergent** — at least two counted reports whose model families are independent (disjoint family
  sets: a report served by several families shares a family with each of them); `shared_source` when
  all its supported citations point to one url ("convergent — one shared source");
* **same_family** — at least two counted reports, none independent of the others: agreement, but not
  independent evidence;
* **single_source** — one counted report; flagged when it is a recommendation or high-confidence (and
  labelled by `asked`: "single-source — may be model bias" only when another family was asked about its
  topic, else "single-source — only one family was asked");
* **unsupported** — no claim of it counts, but counted reports make it: not anchored in the report,
  or no citation a judge of another family confirmed (shown, with why, never silently dropped);
* **excluded** — made only by reports excluded from support (unverified route, by default);
* **divergent** — the cluster is a *side* of a divergence. A divergence exists only where the judge
  put counted claims on opposite sides of one group (alternatives for one decision — the only way two
  different picks diverge — or opposite findings), where code split a judged position (for and against
  one pick, numbers that differ), or
  where one pick of a layer is held `for` by some and `against` by others — never because two picks
  merely share a layer — and only between sides with disjoint supporting reports: a report that holds
  two sides counts for neither (it is listed as weighing both), and a side left with no report of its
  own is not a side. With fewer than two sides left there is no divergence, and every cluster keeps
  its own class. A side with one report is marked, but only single-source clusters are *flagged*.

Sides are ranked by independent families, then distinct supporting sources (`counting.rank`), never by
report count. A divergence reads "use X today, switch to Y when Z" only when X has more independent
families; equal families read "no consensus: X or Y", with each side's own condition. A side's
condition is taken from its own claims only, and the reports that state it are kept beside it. Claims
that do not count never change a counted cluster: they are ignored when choosing its layer, pick,
label, condition and summary, they cannot join two counted clusters (see `align`), and a contrary
claim they make is listed beside the counted position, never counted against it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from research_dispatch.core.sanitize import one_line
from research_dispatch.synthesis.align.judge import Alignment
from research_dispatch.synthesis.common.checked import Position
from research_dispatch.synthesis.common.text import layer_key as make_layer_key
from research_dispatch.synthesis.common.text import states_a_condition
from research_dispatch.synthesis.count import counting as rules
from research_dispatch.synthesis.extract.claims import CONFIDENCE_RANK, Claim
from research_dispatch.synthesis.read.inputs import Counting

STATUSES = ("convergent", "same_family", "divergent", "single_source", "unsupported", "excluded")
FLAG = "single-source — may be model bias"
LABEL_CHARS = 160
_FUTURE = re.compile(r"^\s*(when|once|if|after|as soon as|until|unless|where|provided|should)\b", re.IGNORECASE)


@dataclass
class Cluster:
    """Claims that agree, with their counted support and their class."""

    index: int
    members: list[str]
    layer: str
    layer_key: str
    decision: str | None
    pick: str | None
    pick_key: str | None
    position: Position
    condition: str | None
    label: str
    summary: str
    reports: list[str]  # with a counted claim in the cluster
    families: list[str]  # of those reports
    sources: list[str]  # distinct urls of the supported citations of its counted claims
    excluded_reports: list[str]  # reports excluded from support that make it
    batches: list[str]
    unaligned: bool
    best_confidence: str
    status: str = "single_source"
    flagged: bool = False
    shared_source: bool = False
    divergence: str | None = None
    contradicts: list[int] = field(default_factory=list)  # clusters set against this one
    contrary_excluded: list[str] = field(default_factory=list)  # claims that do not count, set against it
    key: str = ""
    base: str = ""
    topics: list[str] = field(default_factory=list)  # of the reports that hold it (`asked`)
    asked: list[str] = field(default_factory=list)  # families with a counted report on those topics (`asked`)


@dataclass
class Side:
    """One side of a divergence: a cluster, supported by the counted reports that hold no other side."""

    cluster: int
    reports: list[str]
    families: list[str]
    sources: list[str]
    claims: list[str]  # the counted claims of its own reports
    label: str
    pick: str | None
    pick_key: str | None
    position: Position
    condition: str | None
    condition_reports: list[str]  # the reports whose own claims state `condition`

    @property
    def support(self) -> tuple[int, int]:
        """What ranks sides: independent families, then distinct supporting sources (`counting.rank`)."""
        return rules.rank(self.families, self.sources)

    @property
    def future_condition(self) -> bool:
        return states_a_condition(self.condition)


@dataclass
class Divergence:
    key: str
    layer: str
    decision: str | None
    kind: str  # alternatives (different picks) | contradiction (opposite findings, or for and against one pick)
    sides: list[Side]  # best supported first; equal support in a fixed order
    tie: bool
    line: str = ""
    ambivalent_reports: list[str] = field(default_factory=list)  # hold more than one side: counted for none
    weighed_clusters: list[int] = field(default_factory=list)  # sides held only by such reports
    excluded_claims: list[str] = field(default_factory=list)  # uncounted claims against a side
    topics: list[str] = field(default_factory=list)  # of the reports that hold its sides (`asked`)
    asked: list[str] = field(default_factory=list)  # families with a counted report on those topics (`asked`)

    @property
    def clusters(self) -> list[int]:
        return [side.cluster for side in self.sides]


def _majority(values: list[str]) -> str:
    counts = Counter(values)
    return sorted(counts, key=lambda v: (-counts[v], v))[0]


def independent(reports: list[str], counting: Mapping[str, Counting]) -> bool:
    """Do at least two of these reports have disjoint (non-empty) family sets?"""
    sets = [counting[r].families for r in reports if counting[r].families]
    return any(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1:])


def _label(pick: str | None, position: Position, summary: str) -> str:
    """A cluster as tables and lines name it: its pick ("against X" when it advises against it), or its
    summary when it picks nothing."""
    if pick:
        return f"against {pick}" if position is Position.AGAINST else pick
    return one_line(summary, LABEL_CHARS)


def _representative(claims: list[Claim]) -> Claim:
    """The statement that speaks for a group: confident, a recommendation, concise (ties by key)."""
    return sorted(claims, key=lambda c: (CONFIDENCE_RANK[c.confidence], c.stance != "recommend", len(c.statement),
                                         c.key))[0]


def _first_condition(claims: list[Claim]) -> tuple[str | None, list[str]]:
    """The first condition of these claims (by key), and the reports whose claims state it."""
    ordered = sorted(claims, key=lambda c: c.key)
    condition = next((c.condition for c in ordered if c.condition), None)
    return condition, sorted({c.report for c in ordered if condition and c.condition == condition})


def _cluster(index: int, members: list[str], batches: list[str], unaligned: bool, claims: Mapping[str, Claim],
             counting: Mapping[str, Counting], counted: frozenset[str]) -> Cluster:
    everything = [claims[k] for k in members]
    held = [c for c in everything if c.key in counted]
    scope = held or everything  # what the cluster says is what its counted claims say
    layer = _majority([c.layer for c in scope])
    position = Position(_majority([c.position.value for c in scope]))
    recommendations = [c for c in scope if c.pick_key]
    pick_key = _majority([c.pick_key for c in recommendations if c.pick_key]) if recommendations else None
    chosen = [c for c in recommendations if c.pick_key == pick_key]
    pick = _majority([c.pick for c in chosen if c.pick]) if chosen else None
    decisions = [c.decision for c in chosen if c.decision]
    decision = _majority(decisions) if decisions else None
    condition, _stated_by = _first_condition(chosen or scope)
    summary = _representative(scope).statement
    reports = sorted({c.report for c in held})
    return Cluster(
        index=index, members=sorted(members), layer=layer, layer_key=make_layer_key(layer), decision=decision,
        pick=pick, pick_key=pick_key, position=position, condition=condition, label=_label(pick, position, summary),
        summary=summary, reports=reports, families=rules.families_of(reports, counting),
        sources=rules.sources_of(held),
        excluded_reports=sorted({c.report for c in everything if not counting[c.report].counted}),
        batches=list(batches), unaligned=unaligned,
        best_confidence=min((c.confidence for c in scope), key=lambda v: CONFIDENCE_RANK[v]))


def _base_status(cluster: Cluster, claims: Mapping[str, Claim], counting: Mapping[str, Counting],
                 counted: frozenset[str]) -> None:
    if not cluster.reports:
        made_by_counted = any(counting[claims[k].report].counted for k in cluster.members)
        cluster.status, cluster.flagged = ("unsupported" if made_by_counted else "excluded"), False
    elif len(cluster.reports) >= 2:
        cluster.status = "convergent" if independent(cluster.reports, counting) else "same_family"
        cluster.flagged = False
    else:
        cluster.status = "single_source"
        cluster.flagged = any(k in counted and (claims[k].stance == "recommend" or claims[k].confidence == "high")
                              for k in cluster.members)
    cluster.shared_source = rules.shared_source(cluster.status == "convergent", cluster.sources)


def _components(pairs: list[tuple[int, int]]) -> list[list[int]]:
    neighbours: dict[int, set[int]] = defaultdict(set)
    for a, b in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    seen: set[int] = set()
    out = []
    for start in sorted(neighbours):
        if start in seen:
            continue
        stack, component = [start], []
        seen.add(start)
        while stack:
            node = stack.pop()
            component.append(node)
            for other in sorted(neighbours[node] - seen):
                seen.add(other)
                stack.append(other)
        out.append(sorted(component))
    return out


def _when(condition: str | None) -> str:
    if not states_a_condition(condition):
        return "when the evidence for that strengthens (its reports state no condition)"
    text = (condition or "").strip().rstrip(".")
    return text if _FUTURE.match(text) else f"when {text}"


def _option(side: Side) -> str:
    """A side as a tie shows it: its label, then its own condition."""
    text = side.label if side.pick else f"“{side.label}”"
    if side.condition:
        return f"{text}, {side.condition.strip().rstrip('.')}"
    return text


def _act(side: Side, *, first: bool) -> str:
    """What a side asks the reader to do with its pick."""
    if side.position is Position.AGAINST:
        return f"avoid {side.pick}"
    return f"use {side.pick}" if first else f"switch to {side.pick}"


def _families_each(count: int) -> str:
    return f"{count} famil{'y' if count == 1 else 'ies'} each"


def divergence_line(sides: list[Side], tie: bool) -> str:
    """The one line a reader acts on.

    More independent families: "Use X today, switch to Y when Z" (Z is Y's own condition; a side
    against X reads "avoid X"). Equal families at the top: "No consensus (n families each): X or Y" with
    each side's condition — never a favourite, whatever the sources or report counts. Sides without a
    pick (opposite findings rather than choices) read "Rely on “X” today; revisit “Y” when Z".
    """
    if tie:
        top = [s for s in sides if rules.tied(s.support, sides[0].support)]
        rest = [s for s in sides if not rules.tied(s.support, sides[0].support)]
        line = f"No consensus ({_families_each(sides[0].support[0])}): " + "; or ".join(_option(s) for s in top) + "."
        if rest:
            line += " Less supported: " + "; ".join(_option(s) for s in rest) + "."
        return line
    best, *others = sides
    if all(s.pick for s in sides):
        head = _act(best, first=True)
        if best.position is Position.FOR and best.future_condition:  # the favoured pick is itself for later
            return (f"The support favours {best.label} {_when(best.condition)}; until then or otherwise: "
                    + "; ".join(_option(s) for s in others) + ".")
        then = "; ".join(f"{_act(s, first=False)} {_when(s.condition)}" for s in others)
        return f"{head[:1].upper()}{head[1:]} today, {then}."
    labels = [s.label if s.pick else f"“{s.label}”" for s in sides]
    revisits = "; ".join(f"revisit {text} {_when(s.condition)}" for text, s in zip(labels[1:], others, strict=True))
    return f"Rely on {labels[0]} today; {revisits}."


def _kind(sides: list[Side]) -> str:
    """`alternatives` when every side is a different pick; `contradiction` for opposite findings, or one
    pick held for and against."""
    picks = [s.pick_key for s in sides]
    return "alternatives" if all(picks) and len(set(picks)) == len(picks) else "contradiction"


def _divergences(clusters: list[Cluster], alignment: Alignment, claims: Mapping[str, Claim],
                 counting: Mapping[str, Counting], counted: frozenset[str]) -> list[Divergence]:
    by_index = {c.index: c for c in clusters}
    out: list[Divergence] = []
    for component in _components(alignment.contradictions):
        holders: Counter[str] = Counter(r for i in component for r in by_index[i].reports)
        ambivalent = sorted(r for r, n in holders.items() if n > 1)
        sides: list[Side] = []
        weighed: list[int] = []
        for index in component:
            cluster = by_index[index]
            own = [r for r in cluster.reports if r not in ambivalent]
            if not own:
                weighed.append(index)
                continue
            mine = sorted(k for k in cluster.members if k in counted and claims[k].report in own)
            condition, stated_by = _first_condition([claims[k] for k in mine])
            sides.append(Side(cluster=index, reports=own, families=rules.families_of(own, counting),
                              sources=rules.sources_of(claims[k] for k in mine), claims=mine, label=cluster.label,
                              pick=cluster.pick, pick_key=cluster.pick_key, position=cluster.position,
                              condition=condition, condition_reports=stated_by))
        if len(sides) < 2:
            continue
        sides.sort(key=lambda s: (-s.support[0], -s.support[1], s.position is Position.AGAINST, s.label.casefold(),
                                  s.claims[0]))
        tie = rules.tied(sides[0].support, sides[1].support)
        members = [by_index[s.cluster] for s in sides]
        decisions = [c.decision for c in members if c.decision]
        excluded = sorted({k for s in sides for k in alignment.contrary_excluded.get(s.cluster, [])})
        divergence = Divergence(
            key="", layer=_majority([c.layer for c in members]), decision=_majority(decisions) if decisions else None,
            kind=_kind(sides), sides=sides, tie=tie, ambivalent_reports=ambivalent, weighed_clusters=weighed,
            excluded_claims=excluded)
        divergence.line = divergence_line(sides, tie)
        for side in sides:
            cluster = by_index[side.cluster]
            cluster.status = "divergent"
            cluster.flagged = len(side.reports) == 1
            cluster.shared_source = False
        out.append(divergence)
    return out


def classify(alignment: Alignment, claims: Mapping[str, Claim], counting: Mapping[str, Counting],
             counted: frozenset[str]) -> tuple[list[Cluster], list[Divergence]]:
    """Clusters with their class, and the divergences between them. A pure function of its inputs;
    `counted` holds the keys of the claims that count (`counting.counted_claims`)."""
    clusters = [_cluster(i, raw.members, raw.batches, raw.unaligned, claims, counting, counted)
                for i, raw in enumerate(alignment.clusters)]
    for cluster in clusters:
        _base_status(cluster, claims, counting, counted)
    for a, b in alignment.contradictions:
        clusters[a].contradicts.append(b)
        clusters[b].contradicts.append(a)
    for index, keys in alignment.contrary_excluded.items():
        clusters[index].contrary_excluded = list(keys)
    for cluster in clusters:
        cluster.contradicts = sorted(set(cluster.contradicts))
    return clusters, _divergences(clusters, alignment, claims, counting, counted)
