"""Classify (deterministic code): convergent, same-family, divergent, single-source, excluded.

The rules are the original review's, written as code so that the PR diff is explainable:

* **convergent** — supported by ≥2 counted reports of ≥2 distinct model families;
* **same_family** — ≥2 counted reports, all of one family: agreement, but not independent;
* **divergent** — the judge split the cluster into contradicting positions held by counted reports,
  or agreeing recommendation clusters of the same layer name different picks. Each divergence is
  written up as "use X today, switch to Y when Z": X is the best-supported position (then the one
  without a future condition), Z comes from Y's own stated condition;
* **single_source** — one counted report; flagged "single-source — may be model bias" when it is a
  recommendation or high-confidence;
* **excluded** — made only by reports excluded from support (unverified route, by default).

Support counts only *counted* reports (verified routes, unless `count_unverified`); excluded reports are
listed beside the support, never in it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from research_dispatch.sanitize import one_line
from research_dispatch.synthesis.align import RawCluster
from research_dispatch.synthesis.extract import CONFIDENCE_RANK, Claim
from research_dispatch.synthesis.inputs import ReportInput
from research_dispatch.synthesis.text import layer_key as make_layer_key

STATUSES = ("convergent", "same_family", "divergent", "single_source", "excluded")
FLAG = "single-source — may be model bias"
LABEL_CHARS = 160
_FUTURE = re.compile(r"^\s*(when|once|if|after|as soon as|until|unless|where|provided|should)\b", re.IGNORECASE)
_PRESENT = re.compile(r"^\s*(today|now|currently|at present)\b\W*$", re.IGNORECASE)


@dataclass
class Position:
    claims: list[str]
    reports: list[str]  # counted
    excluded_reports: list[str]
    families: list[str]  # of counted reports
    label: str
    pick: str | None
    pick_key: str | None
    condition: str | None
    best_confidence: str

    @property
    def future_condition(self) -> bool:
        return bool(self.condition) and not _PRESENT.match(self.condition or "")


@dataclass
class Cluster:
    index: int
    members: list[str]
    positions: list[Position]
    layer: str
    layer_key: str
    pick: str | None
    pick_key: str | None
    summary: str
    reports: list[str]
    families: list[str]
    excluded_reports: list[str]
    batches: list[int]
    unaligned: bool
    status: str = "single_source"
    flagged: bool = False
    divergence: str | None = None
    key: str = ""
    base: str = ""


@dataclass
class Divergence:
    key: str
    layer: str
    kind: str  # contradiction | picks
    positions: list[tuple[int, Position]]  # (cluster index, position), best first
    line: str = ""
    clusters: list[int] = field(default_factory=list)


def _majority(values: list[str]) -> str:
    counts = Counter(values)
    return sorted(counts, key=lambda v: (-counts[v], v))[0]


def _representative(claims: list[Claim], reports: dict[str, ReportInput]) -> Claim:
    """The statement that speaks for a group: counted, confident, concise (ties by key)."""
    return sorted(claims, key=lambda c: (not reports[c.report].counted, CONFIDENCE_RANK[c.confidence],
                                         c.stance != "recommend", len(c.statement), c.key))[0]


def _position(keys: list[str], claims: dict[str, Claim], reports: dict[str, ReportInput]) -> Position:
    members = [claims[k] for k in keys]
    counted = sorted({c.report for c in members if reports[c.report].counted})
    excluded = sorted({c.report for c in members} - set(counted))
    support = [c for c in members if reports[c.report].counted] or members
    picks = [c.pick_key for c in support if c.pick_key]
    pick_key = _majority(picks) if picks else None
    pick = _majority([c.pick for c in support if c.pick_key == pick_key and c.pick]) if pick_key else None
    condition = next((c.condition for c in sorted(support, key=lambda c: c.key) if c.condition), None)
    rep = _representative(support, reports)
    return Position(claims=sorted(keys), reports=counted, excluded_reports=excluded,
                    families=sorted({reports[r].family for r in counted}),
                    label=pick or one_line(rep.statement, LABEL_CHARS),
                    pick=pick, pick_key=pick_key, condition=condition,
                    best_confidence=min((c.confidence for c in support), key=lambda v: CONFIDENCE_RANK[v]))


def _rank(position: Position) -> tuple[int, int, bool, int, str]:
    return (-len(position.reports), -len(position.families), position.future_condition,
            CONFIDENCE_RANK[position.best_confidence], position.label.casefold())


def _when(condition: str | None) -> str:
    if not condition or _PRESENT.match(condition):
        return "when the evidence for it strengthens (its reports state no condition)"
    text = condition.strip().rstrip(".")
    return text if _FUTURE.match(text) else f"when {text}"


def divergence_line(positions: list[Position]) -> str:
    """'Use X today, switch to Y when Z' (one clause per alternative).

    Positions without a pick (contradicting findings rather than choices) read "Rely on “X” today;
    revisit “Y” when Z" instead, so that the line stays a sentence.
    """
    best, *others = positions
    if all(p.pick for p in positions):
        switches = "; ".join(f"switch to {p.label} {_when(p.condition)}" for p in others)
        return f"Use {best.label} today, {switches}."
    label = [p.pick or f"“{p.label}”" for p in positions]
    revisits = "; ".join(f"revisit {text} {_when(p.condition)}" for text, p in zip(label[1:], others, strict=True))
    return f"Rely on {label[0]} today; {revisits}."


def classify(raw: list[RawCluster], claims: dict[str, Claim], reports: dict[str, ReportInput]
             ) -> tuple[list[Cluster], list[Divergence]]:
    clusters: list[Cluster] = []
    for index, item in enumerate(sorted(raw, key=lambda r: r.members[0])):
        members = [claims[k] for k in item.members]
        positions = [_position(keys, claims, reports) for keys in item.positions]
        counted_positions = [p for p in positions if p.reports]
        layer = _majority([c.layer for c in members])
        support = [c for c in members if reports[c.report].counted] or members
        picks = [c.pick_key for c in support if c.pick_key]
        pick_key = _majority(picks) if picks and len(positions) == 1 else None
        pick = positions[0].pick if pick_key else None
        reports_counted = sorted({r for p in positions for r in p.reports})
        cluster = Cluster(
            index=index, members=list(item.members), positions=sorted(positions, key=_rank), layer=layer,
            layer_key=make_layer_key(layer), pick=pick, pick_key=pick_key,
            summary=_representative(support, reports).statement, reports=reports_counted,
            families=sorted({reports[r].family for r in reports_counted}),
            excluded_reports=sorted({c.report for c in members} - set(reports_counted)),
            batches=list(item.batches), unaligned=item.unaligned)
        if len(counted_positions) >= 2:
            cluster.status = "divergent"
        elif not cluster.reports:
            cluster.status = "excluded"
        elif len(cluster.reports) >= 2:
            cluster.status = "convergent" if len(cluster.families) >= 2 else "same_family"
        else:
            cluster.status = "single_source"
            cluster.flagged = any(reports[c.report].counted and (c.stance == "recommend" or c.confidence == "high")
                                  for c in members)
        clusters.append(cluster)

    divergences: list[Divergence] = []
    for cluster in clusters:
        if cluster.status == "divergent":
            positions = [p for p in cluster.positions if p.reports]
            divergences.append(Divergence(key="", layer=cluster.layer, kind="contradiction",
                                          positions=[(cluster.index, p) for p in positions],
                                          clusters=[cluster.index]))
    by_layer: dict[str, list[Cluster]] = {}
    for cluster in clusters:
        if cluster.status in ("convergent", "same_family", "single_source") and cluster.pick_key:
            by_layer.setdefault(cluster.layer_key, []).append(cluster)
    for _layer, group in sorted(by_layer.items()):
        if len({c.pick_key for c in group}) < 2:
            continue
        ranked = sorted(group, key=lambda c: _rank(c.positions[0]))
        for cluster in ranked:
            cluster.status = "divergent"
            cluster.flagged = False
        divergences.append(Divergence(key="", layer=_majority([c.layer for c in group]), kind="picks",
                                      positions=[(c.index, c.positions[0]) for c in ranked],
                                      clusters=[c.index for c in ranked]))
    for divergence in divergences:
        divergence.positions.sort(key=lambda item: _rank(item[1]))
        divergence.line = divergence_line([p for _, p in divergence.positions])
    return clusters, divergences
