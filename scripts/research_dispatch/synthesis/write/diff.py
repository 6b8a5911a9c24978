"""Diff two claims ledgers: what a refresh changed in the research, apart from what re-running the
synthesis changed.

**The research, or the synthesis?** A decision can move because a report changed, or only because the
synthesis was made another way: another extractor model or prompt re-extracted reports whose text did
not change (every six-monthly cycle does, with newer models), another judge aligned or checked them, a
counting rule was switched. A reviewer must tell these apart, so the diff first compares the two
ledgers' `settings` and report hashes (`Rerun`): when the synthesis was re-run another way, the diff
says so on its first line, and every item below is attributed — to the research when a report it
involves (a side's, a member claim's) changed or is new or gone, else to the re-run, listed apart
(`LedgerDiff.rerun_items`). Without any such change everything is the research's, as a diff of
unchanged settings can only be.

Then, **by decision** (`decisions`: a divergence, or a recommendation that is a decision on its own):
every decision whose verdict line or whose sides' support (families, sources) changed is listed with
the line and each side's support before and after, and what changed is named — a changed favourite
(2:1 → 1:2, or a tie that is no longer one), a new side, a lost side. A decision is the same across
the two ledgers when it has the same key or shares a side (a cluster key). A refresh whose verdict
line changed is therefore never "no change". Then **claims that lost their supported citation**
(a claim key that had a `supported` citation and, still anchored in its report, has none now) are
always listed, whatever their cluster did; a claim that lost its anchor did not lose a citation's
support, and is never listed as if it had.

Then by cluster (each cluster lands in at most one category, by stable cluster key):

* `promoted` — now convergent, was not;
* `lost_support` — fewer families, or as many and fewer sources, than before, or no longer convergent
  (and not divergent);
* `new_divergences` — divergences the previous ledger did not have: none of the old divergences has
  its key or shares a side (a cluster) with it;
* `new` — clusters whose key is new;
* `dropped` — clusters whose key is gone.

Support is counted in families and sources, never reports (a second report of one family adds no
independent support). `old=None` (the first synthesis, or a previous ledger that was damaged) makes
every cluster `new` and every divergence a new divergence, and lists no decision as changed. A previous
@2 ledger has no checked citations: none of its claims can lose one, and its decisions show no
sources. The publish stage calls `diff_ledgers` on the committed and the new `claims.json`, and pastes
`markdown()` into the PR body; `text()` is for the terminal. Both ledgers are read defensively: whatever
JSON they hold, a field of the wrong type is treated as absent, never an error. Summaries come from
model output: `markdown()` sanitises them for a PR body (no HTML, no comments, no @mentions) and
truncates long lists with a count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from research_dispatch.core.sanitize import for_pr_body, one_line
from research_dispatch.synthesis.count.asked import recorded, single_source_label
from research_dispatch.synthesis.count.decisions import Decision, decisions, plural, pr_text

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
EXTRACTION_SETTINGS = ("extractor_model", "extraction_prompt", "layers")
SETTINGS = (  # (ledger setting, what a reader calls it)
    ("extractor_model", "the extractor"), ("extraction_prompt", "the extraction prompt"),
    ("layers", "the layer vocabulary"), ("judge_models", "the alignment judges"),
    ("judge_prompt", "the alignment prompt"), ("batch_size", "the alignment batch size"),
    ("similarity_threshold", "the alignment similarity threshold"), ("citation_models", "the citation judges"),
    ("citation_prompt", "the citation-check prompt"), ("count_unverified", "count_unverified"),
    ("count_unsupported", "count_unsupported"),
)


@dataclass(frozen=True)
class DiffItem:
    key: str
    layer: str
    summary: str
    before: str | None
    after: str | None
    reports: tuple[str, ...] = ()  # the reports it involves (what `Rerun` attributes it by)


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
    reports: tuple[str, ...] = ()  # the reports holding a side, before or after

    @property
    def title(self) -> str:
        return f"{self.layer} — {self.question}" if self.question else self.layer


@dataclass(frozen=True)
class Rerun:
    """How the synthesis was made differently, the research aside: its settings that changed ("the
    extractor: a → b") and the reports whose text did not change but that were extracted again."""

    changes: tuple[str, ...]
    reextracted: tuple[str, ...]
    changed_reports: frozenset[str]  # new, gone or changed: what the research changed

    @property
    def extraction(self) -> bool:
        return bool(self.reextracted)

    @property
    def what(self) -> str:
        """What moved things without a report changing: 're-extraction' or 'the synthesis settings'."""
        return "re-extraction" if self.extraction else "the synthesis settings"

    def line(self) -> str:
        """The claim diff's first line: what was re-run, and why."""
        changed = "; ".join(self.changes) or "no setting changed (the earlier answers were not replayed)"
        if self.extraction:
            return (f"Re-extracted: {plural(len(self.reextracted), 'report')} whose text is unchanged "
                    f"{'was' if len(self.reextracted) == 1 else 'were'} extracted again ({changed}); what moved "
                    "only because of that is listed apart from what the research changed.")
        return (f"Re-run with other settings ({changed}); what moved only because of that is listed apart from "
                "what the research changed.")

    def research(self, reports: Iterable[str]) -> bool:
        """Is a change involving these reports the research's (one of them changed, is new or is gone)?"""
        return any(report in self.changed_reports for report in reports)


@dataclass
class LedgerDiff:
    """What changed, by category: the research's, and (`rerun_items`) what moved only because the
    synthesis was re-run another way (`rerun`, None when it was not)."""

    decisions: list[DecisionChange] = field(default_factory=list)
    lost_citations: list[DiffItem] = field(default_factory=list)
    promoted: list[DiffItem] = field(default_factory=list)
    lost_support: list[DiffItem] = field(default_factory=list)
    new_divergences: list[DiffItem] = field(default_factory=list)
    new: list[DiffItem] = field(default_factory=list)
    dropped: list[DiffItem] = field(default_factory=list)
    rerun: Rerun | None = None
    rerun_items: LedgerDiff | None = None

    @property
    def is_empty(self) -> bool:
        return self.rerun is None and not self._any()

    def _any(self) -> bool:
        return any(getattr(self, name) for name, _ in CATEGORIES)

    def counts(self) -> dict[str, int]:
        """The research's changes by category (what moved only by a re-run is in `rerun_items`)."""
        return {name: len(getattr(self, name)) for name, _ in CATEGORIES}

    def headline(self) -> str:
        if self.is_empty:
            return "claim diff: no change"
        research = self._counted(self.counts()) if self._any() else "no change"
        if self.rerun is None or self.rerun_items is None:
            return "claim diff: " + research
        moved = self.rerun_items.counts()
        return (f"claim diff: {self.rerun.line()} Research: {research}; moved only by {self.rerun.what}: "
                + (self._counted(moved) if any(moved.values()) else "nothing"))

    @staticmethod
    def _counted(counts: dict[str, int]) -> str:
        return ", ".join(f"{counts[name]} {title.lower()}" for name, title in CATEGORIES)

    def text(self, max_items: int = 200) -> str:
        """Plain text for the terminal: the headline, then at most `max_items` items in all."""
        lines = [self.headline()]
        budget = [max(0, max_items)]
        self._text_items(lines, budget, "")
        if self.rerun is not None and self.rerun_items is not None and self.rerun_items._any():
            lines.append(f"moved only by {self.rerun.what} (no report of theirs changed):")
            self.rerun_items._text_items(lines, budget, "  ")
        return "\n".join(lines)

    def _text_items(self, lines: list[str], budget: list[int], pad: str) -> None:
        if self.decisions:
            lines.append(f"{pad}decisions changed:")
            shown_decisions = self.decisions[:budget[0]]
            budget[0] -= len(shown_decisions)
            for change in shown_decisions:
                lines.append(f"{pad}  {change.key}: {one_line(change.title, SUMMARY_CHARS)}")
                lines += [f"{pad}    {row}" for row in _decision_rows(change, plain=True)]
            if len(self.decisions) > len(shown_decisions):
                lines.append(f"{pad}  … and {len(self.decisions) - len(shown_decisions)} more "
                             "(see framework/claims.json)")
        for name, title in CATEGORIES:
            items = getattr(self, name)
            if not items or name == "decisions":
                continue
            lines.append(f"{pad}{title.lower()}:")
            shown = items[:budget[0]]
            budget[0] -= len(shown)
            for item in shown:
                lines.append(f"{pad}  {item.key}: {one_line(item.summary, SUMMARY_CHARS)} ({_change(item)})")
            if len(items) > len(shown):
                lines.append(f"{pad}  … and {len(items) - len(shown)} more (see framework/claims.json)")

    def markdown(self, max_items: int = 50) -> str:
        """For a PR body or job summary: sanitised, at most `max_items` items in all, then a count. The
        first line says when the synthesis was re-run another way; what moved only because of that
        follows the research's changes, apart and folded."""
        if self.is_empty:
            return "No change in the claims ledger."
        lines: list[str] = [f"**{pr_text(self.rerun.line())}**", ""] if self.rerun is not None else []
        budget = [max(0, max_items)]
        if self._any():
            lines += self._markdown_items(budget)
        else:
            lines += ["No change in the research.", ""]
        moved = self.rerun_items
        if self.rerun is not None and moved is not None and moved._any():
            counts = moved.counts()
            lines += [f"<details><summary>Moved only by {self.rerun.what} (no report of theirs changed): "
                      + " · ".join(f"{title}: {counts[name]}" for name, title in CATEGORIES if counts[name])
                      + "</summary>", ""]
            lines += moved._markdown_items(budget)
            lines += ["</details>", ""]
        return "\n".join(lines).rstrip() + "\n"

    def _markdown_items(self, budget: list[int]) -> list[str]:
        counts = self.counts()
        lines = [" · ".join(f"{title}: **{counts[name]}**" for name, title in CATEGORIES), ""]
        if self.decisions:
            lines += ["**Decisions changed** (the verdict line, and each side's support: families, sources)", ""]
            shown_decisions = self.decisions[:budget[0]]
            budget[0] -= len(shown_decisions)
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
            lines += [f"**{title}**", ""]
            shown = items[:budget[0]]
            budget[0] -= len(shown)
            for item in shown:
                summary = pr_text(one_line(item.summary, SUMMARY_CHARS))
                lines.append(f"- `{_code(item.key)}` {pr_text(one_line(item.layer, 60))}: {summary} — "
                             f"{pr_text(_change(item))}")
            if len(items) > len(shown):
                lines.append(f"- … and {len(items) - len(shown)} more (see `framework/claims.json`)")
            lines.append("")
        return lines


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


def _holders(*made: Decision | None) -> tuple[str, ...]:
    return tuple(sorted({r for decision in made if decision is not None for side in decision.sides
                         for r in side.reports}))


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
                          sides_after=_side_rows(new), changes=tuple(changes), reports=_holders(old, new))


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
    """Claims that had a supported citation in the old ledger and, still anchored, have none in the new
    one (a claim no longer anchored did not lose its citation's support: it was never checked)."""
    old_claims, new_claims = _items(old, "claims"), _items(new, "claims")
    out = []
    for key in sorted(old_claims.keys() & new_claims.keys()):
        before, claim = _supported(old_claims[key]), new_claims[key]
        if before and not _supported(claim) and claim.get("anchored") is not False:
            kinds = sorted({_text(c.get("support")) for c in _list(claim.get("citations")) if isinstance(c, dict)})
            out.append(DiffItem(key=key, layer=_text(claim.get("layer")), summary=_text(claim.get("statement")),
                                before="supported by " + ", ".join(before),
                                after=", ".join(k for k in kinds if k) or "no citation",
                                reports=(_text(claim.get("report")),)))
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


