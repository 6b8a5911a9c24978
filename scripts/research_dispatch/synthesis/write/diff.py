"""Diff two claims ledgers: what a refresh changed in the synthesis.

First, **by decision** (`decisions`: a divergence, or a recommendation that is a decision on its own):
every decision whose verdict line or whose sides' support (families, sources) changed is listed with
the line and each side's support before and after, and what changed is named — a changed favourite
(2:1 → 1:2, or a tie that is no longer one), a new side, a lost side. A decision is the same across
the two ledgers when it has the same key or shares a side (a cluster key). A refresh whose verdict
line changed is therefore never "no change". Then **claims that lost their supported citation**
(a claim key that had a `supported` citation and has none now) are always listed, whatever their
cluster did.

Then by cluster (each cluster lands in at most one category, by stable cluster key):

* `promoted` — now convergent, was not;
* `lost_support` — fewer counted reports than before, or no longer convergent (and not divergent);
* `new_divergences` — divergences the previous ledger did not have: none of the old divergences has
  its key or shares a side (a cluster) with it;
* `new` — clusters whose key is new;
* `dropped` — clusters whose key is gone.

`old=None` (the first synthesis, or a previous ledger that was damaged) makes every cluster `new` and
every divergence a new divergence, and lists no decision as changed. A previous @2 ledger has no
checked citations: none of its claims can lose one, and its decisions show no sources. The publish
stage calls `diff_ledgers` on the committed and the new `claims.json`, and pastes `markdown()` into the
PR body; `text()` is for the terminal. Both ledgers are read defensively: whatever JSON they hold, a
field of the wrong type is treated as absent, never an error. Summaries come from model output:
`markdown()` sanitises them for a PR body (no HTML, no comments, no @mentions) and truncates long
lists with a count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from research_dispatch.core.sanitize import for_pr_body, one_line
from research_dispatch.synthesis.count.decisions import Decision, decisions, pr_text

CATEGORIES = (
    ("decisions", "Decisions changed"),
    ("lost_citations", "Lost a supported citation"),
    ("promoted", "Promoted to convergent"),
    ("lost_support", "Lost support"),
    ("new_divergences", "New divergences"),
    ("new", "New"),
    ("dropped", "Dropped"),
)
SUMMARY_CHARS = 160


@dataclass(frozen=True)
class DiffItem:
    key: str
    layer: str
    summary: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class DecisionChange:
    """One decision whose verdict or support changed: the line and each side's support, before and after."""

    key: str
    layer: str
    question: str
    before: str | None  # the verdict line (None: not a decision before)
    after: str | None
    sides_before: tuple[str, ...]  # "label: 1 family (openai), 1 source"
    sides_after: tuple[str, ...]
    changes: tuple[str, ...]  # what changed, named: favourite, new side, lost side, support

    @property
    def title(self) -> str:
        return f"{self.layer} — {self.question}" if self.question else self.layer


@dataclass
class LedgerDiff:
    decisions: list[DecisionChange] = field(default_factory=list)
    lost_citations: list[DiffItem] = field(default_factory=list)
    promoted: list[DiffItem] = field(default_factory=list)
    lost_support: list[DiffItem] = field(default_factory=list)
    new_divergences: list[DiffItem] = field(default_factory=list)
    new: list[DiffItem] = field(default_factory=list)
    dropped: list[DiffItem] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not any(getattr(self, name) for name, _ in CATEGORIES)

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name, _ in CATEGORIES}

    def headline(self) -> str:
        if self.is_empty:
            return "claim diff: no change"
        counts = self.counts()
        return "claim diff: " + ", ".join(f"{counts[name]} {title.lower()}" for name, title in CATEGORIES)

    def text(self, max_items: int = 200) -> str:
        """Plain text for the terminal: the headline, then at most `max_items` items in all."""
        lines = [self.headline()]
        budget = max(0, max_items)
        if self.decisions:
            lines.append("decisions changed:")
            shown_decisions = self.decisions[:budget]
            budget -= len(shown_decisions)
            for change in shown_decisions:
                lines.append(f"  {change.key}: {one_line(change.title, SUMMARY_CHARS)}")
                lines += [f"    {row}" for row in _decision_rows(change, plain=True)]
            if len(self.decisions) > len(shown_decisions):
                lines.append(f"  … and {len(self.decisions) - len(shown_decisions)} more (see framework/claims.json)")
        for name, title in CATEGORIES:
            items = getattr(self, name)
            if not items or name == "decisions":
                continue
            lines.append(f"{title.lower()}:")
            shown = items[:budget]
            budget -= len(shown)
            for item in shown:
                lines.append(f"  {item.key}: {one_line(item.summary, SUMMARY_CHARS)} ({_change(item)})")
            if len(items) > len(shown):
                lines.append(f"  … and {len(items) - len(shown)} more (see framework/claims.json)")
        return "\n".join(lines)

    def markdown(self, max_items: int = 50) -> str:
        """For a PR body or job summary: sanitised, at most `max_items` items in all, then a count."""
        if self.is_empty:
            return "No change in the claims ledger."
        counts = self.counts()
        lines = [" · ".join(f"{title}: **{counts[name]}**" for name, title in CATEGORIES), ""]
        budget = max(0, max_items)
        if self.decisions:
            lines += ["**Decisions changed** (the verdict line, and each side's support: families, sources)", ""]
            shown_decisions = self.decisions[:budget]
            budget -= len(shown_decisions)
            for change in shown_decisions:
                lines.append(f"- `{_code(change.key)}` {pr_text(one_line(change.title, 160))}")
                lines += [f"  - {row}" for row in _decision_rows(change, plain=False)]
            if len(self.decisions) > len(shown_decisions):
                lines.append(f"- … and {len(self.decisions) - len(shown_decisions)} more (see `framework/claims.json`)")
            lines.append("")
        for name, title in CATEGORIES:
            items = getattr(self, name)
            if not items or name == "decisions":
                continue
            lines.append(f"**{title}**")
            lines.append("")
            shown = items[:budget]
            budget -= len(shown)
            for item in shown:
                summary = pr_text(one_line(item.summary, SUMMARY_CHARS))
                lines.append(f"- `{_code(item.key)}` {pr_text(one_line(item.layer, 60))}: {summary} — "
                             f"{pr_text(_change(item))}")
            if len(items) > len(shown):
                lines.append(f"- … and {len(items) - len(shown)} more (see `framework/claims.json`)")
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"


