"""Decisions: the questions a synthesis answers, each with its verdict line and every side's support.

A *decision* is a row of the document's TL;DR table: a divergence (two or more sides, one line "use X
today, switch to Y when Z"), or a recommendation outside any divergence (one side: convergent,
same-family or single-source). *Findings* are the clusters of agreeing claims, recommendations or
not; a divergence has one finding per side. The document's header, the decision table, the agreement
matrix (decisions × families), the claim diff "by decision" and the PR body all read decisions from
here, so they cannot disagree about what was decided.

The ledger is read as parsed JSON and defensively: the previous ledger of a diff may be damaged or of
an older schema (@2 has no sources or positions), and a field of the wrong type is then treated as
absent, never an error. Everything is sorted, so the same ledger gives the same decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from research_dispatch.core.sanitize import for_pr_body, one_line
from research_dispatch.synthesis.common.text import states_a_condition
from research_dispatch.synthesis.count.asked import NO_SIDE, NOT_ASKED, recorded, single_source_label

TABLE_STATUSES = ("convergent", "same_family", "single_source")  # a lone recommendation is a decision in these


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(sorted({v for v in _list(value) if isinstance(v, str)}))


def _asked(item: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The families a cluster's or divergence's topics were asked of (None: not recorded)."""
    return recorded(_strings(item.get("topics")), _strings(item.get("asked")))


def _items(ledger: Any, name: str) -> list[dict[str, Any]]:
    values = ledger.get(name) if isinstance(ledger, dict) else None
    return [item for item in _list(values) if isinstance(item, dict) and isinstance(item.get("key"), str)]


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"