def _support(cluster: dict[str, Any]) -> tuple[int, int]:
    """What support is measured in: families, then sources (never reports)."""
    return len(_list(cluster.get("families"))), len(_list(cluster.get("sources")))


def describe(cluster: dict[str, Any]) -> str:
    """'convergent (3 families, 2 sources)' — the state a diff item shows before and after: support is
    families and sources, never reports (a second report of one family adds no independent support)."""
    families, sources = _support(cluster)
    status = (_text(cluster.get("status")) or "unknown").replace("_", "-")
    if cluster.get("flagged") is True and status == "single-source":
        asked = recorded(_strings(cluster.get("topics")), _strings(cluster.get("asked")))
        status = single_source_label(_strings(cluster.get("families")), asked)
    elif cluster.get("flagged") is True:
        status += ", flagged"
    return f"{status} ({plural(families, 'family', 'families')}, {plural(sources, 'source')})"


def _strings(value: Any) -> list[str]:
    return [v for v in _list(value) if isinstance(v, str)]


def _involved(*clusters: dict[str, Any] | None) -> tuple[str, ...]:
    """The reports a cluster involves, before and after: those that count for it and those of its claims."""
    reports = {r for c in clusters if c for r in _list(c.get("reports")) + _list(c.get("excluded_reports"))
               if isinstance(r, str)}
    reports |= {m.split("#", 1)[0] for c in clusters if c for m in _list(c.get("members")) if isinstance(m, str)}
    return tuple(sorted(reports))