def _decision_rows(change: DecisionChange, *, plain: bool) -> list[str]:
    """The lines of one decision change: what changed, the verdict and the sides, before and after."""
    def show(text: str, limit: int) -> str:
        return one_line(text, limit) if plain else pr_text(one_line(text, limit))

    rows = [show("; ".join(change.changes), 400)]
    rows.append("before: " + (show(change.before, 400) if change.before else "—"))
    rows.append("after: " + (show(change.after, 400) if change.after else "— (no longer a decision)"))
    rows.append("sides before: " + (show("; ".join(change.sides_before), 600) if change.sides_before else "—"))
    rows.append("sides after: " + (show("; ".join(change.sides_after), 600) if change.sides_after else "—"))
    return rows


def _side_rows(decision: Decision | None) -> tuple[str, ...]:
    if decision is None:
        return ()
    return tuple(f"{side.label}: {side.support}" for side in decision.sides)


def _favourite(decision: Decision) -> str:
    return decision.favourite or "no consensus"


def _decision_change(old: Decision | None, new: Decision | None) -> DecisionChange | None:
    """What changed in one decision, or None when its verdict and every side's support are the same."""
    ref = new or old
    assert ref is not None
    before_sides = {s.label: s for s in old.sides} if old else {}
    after_sides = {s.label: s for s in new.sides} if new else {}
    changes: list[str] = []
    if old is None:
        changes.append("new decision")
    elif new is None:
        changes.append("no longer a decision: its sides lost their counted support or were dropped")
    else:
        if (old.status, _favourite(old)) != (new.status, _favourite(new)):
            changes.append(f"favourite changed: {_favourite(old)} → {_favourite(new)}" if old.status == new.status
                           == "divergent" else f"status changed: {old.status} → {new.status}")
        changes += [f"new side: {label}" for label in sorted(after_sides.keys() - before_sides.keys())]
        changes += [f"lost side: {label}" for label in sorted(before_sides.keys() - after_sides.keys())]
        for label in sorted(before_sides.keys() & after_sides.keys()):
            if before_sides[label].signature != after_sides[label].signature:
                changes.append(f"{label}: {before_sides[label].support} → {after_sides[label].support}")
        if not changes and old.verdict != new.verdict:
            changes.append("verdict line changed")
        if not changes:
            return None
    return DecisionChange(key=ref.key, layer=ref.layer, question=ref.question, before=old.verdict if old else None,
                          after=new.verdict if new else None, sides_before=_side_rows(old),
                          sides_after=_side_rows(new), changes=tuple(changes))


def diff_decisions(old: object, new: object) -> list[DecisionChange]:
    """Decisions whose verdict or support changed, matched by key, else by a shared side (cluster)."""
    if old is None:
        return []
    before, after = decisions(old), decisions(new)
    by_key = {d.key: d for d in before}
    matched: set[str] = set()
    out: list[DecisionChange] = []
    for decision in after:
        previous = by_key.get(decision.key)
        if previous is None or previous.key in matched:
            previous = next((d for d in before if d.key not in matched and d.clusters & decision.clusters), None)
        if previous is not None:
            matched.add(previous.key)
        change = _decision_change(previous, decision)
        if change is not None:
            out.append(change)
    out += [c for d in before if d.key not in matched and (c := _decision_change(d, None)) is not None]
    return sorted(out, key=lambda c: (c.layer.casefold(), c.question.casefold(), c.key))