@dataclass(frozen=True)
class DecisionSide:
    """One position on a decision and what supports it (the counted reports, families and sources)."""

    cluster: str
    label: str
    against: bool
    condition: str | None
    reports: tuple[str, ...]
    families: tuple[str, ...]
    sources: tuple[str, ...]
    conditional: tuple[str, ...]  # families all of whose counted claims on this side state a condition

    @property
    def support(self) -> str:
        """'2 families (anthropic, deepseek), 3 sources' — what a diff shows before and after."""
        families = plural(len(self.families), "family", "families")
        if self.families:
            families += f" ({', '.join(self.families)})"
        return f"{families}, {plural(len(self.sources), 'source')}"

    @property
    def signature(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        return self.label, self.families, self.sources


@dataclass(frozen=True)
class Decision:
    """A row of the decision table: its verdict line, status and sides (best supported first)."""

    key: str
    layer: str
    question: str
    verdict: str
    status: str  # divergent, or the lone recommendation's: convergent, same_family, single_source
    kind: str  # of a divergence: alternatives | contradiction ("" for a lone recommendation)
    tie: bool
    sides: tuple[DecisionSide, ...]
    asked: tuple[str, ...] | None = None  # the families asked about its topics (None: not recorded)

    @property
    def clusters(self) -> frozenset[str]:
        return frozenset(side.cluster for side in self.sides)

    @property
    def favourite(self) -> str | None:
        """The side the verdict favours (None for a tie)."""
        return None if self.tie or not self.sides else self.sides[0].label


class _Ledger:
    """The parts of a ledger (any JSON) decisions are made of, each read defensively."""

    def __init__(self, ledger: Any) -> None:
        self.clusters = {c["key"]: c for c in _items(ledger, "clusters")}
        self.divergences = _items(ledger, "divergences")
        self.claims = {c["key"]: c for c in _items(ledger, "claims")}
        reports = [r for r in _list(ledger.get("reports") if isinstance(ledger, dict) else None) if isinstance(r, dict)]
        self.report_families = {_text(r.get("stem")): _strings(r.get("families")) for r in reports}
        self.counted_families = tuple(sorted({f for r in reports if r.get("counted") is True
                                              for f in _strings(r.get("families"))}))

    def conditional(self, claim_keys: list[str]) -> tuple[str, ...]:
        """The families every one of whose claims among these states a condition ("today" is none)."""
        by_family: dict[str, list[bool]] = {}
        for key in claim_keys:
            claim = self.claims.get(key)
            if claim is None:
                continue
            for family in self.report_families.get(_text(claim.get("report")), ()):
                by_family.setdefault(family, []).append(states_a_condition(_text(claim.get("condition"))))
        return tuple(sorted(f for f, stated in by_family.items() if all(stated)))

    def side(self, position: dict[str, Any], claim_keys: list[str]) -> DecisionSide:
        condition = position.get("condition") if isinstance(position.get("condition"), str) else None
        return DecisionSide(cluster=_text(position.get("cluster")) or _text(position.get("key")),
                            label=_text(position.get("label")), against=_text(position.get("position")) == "against",
                            condition=condition or None, reports=_strings(position.get("reports")),
                            families=_strings(position.get("families")), sources=_strings(position.get("sources")),
                            conditional=self.conditional(claim_keys))


def cluster_verdict(cluster: Mapping[str, Any]) -> str:
    """The verdict of a recommendation that is a decision on its own: 'Use X (convergent)'."""
    pick = _text(cluster.get("pick")) or _text(cluster.get("label"))
    verb = "Avoid" if _text(cluster.get("position")) == "against" else "Use"
    status = _text(cluster.get("status"))
    if status == "convergent":
        what = "convergent — one shared source" if cluster.get("shared_source") is True else "convergent"
    elif status == "same_family":
        what = "same family only — not independent"
    elif status == "single_source":
        what = single_source_label(_strings(cluster.get("families")), _asked(cluster)) \
            if cluster.get("flagged") is True else "single-source"
    else:
        what = status.replace("_", "-") or "unknown"
    return f"{verb} {pick} ({what})"


def decisions(ledger: Any) -> list[Decision]:
    """Every decision of a ledger (any JSON), sorted by layer, question and key."""
    parts = _Ledger(ledger)
    out: list[Decision] = []
    in_divergence: set[str] = set()
    for divergence in parts.divergences:
        positions = [p for p in _list(divergence.get("positions")) if isinstance(p, dict)]
        sides = tuple(parts.side(p, [k for k in _list(p.get("claims")) if isinstance(k, str)]) for p in positions)
        in_divergence.update(side.cluster for side in sides)
        out.append(Decision(key=divergence["key"], layer=_text(divergence.get("layer")),
                            question=_text(divergence.get("decision")), verdict=_text(divergence.get("line")),
                            status="divergent", kind=_text(divergence.get("kind")), tie=divergence.get("tie") is True,
                            sides=sides, asked=_asked(divergence)))
    for key, cluster in sorted(parts.clusters.items()):
        status = _text(cluster.get("status"))
        if key in in_divergence or status not in TABLE_STATUSES or not _text(cluster.get("pick")):
            continue
        counted = [k for k in _list(cluster.get("members")) if isinstance(k, str)
                   and _text(parts.claims.get(k, {}).get("standing")) == "counted"]
        side = parts.side(cluster, counted)
        out.append(Decision(key=key, layer=_text(cluster.get("layer")), question=_text(cluster.get("decision")),
                            verdict=cluster_verdict(cluster), status=status, kind="", tie=False, sides=(side,),
                            asked=_asked(cluster)))
    return sorted(out, key=lambda d: (d.layer.casefold(), d.question.casefold(), d.key))


@dataclass(frozen=True)
class Matrix:
    """Decisions × families: what each counted family's reports hold on each decision."""

    families: tuple[str, ...]
    rows: tuple[tuple[Decision, tuple[str, ...]], ...]


def cell(decision: Decision, family: str) -> str:
    """`for`, `against`, `conditional` (for, and every claim of that family on it states a condition); on a
    decision of several sides, the label of the side the family holds ("Monarch (conditional)"). A
    family that holds none: `not asked` (no counted report of it covers the decision's topics), `no side`
    (asked, it took none — or holds more than one side of a divergence, which counts for none), or
    `none` where the ledger does not record who was asked."""
    held = []
    for side in decision.sides:
        if family not in side.families:
            continue
        conditional = not side.against and family in side.conditional
        if len(decision.sides) == 1:
            held.append("against" if side.against else "conditional" if conditional else "for")
        else:
            held.append(side.label + (" (conditional)" if conditional else ""))
    if held:
        return "; ".join(held)
    if decision.asked is None:
        return "none"
    return NO_SIDE if family in decision.asked else NOT_ASKED


def matrix(ledger: Any) -> Matrix:
    """The agreement matrix of a ledger: one row per decision, one column per family of a counted report."""
    families = _Ledger(ledger).counted_families
    return Matrix(families=families,
                  rows=tuple((d, tuple(cell(d, f) for f in families)) for d in decisions(ledger)))


def pr_text(text: str) -> str:
    """Untrusted text for a PR body or job summary: Markdown escaped first, then `for_pr_body` (whose
    @mention guard must have the last word)."""
    for ch in "\\`*_[]|":
        text = text.replace(ch, "\\" + ch)
    return for_pr_body(text)


def matrix_markdown(grid: Matrix, max_rows: int = 40) -> str:
    """The agreement matrix as a PR-body table: sanitised, at most `max_rows` rows, then a count."""
    if not grid.rows or not grid.families:
        return "No decision this cycle."
    lines = ["| Decision | " + " | ".join(pr_text(one_line(f, 40)) for f in grid.families) + " |",
             "|---|" + "---|" * len(grid.families)]
    for decision, cells in grid.rows[:max_rows]:
        title = decision.layer + (f" — {decision.question}" if decision.question else "")
        lines.append(f"| {pr_text(one_line(title, 120))} | " + " | ".join(pr_text(one_line(c, 60)) for c in cells)
                     + " |")
    if len(grid.rows) > max_rows:
        lines += ["", f"… and {len(grid.rows) - max_rows} more decisions (see `framework/claims.json`)."]
    return "\n".join(lines) + "\n"