def _item(key: str, cluster: dict[str, Any], before: str | None, after: str | None,
          previous: dict[str, Any] | None = None) -> DiffItem:
    summary = _text(cluster.get("pick")) or _text(cluster.get("summary"))
    return DiffItem(key=key, layer=_text(cluster.get("layer")), summary=summary, before=before, after=after,
                    reports=_involved(cluster, previous))


def _sides(divergence: dict[str, Any]) -> set[str]:
    return {p["cluster"] for p in _list(divergence.get("positions")) if isinstance(p, dict)
            and isinstance(p.get("cluster"), str)}


def rerun_of(old: Any, new: Any) -> Rerun | None:
    """How the new ledger's synthesis was made differently from the old one's (None: the same way, or no
    old ledger to compare with): the settings that changed, and the unchanged reports extracted again."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    before, after = old.get("settings"), new.get("settings")
    before, after = (before if isinstance(before, dict) else {}), (after if isinstance(after, dict) else {})
    changes = tuple(f"{name}: {_setting(before.get(key))} → {_setting(after.get(key))}" for key, name in SETTINGS
                    if key in before and key in after and before[key] != after[key])
    old_reports, new_reports = _reports(old), _reports(new)
    changed = frozenset(stem for stem in old_reports.keys() | new_reports.keys()
                        if stem not in old_reports or stem not in new_reports
                        or old_reports[stem][0] != new_reports[stem][0])
    reextracted = tuple(sorted(stem for stem in old_reports.keys() & new_reports.keys() if stem not in changed
                               and old_reports[stem][1] != new_reports[stem][1]))
    if not changes and not reextracted:
        return None
    return Rerun(changes=changes, reextracted=reextracted, changed_reports=changed)


def _setting(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return one_line(str(value).lower() if isinstance(value, bool) else str(value), 80)


def _reports(ledger: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """stem → (the report file's sha256, the key of the extraction request that read it)."""
    out = {}
    for report in _list(ledger.get("reports")):
        if isinstance(report, dict) and isinstance(report.get("stem"), str):
            extraction = report.get("extraction")
            key = _text(extraction.get("key")) if isinstance(extraction, dict) else ""
            out[report["stem"]] = (_text(report.get("sha256")), key)
    return out


def diff_ledgers(old: dict[str, Any] | None, new: dict[str, Any]) -> LedgerDiff:
    """Compare two ledgers (parsed `claims.json`); tolerant of any shape in either. When the synthesis was
    re-run another way (`rerun_of`), what involves no changed report moves to `rerun_items`."""
    everything = _everything(old, new)
    rerun = rerun_of(old, new)
    if rerun is None:
        return everything
    research, moved = LedgerDiff(rerun=rerun), LedgerDiff()
    for name, _title in CATEGORIES:
        items = getattr(everything, name)
        getattr(research, name).extend(i for i in items if rerun.research(i.reports))
        getattr(moved, name).extend(i for i in items if not rerun.research(i.reports))
    research.rerun_items = moved
    return research


def _everything(old: dict[str, Any] | None, new: dict[str, Any]) -> LedgerDiff:
    """Every change between the two ledgers, whatever made it."""
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
            result.promoted.append(_item(key, cluster, before, after, previous))
        elif now != "divergent" and (_support(cluster) < _support(previous)
                                     or (then == "convergent" and now != "convergent")):
            result.lost_support.append(_item(key, cluster, before, after, previous))
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
        support = " vs ".join(str(len(_list(p.get("families")))) for p in positions)
        state = "no consensus" if divergence.get("tie") is True else "divergent"
        holders = {r for p in positions for r in _list(p.get("reports")) if isinstance(r, str)}
        holders |= {r for r in _list(divergence.get("ambivalent_reports")) if isinstance(r, str)}
        result.new_divergences.append(DiffItem(key=key, layer=_text(divergence.get("layer")), summary=labels,
                                               before=None, after=f"{state} ({support} families)",
                                               reports=tuple(sorted(holders))))
    return result
