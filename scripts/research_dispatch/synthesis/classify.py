"""Classify (deterministic code): convergent, same-family, divergent, single-source, excluded.

The rules, written as code so that the PR diff is explainable (docs/METHODOLOGY.md states them for
readers). A *cluster* is a set of claims that agree (one position); support counts only *counted*
reports (see `inputs`), and each report counts once however many of its claims a cluster holds.

* **convergent** — at least two counted reports whose model families are independent (disjoint family
  sets: a report served by several families shares a family with each of them);
* **same_family** — at least two counted reports, none independent of the others: agreement, but not
  independent evidence;
* **single_source** — one counted report; flagged "single-source — may be model bias" when it is a
  recommendation or high-confidence;
* **excluded** — made only by reports excluded from support (unverified route, by default);
* **divergent** — the cluster is a *side* of a divergence. A divergence exists only where the judge
  put counted claims on opposite sides of one group (alternatives for one decision, or opposite
  findings) — never because two picks merely share a layer — and only between sides with disjoint
  supporting reports: a report that holds two sides counts for neither (it is listed as weighing
  both), and a side left with no report of its own is not a side. With fewer than two sides left there
  is no divergence, and every cluster keeps its own class. A side with one report is flagged.

Each divergence reads "use X today, switch to Y when Z" only when X's support is greater (more
independent families, then more reports); equal support reads "no consensus: X or Y", with each side's
stated condition. Excluded reports never change a counted cluster: they are ignored when choosing its
layer, pick, label, condition and summary, they cannot join two counted clusters (see `align`), and a
contrary claim they make is listed beside the counted position, never counted against it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from research_dispatch.core.sanitize import one_line
from research_dispatch.synthesis.align import Alignment
from research_dispatch.synthesis.extract import CONFIDENCE_RANK, Claim
from research_dispatch.synthesis.inputs import Counting
from research_dispatch.synthesis.text import layer_key as make_layer_key

STATUSES = ("convergent", "same_family", "divergent", "single_source", "excluded")
FLAG = "single-source — may be model bias"
LABEL_CHARS = 160
_FUTURE = re.compile(r"^\s*(when|once|if|after|as soon as|until|unless|where|provided|should)\b", re.IGNORECASE)
_PRESENT = re.compile(r"^\s*(today|now|currently|at present)\b\W*$", re.IGNORECASE)


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
    condition: str | None
    label: str
    summary: str
    reports: list[str]  # counted
    families: list[str]  # of counted reports
    excluded_reports: list[str]
    batches: list[str]
    unaligned: bool
    best_confidence: str
    status: str = "single_source"
    flagged: bool = False
    divergence: str | None = None
    contradicts: list[int] = field(default_factory=list)  # clusters the judge set against this one
    contrary_excluded: list[str] = field(default_factory=list)  # excluded reports' claims against it
    key: str = ""
    base: str = ""


@dataclass
class Side:
    """One side of a divergence: a cluster, supported by the counted reports that hold no other side."""

    cluster: int
    reports: list[str]
    families: list[str]
    claims: list[str]
    label: str
    pick: str | None
    condition: str | None

    @property
    def support(self) -> tuple[int, int]:
        """What ranks sides: independent families first, then reports."""
        return len(self.families), len(self.reports)

    @property
    def future_condition(self) -> bool:
        return bool(self.condition) and not _PRESENT.match(self.condition or "")


@dataclass
class Divergence:
    key: str
    layer: str
    decision: str | None
    kind: str  # alternatives (every side a pick) | contradiction (opposite findings)
    sides: list[Side]  # best supported first; equal support in a fixed order
    tie: bool
    line: str = ""
    ambivalent_reports: list[str] = field(default_factory=list)  # hold more than one side: counted for none
    weighed_clusters: list[int] = field(default_factory=list)  # sides held only by such reports
    excluded_claims: list[str] = field(default_factory=list)  # excluded reports' claims against a side

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


def _families(reports: list[str], counting: Mapping[str, Counting]) -> list[str]:
    return sorted({family for r in reports for family in counting[r].families})


def _representative(claims: list[Claim]) -> Claim:
    """The statement that speaks for a group: confident, a recommendation, concise (ties by key)."""
    return sorted(claims, key=lambda c: (CONFIDENCE_RANK[c.confidence], c.stance != "recommend", len(c.statement),
                                         c.key))[0]


def _cluster(index: int, members: list[str], batches: list[str], unaligned: bool, claims: Mapping[str, Claim],
             counting: Mapping[str, Counting]) -> Cluster:
    everything = [claims[k] for k in members]
    counted = [c for c in everything if counting[c.report].counted]
    scope = counted or everything  # what the cluster says is what its counted reports say
    layer = _majority([c.layer for c in scope])
    recommendations = [c for c in scope if c.pick_key]
    pick_key = _majority([c.pick_key for c in recommendations if c.pick_key]) if recommendations else None
    chosen = [c for c in recommendations if c.pick_key == pick_key]
    pick = _majority([c.pick for c in chosen if c.pick]) if chosen else None
    decisions = [c.decision for c in chosen if c.decision]
    decision = _majority(decisions) if decisions else None
    condition = next((c.condition for c in sorted(chosen or scope, key=lambda c: c.key) if c.condition), None)
    summary = _representative(scope).statement
    reports = sorted({c.report for c in counted})
    return Cluster(
        index=index, members=sorted(members), layer=layer, layer_key=make_layer_key(layer), decision=decision,
        pick=pick, pick_key=pick_key, condition=condition, label=pick or one_line(summary, LABEL_CHARS),
        summary=summary, reports=reports, families=_families(reports, counting),
        excluded_reports=sorted({c.report for c in everything} - set(reports)), batches=list(batches),
        unaligned=unaligned, best_confidence=min((c.confidence for c in scope), key=lambda v: CONFIDENCE_RANK[v]))


def _base_status(cluster: Cluster, claims: Mapping[str, Claim], counting: Mapping[str, Counting]) -> None:
    if not cluster.reports:
        cluster.status, cluster.flagged = "excluded", False
    elif len(cluster.reports) >= 2:
        cluster.status = "convergent" if independent(cluster.reports, counting) else "same_family"
        cluster.flagged = False
    else:
        cluster.status = "single_source"
        cluster.flagged = any(counting[claims[k].report].counted
                              and (claims[k].stance == "recommend" or claims[k].confidence == "high")
                              for k in cluster.members)


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
    if not condition or _PRESENT.match(condition):
        return "when the evidence for it strengthens (its reports state no condition)"
    text = condition.strip().rstrip(".")
    return text if _FUTURE.match(text) else f"when {text}"


def _option(side: Side) -> str:
    """A side as a tie shows it: its label, then its own condition."""
    text = side.pick or f"“{side.label}”"
    if side.condition:
        return f"{text}, {side.condition.strip().rstrip('.')}"
    return text


def divergence_line(sides: list[Side], tie: bool) -> str:
    """The one line a reader acts on.

    Greater support: "Use X today, switch to Y when Z" (Z is Y's own condition). Equal support at the
    top: "No consensus: X or Y" with each side's condition — never a favourite. Sides without a pick
    (opposite findings rather than choices) read "Rely on “X” today; revisit “Y” when Z".
    """
    if tie:
        top = [s for s in sides if s.support == sides[0].support]
        rest = [s for s in sides if s.support != sides[0].support]
        count = sides[0].support[1]
        line = (f"No consensus ({count} report{'s' if count != 1 else ''} each): "
                + "; or ".join(_option(s) for s in top) + ".")
        if rest:
            line += " Less supported: " + "; ".join(_option(s) for s in rest) + "."
        return line
    best, *others = sides
    if all(s.pick for s in sides):
        switches = "; ".join(f"switch to {s.label} {_when(s.condition)}" for s in others)
        if best.future_condition:  # the favoured pick is itself for later: say so instead of "today"
            return (f"The support favours {best.label} {_when(best.condition)}; until then or otherwise: "
                    + "; ".join(_option(s) for s in others) + ".")
        return f"Use {best.label} today, {switches}."
    labels = [s.pick or f"“{s.label}”" for s in sides]
    revisits = "; ".join(f"revisit {text} {_when(s.condition)}" for text, s in zip(labels[1:], others, strict=True))
    return f"Rely on {labels[0]} today; {revisits}."


def _divergences(clusters: list[Cluster], alignment: Alignment, claims: Mapping[str, Claim],
                 counting: Mapping[str, Counting]) -> list[Divergence]:
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
            sides.append(Side(cluster=index, reports=own, families=_families(own, counting),
                              claims=sorted(k for k in cluster.members if claims[k].report in own),
                              label=cluster.label, pick=cluster.pick, condition=cluster.condition))
        if len(sides) < 2:
            continue
        sides.sort(key=lambda s: (-s.support[0], -s.support[1], s.label.casefold(), s.claims[0]))
        tie = sides[0].support == sides[1].support
        members = [by_index[s.cluster] for s in sides]
        decisions = [c.decision for c in members if c.decision]
        excluded = sorted({k for s in sides for k in alignment.contrary_excluded.get(s.cluster, [])})
        divergence = Divergence(
            key="", layer=_majority([c.layer for c in members]), decision=_majority(decisions) if decisions else None,
            kind="alternatives" if all(s.pick for s in sides) else "contradiction", sides=sides, tie=tie,
            ambivalent_reports=ambivalent, weighed_clusters=weighed, excluded_claims=excluded)
        divergence.line = divergence_line(sides, tie)
        for side in sides:
            cluster = by_index[side.cluster]
            cluster.status = "divergent"
            cluster.flagged = len(side.reports) == 1
        out.append(divergence)
    return out


def classify(alignment: Alignment, claims: Mapping[str, Claim], counting: Mapping[str, Counting]
             ) -> tuple[list[Cluster], list[Divergence]]:
    """Clusters with their class, and the divergences between them. A pure function of its inputs."""
    clusters = [_cluster(i, raw.members, raw.batches, raw.unaligned, claims, counting)
                for i, raw in enumerate(alignment.clusters)]
    for cluster in clusters:
        _base_status(cluster, claims, counting)
    for a, b in alignment.contradictions:
        clusters[a].contradicts.append(b)
        clusters[b].contradicts.append(a)
    for index, keys in alignment.contrary_excluded.items():
        clusters[index].contrary_excluded = list(keys)
    for cluster in clusters:
        cluster.contradicts = sorted(set(cluster.contradicts))
    return clusters, _divergences(clusters, alignment, claims, counting)