def _supported(claim: dict[str, Any]) -> list[str]:
    return sorted({c["url"] for c in _list(claim.get("citations")) if isinstance(c, dict)
                   and c.get("support") == "supported" and isinstance(c.get("url"), str)})


def lost_citations(old: object, new: object) -> list[DiffItem]:
    """Claims that had a supported citation in the old ledger and have none in the new one."""
    old_claims, new_claims = _items(old, "claims"), _items(new, "claims")
    out = []
    for key in sorted(old_claims.keys() & new_claims.keys()):
        before, claim = _supported(old_claims[key]), new_claims[key]
        if before and not _supported(claim):
            kinds = sorted({_text(c.get("support")) for c in _list(claim.get("citations")) if isinstance(c, dict)})
            out.append(DiffItem(key=key, layer=_text(claim.get("layer")), summary=_text(claim.get("statement")),
                                before="supported by " + ", ".join(before),
                                after=", ".join(k for k in kinds if k) or "no citation"))
    return out


def _change(item: DiffItem) -> str:
    if item.before and item.after:
        return f"{item.before} → {item.after}"
    return item.after or item.before or ""


def _code(text: str) -> str:
    return for_pr_body(text).replace("`", "'")


def _items(ledger: Any, name: str) -> dict[str, dict[str, Any]]:
    """`ledger[name]` as {key: item}, keeping only well-formed items (any JSON is accepted)."""
    values = ledger.get(name) if isinstance(ledger, dict) else None
    out: dict[str, dict[str, Any]] = {}
    for item in values if isinstance(values, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = item
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _support(cluster: dict[str, Any]) -> int:
    return len(_list(cluster.get("reports")))


def describe(cluster: dict[str, Any]) -> str:
    """'convergent (3 reports, 3 families)' — the state a diff item shows before and after."""
    reports = _support(cluster)
    families = len(_list(cluster.get("families")))
    status = (_text(cluster.get("status")) or "unknown").replace("_", "-")
    if cluster.get("flagged") is True:
        status += ", flagged"
    report_word = "report" if reports == 1 else "reports"
    family_word = "family" if families == 1 else "families"
    return f"{status} ({reports} {report_word}, {families} {family_word})"


def _item(key: str, cluster: dict[str, Any], before: str | None, after: str | None) -> DiffItem:
    summary = _text(cluster.get("pick")) or _text(cluster.get("summary"))
    return DiffItem(key=key, layer=_text(cluster.get("layer")), summary=summary, before=before, after=after)


def _sides(divergence: dict[str, Any]) -> set[str]:
    return {p["cluster"] for p in _list(divergence.get("positions")) if isinstance(p, dict)
            and isinstance(p.get("cluster"), str)}


def diff_ledgers(old: dict[str, Any] | None, new: dict[str, Any]) -> LedgerDiff:
    """Compare two ledgers (parsed `claims.json`); tolerant of any shape in either."""
    result = LedgerDiff(decisions=diff_decisions(old, new), lost_citations=lost_citations(old, new))
    new_clusters = _items(new, "clusters")
    old_clusters = _items(old, "clusters")
    for key in sorted(new_clusters):
        cluster = new_clusters[key]
        previous = old_clusters.get(key)
        if previous is None:
            result.new.append(_item(key, cluster, None, describe(cluster)))
            continue
        before, after = describe(previous), describe(cluster)
        now, then = cluster.get("status"), previous.get("status")
        if now == "convergent" and then != "convergent":
            result.promoted.append(_item(key, cluster, before, after))
        elif now != "divergent" and (_support(cluster) < _support(previous)
                                     or (then == "convergent" and now != "convergent")):
            result.lost_support.append(_item(key, cluster, before, after))
    for key in sorted(set(old_clusters) - set(new_clusters)):
        result.dropped.append(_item(key, old_clusters[key], describe(old_clusters[key]), None))
    old_divergences = _items(old, "divergences")
    old_sides = [_sides(d) for d in old_divergences.values()]
    for key, divergence in sorted(_items(new, "divergences").items()):
        sides = _sides(divergence)
        if key in old_divergences or any(sides & previous for previous in old_sides):
            continue
        positions = [p for p in _list(divergence.get("positions")) if isinstance(p, dict)]
        labels = " vs ".join(_text(p.get("label")) for p in positions)
        support = " vs ".join(str(len(_list(p.get("reports")))) for p in positions)
        state = "no consensus" if divergence.get("tie") is True else "divergent"
        result.new_divergences.append(DiffItem(key=key, layer=_text(divergence.get("layer")), summary=labels,
                                               before=None, after=f"{state} ({support} reports)"))
    return result
