"""Diff two claims ledgers: what a refresh changed in the synthesis.

Categories (each cluster lands in at most one, by stable cluster key):

* `promoted` — now convergent, was not;
* `lost_support` — fewer counted reports than before, or no longer convergent (and not divergent);
* `new_divergences` — divergences the previous ledger did not have: none of the old divergences has
  its key or shares a side (a cluster) with it;
* `new` — clusters whose key is new;
* `dropped` — clusters whose key is gone.

`old=None` (the first synthesis, or a previous ledger that was damaged) makes every cluster `new` and
every divergence a new divergence. The publish stage calls `diff_ledgers` on the committed and the new
`claims.json`, and pastes `markdown()` into the PR body; `text()` is for the terminal. Both ledgers are
read defensively: whatever JSON they hold, a field of the wrong type is treated as absent, never an
error. Summaries come from model output: `markdown()` sanitises them for a PR body (no HTML, no
comments, no @mentions) and truncates long lists with a count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from research_dispatch.core.sanitize import for_pr_body, one_line

CATEGORIES = (
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


@dataclass
class LedgerDiff:
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
        for name, title in CATEGORIES:
            items = getattr(self, name)
            if not items:
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
        for name, title in CATEGORIES:
            items = getattr(self, name)
            if not items:
                continue
            lines.append(f"**{title}**")
            lines.append("")
            shown = items[:budget]
            budget -= len(shown)
            for item in shown:
                summary = _md(one_line(item.summary, SUMMARY_CHARS))
                lines.append(f"- `{_code(item.key)}` {_md(one_line(item.layer, 60))}: {summary} — "
                             f"{_md(_change(item))}")
            if len(items) > len(shown):
                lines.append(f"- … and {len(items) - len(shown)} more (see `framework/claims.json`)")
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"


def _change(item: DiffItem) -> str:
    if item.before and item.after:
        return f"{item.before} → {item.after}"
    return item.after or item.before or ""


def _md(text: str) -> str:
    """Escape Markdown first, then `for_pr_body` (whose @mention guard must have the last word)."""
    for ch in "\\`*_[]|":
        text = text.replace(ch, "\\" + ch)
    return for_pr_body(text)


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
    result = LedgerDiff()
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
