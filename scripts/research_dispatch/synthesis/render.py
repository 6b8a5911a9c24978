"""Render `framework/<name>.md` from the ledger: the document readers act on.

The document is a view of `claims.json` and nothing else, so the two cannot disagree. Sections: a
banner when the synthesis is incomplete, the TL;DR decision table (layer, decision, pick, support,
status), convergent findings, same-family agreement, divergences with a "use X today, switch to Y when
Z" line (or "no consensus" when support is equal), single-source claims (flagged ones first), claims
only excluded reports make and the reports not used, coverage and routes, limitations, and the
sources cited, numbered by first use. Excluded reports' claims that contradict a counted position are
shown beside it, marked as excluded. Ordering is fixed (by layer, then key) and the only date-like
text is the cycle, so an unchanged ledger renders to the same bytes.

Every string that came from a model is untrusted: it is collapsed to one line by
`sanitize.one_line` and Markdown-escaped here, so it cannot open links, images, HTML or tables.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from research_dispatch.config.settings import Settings
from research_dispatch.core.sanitize import one_line
from research_dispatch.synthesis.classify import FLAG
from research_dispatch.synthesis.ledger import Ledger, LedgerClaim, LedgerCluster

MAX_OTHER_SINGLE = 200
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|])")
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,20}):(//)")
_SAFE_URL = re.compile(r"^https?://[^\s<>\"'`]+$")
STATUS_TEXT = {
    "convergent": "convergent",
    "same_family": "same family only — not independent",
    "divergent": "divergent",
    "single_source": "single-source",
    "excluded": "excluded reports only",
}


def md(text: str, limit: int = 600) -> str:
    """Untrusted text as inert inline Markdown: one line, special characters escaped, no autolinks."""
    text = one_line(text, limit)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return _SCHEME.sub(r"\1&#58;\2", text)


def title_of(name: str) -> str:
    words = re.split(r"[-_.]+", name)
    return " ".join(w[:1].upper() + w[1:] for w in words if w)


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


class _Sources:
    """Document-level source numbers, assigned on first use."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.titles: dict[str, str] = {}

    def number(self, url: str, title: str) -> int:
        if url not in self.numbers:
            self.numbers[url] = len(self.numbers) + 1
            self.titles[url] = title
        return self.numbers[url]


class _Renderer:
    def __init__(self, ledger: Ledger, settings: Settings, notice: str | None = None) -> None:
        self.notice = notice
        self.ledger = ledger
        self.settings = settings
        self.reports = {r.stem: r for r in ledger.reports}
        self.claims = {c.key: c for c in ledger.claims}
        self.sources = _Sources()
        self.lines: list[str] = []

    # -- pieces ------------------------------------------------------------------------------------
    def report_link(self, stem: str) -> str:
        report = self.reports[stem]
        target = posixpath.relpath(report.path, self.settings.framework_dir)
        return f"[{md(stem, 200)}](<{target}>)"

    def who(self, stem: str) -> str:
        return f"{self.report_link(stem)} ({md(self.reports[stem].family, 60)})"

    def cite(self, claim: LedgerClaim) -> str:
        report = self.reports[claim.report]
        by_id = {s.id: s for s in report.sources}
        refs = []
        for number in claim.sources:
            source = by_id.get(number)
            if source is None:
                continue
            n = self.sources.number(source.url, source.title)
            refs.append(f"[\\[{n}\\]](<{source.url}>)" if _SAFE_URL.match(source.url) else f"\\[{n}\\]")
        return (" " + " ".join(refs)) if refs else ""

    def statement_line(self, claim: LedgerClaim, indent: str = "- ") -> str:
        extra = []
        if claim.condition:
            extra.append(f"condition: {md(claim.condition, 200)}")
        if claim.alternatives:
            extra.append("alternatives: " + ", ".join(md(a, 80) for a in claim.alternatives))
        tail = f" ({'; '.join(extra)})" if extra else ""
        return f"{indent}{self.who(claim.report)}: “{md(claim.statement)}”{self.cite(claim)}{tail}"

    def support(self, reports: list[str], families: list[str]) -> str:
        if not reports:
            return "no counted report"
        if len(reports) == 1:
            return f"1 report ({md(families[0] if families else self.reports[reports[0]].family, 60)})"
        return f"{_plural(len(reports), 'report')} · {_plural(len(families), 'family', 'families')}"

    def members(self, keys: Iterable[str]) -> list[LedgerClaim]:
        return sorted((self.claims[k] for k in keys), key=lambda c: (c.report, c.key))

    def heading(self, cluster: LedgerCluster) -> str:
        what = cluster.pick if cluster.pick else cluster.summary
        return f"### {md(cluster.layer, 80)} — {md(what, 160)}"

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    def contrary(self, keys: list[str], indent: str = "- ") -> None:
        """Claims of excluded reports that the judge set against a counted position: shown, not counted."""
        if not keys:
            return
        self.emit(f"{indent}Contradicted by reports excluded from support (not counted):")
        for claim in self.members(keys):
            self.emit(self.statement_line(claim, indent=f"{indent.replace('-', ' ')}  - "))

    # -- sections ----------------------------------------------------------------------------------
    def header(self) -> None:
        counts = self.ledger.counts
        statuses = counts["clusters"]
        families = sorted({f for r in self.ledger.reports if r.counted for f in r.families})
        skipped = ""
        if counts.get("ignored") or counts.get("failed"):
            skipped = (f" · {counts.get('ignored', 0)} ignored (not a planned leg), "
                       f"{counts.get('failed', 0)} failed (never counted)")
        self.emit(
            f"# {md(title_of(self.ledger.framework), 120)} — synthesis", "",
            "<!-- Generated by `research-dispatch synthesize` from framework/claims.json. Do not edit by hand: "
            "change the topics or the reports and re-run. -->", "",
            *([f"> **{md(self.notice, 400)}**", ""] if self.notice else []),
            f"Cycle **{md(self.ledger.cycle, 40)}** · {_plural(counts['reports'], 'report')} · "
            f"{counts['counted']} counted towards support from "
            f"{_plural(len(families), 'model family', 'model families')} · "
            f"{counts['excluded']} excluded (route not verified){skipped} · "
            f"{statuses['convergent']} convergent, {statuses['same_family']} same-family, "
            f"{statuses['divergent']} divergent, {statuses['single_source']} single-source "
            f"({counts['flagged']} flagged).", "")
        if self.ledger.incomplete:
            self.emit("> **Incomplete synthesis.** " + " ".join(md(item, 900) for item in self.ledger.incomplete)
                      + " Re-running `research-dispatch synthesize` replays what was done and continues.", "")
        self.emit(
            "A finding is **convergent** when at least two counted reports from independent model families "
            "support it; agreement within one family is shown separately because it is not independent. "
            "Positions are **divergent** only when the judge found them to be alternatives for the same "
            "decision (or opposite findings) and different counted reports hold them; a divergence reads "
            "“use X today, switch to Y when Z” when X has more support, and “no consensus” when support is "
            "equal. A claim made by one counted report only is **single-source**, flagged "
            f"“{FLAG}” when it is a recommendation or high-confidence (so is a divergence side held by one "
            "report). Claims were extracted by a model (statements that only describe a source were "
            "dropped); alignment was judged by a model that saw anonymised reports; the classification below "
            "is deterministic code over `claims.json`.", "")

    def decision_table(self) -> None:
        rows: list[tuple[str, str, str, str, str, str]] = []
        in_divergence: set[str] = set()
        for divergence in self.ledger.divergences:
            in_divergence.update(p.cluster for p in divergence.positions)
            pick = md(divergence.line.removeprefix("Use "), 400)
            support = " vs ".join(str(len(p.reports)) for p in divergence.positions) + " reports"
            status = "**divergent**" + (" — no consensus" if divergence.tie else "")
            if divergence.kind == "contradiction":
                status += " (contradiction)"
            rows.append((divergence.layer.casefold(), md(divergence.layer, 80), md(divergence.decision or "—", 80),
                         pick, support, status))
        for cluster in self.ledger.clusters:
            if not cluster.pick or cluster.key in in_divergence or cluster.status in ("excluded", "divergent"):
                continue
            status = STATUS_TEXT[cluster.status]
            if cluster.status == "convergent":
                status = "**convergent**"
            elif cluster.status == "single_source" and cluster.flagged:
                status = FLAG
            rows.append((cluster.layer.casefold(), md(cluster.layer, 80), md(cluster.decision or "—", 80),
                         md(cluster.pick, 100), self.support(cluster.reports, cluster.families), status))
        self.emit("## TL;DR — decision table", "")
        if not rows:
            self.emit("No report made a recommendation that could be placed in the table.", "")
            return
        self.emit("| Layer | Decision | Pick | Support | Status |", "|---|---|---|---|---|")
        for _sort, layer, decision, pick, support, status in sorted(rows, key=lambda r: (r[0], r[2], r[3])):
            self.emit(f"| {layer} | {decision} | {pick} | {support} | {status} |")
        self.emit("")

    def cluster_section(self, title: str, status: str, intro: str) -> None:
        clusters = [c for c in self.ledger.clusters if c.status == status]
        self.emit(f"## {title}", "", intro, "")
        if not clusters:
            self.emit("None this cycle.", "")
            return
        for cluster in sorted(clusters, key=lambda c: (c.layer.casefold(), c.key)):
            self.emit(self.heading(cluster), "",
                      f"Supported by {self.support(cluster.reports, cluster.families)}: "
                      + ", ".join(self.who(r) for r in cluster.reports) + f". Key `{cluster.key}`.", "")
            self.emit(*(self.statement_line(c) for c in self.members(cluster.members)
                        if c.report in cluster.reports))
            if cluster.excluded_reports:
                self.emit("- Also stated by reports excluded from support: "
                          + ", ".join(self.report_link(r) for r in cluster.excluded_reports) + ".")
            self.contrary(cluster.contrary_excluded)
            self.emit("")

    def divergences(self) -> None:
        self.emit("## Divergent findings", "",
                  "Positions the judge found to be alternatives for the same decision, or opposite findings, "
                  "held by different counted reports. Neither position is dropped. The line in bold favours "
                  "a position only when its support is greater (more independent families, then more "
                  "reports); equal support reads “no consensus”.", "")
        if not self.ledger.divergences:
            self.emit("None this cycle.", "")
            return
        by_key = {c.key: c for c in self.ledger.clusters}
        for divergence in sorted(self.ledger.divergences, key=lambda d: (d.layer.casefold(), d.key)):
            kind = "alternatives" if divergence.kind == "alternatives" else "contradiction"
            decision = f" — {md(divergence.decision, 120)}" if divergence.decision else ""
            self.emit(f"### {md(divergence.layer, 80)}{decision} ({kind})", "", f"**{md(divergence.line, 900)}**", "")
            for number, position in enumerate(divergence.positions, start=1):
                single = f" · {FLAG}" if len(position.reports) == 1 else ""
                condition = f" · condition: {md(position.condition, 200)}" if position.condition else ""
                self.emit(f"{number}. **{md(position.label, 160)}** — "
                          f"{self.support(position.reports, position.families)}{single}{condition}")
                for claim in self.members(position.claims):
                    self.emit(self.statement_line(claim, indent="   - "))
            if divergence.ambivalent_reports:
                self.emit("", "Counted for no side, because they hold more than one: "
                          + ", ".join(self.who(r) for r in divergence.ambivalent_reports) + ".")
            for key in divergence.weighed:
                cluster = by_key[key]
                self.emit("", f"Also weighed, only by those reports: **{md(cluster.label, 160)}** (key `{key}`).")
            if divergence.excluded_claims:
                self.emit("")
                self.contrary(divergence.excluded_claims)
            self.emit("")

    def single_source(self) -> None:
        clusters = [c for c in self.ledger.clusters if c.status == "single_source"]
        flagged = [c for c in clusters if c.flagged]
        other = [c for c in clusters if not c.flagged]
        self.emit("## Single-source claims", "",
                  "Made by one counted report only. Kept, but not framework decisions until another family "
                  "agrees.", "", f"### Flagged: {FLAG}", "")
        if not flagged:
            self.emit("None this cycle.", "")
        for cluster in sorted(flagged, key=lambda c: (c.layer.casefold(), c.key)):
            claim = self.members(c for c in cluster.members if self.claims[c].report in cluster.reports)[0]
            what = f"**{md(cluster.pick, 100)}** — " if cluster.pick else ""
            self.emit(f"- {md(cluster.layer, 80)}: {what}{self.statement_line(claim, indent='')} "
                      f"({claim.stance}, {claim.confidence} confidence)")
            self.contrary(cluster.contrary_excluded, indent="  - ")
        self.emit("", "### Other single-source findings", "")
        if not other:
            self.emit("None this cycle.", "")
        ordered = sorted(other, key=lambda c: (c.layer.casefold(), c.key))
        for cluster in ordered[:MAX_OTHER_SINGLE]:
            claim = self.members(c for c in cluster.members if self.claims[c].report in cluster.reports)[0]
            self.emit(f"- {md(cluster.layer, 80)}: {self.statement_line(claim, indent='')}")
            self.contrary(cluster.contrary_excluded, indent="  - ")
        if len(ordered) > MAX_OTHER_SINGLE:
            self.emit(f"- … and {len(ordered) - MAX_OTHER_SINGLE} more in `claims.json`.")
        self.emit("")

    def excluded(self) -> None:
        excluded = [r for r in self.ledger.reports if not r.counted]
        counted_unverified = [r for r in self.ledger.reports if r.counted and not r.route_verified]
        if not excluded and not counted_unverified and not self.ledger.skipped:
            return
        self.emit("## Reports excluded from support", "")
        if excluded:
            self.emit("These reports' routes are not verified, so they do not count towards support "
                      "(`synthesis.count_unverified = true` counts them):", "")
            for report in excluded:
                self.emit(f"- {self.report_link(report.stem)} — route `{md(report.route, 40)}`"
                          + (f" ({md('; '.join(report.route_problems), 300)})" if report.route_problems else ""))
            self.emit("")
        if counted_unverified:
            served = [f"{self.who(r.stem)}, served by {md(', '.join(r.served_models) or 'nothing recorded', 200)}"
                      for r in counted_unverified]
            self.emit("Counted although their routes are not verified (`count_unverified` is on), under the "
                      "families their call logs say served them: " + "; ".join(served) + ".", "")
        if self.ledger.skipped:
            self.emit("Not used at all (not extracted, not counted):", "")
            for item in self.ledger.skipped:
                self.emit(f"- `{md(item.path, 200)}` — {md(item.reason, 400)}")
            self.emit("")
        only = [c for c in self.ledger.clusters if c.status == "excluded"]
        if only:
            self.emit("Claims made only by excluded reports:", "")
            for cluster in sorted(only, key=lambda c: (c.layer.casefold(), c.key)):
                claim = self.members(cluster.members)[0]
                self.emit(f"- {md(cluster.layer, 80)}: {self.statement_line(claim, indent='')}")
            self.emit("")

    def coverage(self) -> None:
        self.emit("## Coverage and routes", "",
                  "| Report | Topic | Author model | Family | Served model | Route | Status | Claims | Counted |",
                  "|---|---|---|---|---|---|---|---|---|")
        for report in self.ledger.reports:
            served = ", ".join(report.served_models) or "—"
            route = report.route + ("" if report.route_verified else " ⚠")
            claims = str(len(report.claims)) if report.extraction.status == "ok" else (
                "not extracted (time limit)" if report.extraction.status == "timed_out" else "extraction failed")
            self.emit(f"| {self.report_link(report.stem)} | {md(report.topic, 80)} | {md(report.requested_model, 80)} "
                      f"| {md(report.family, 40)} | {md(served, 160)} | {md(route, 40)} | {md(report.status, 20)} "
                      f"| {claims} | {'yes' if report.counted else 'no'} |")
        for leg in self.ledger.legs:  # planned legs the synthesis read no report of (missing, failed, ...)
            if leg.stem in self.reports:
                continue
            self.emit(f"| {md(leg.stem, 200)} | {md(leg.topic, 80)} | {md(leg.model, 80)} | — | — | — "
                      f"| {md(leg.state, 20)} | — | no |")
        self.emit("")

    def limitations(self) -> None:
        self.emit("## Limitations", "")
        if not self.ledger.limitations:
            self.emit("- None recorded: every planned leg has an ok report with a verified route, every report was "
                      "extracted and every batch was judged by a model of another family.")
        dropped = self.ledger.counts.get("not_findings", 0)
        if dropped:
            self.emit(f"- {_plural(dropped, 'extracted statement')} only described a source or asserted nothing "
                      f"and {'was' if dropped == 1 else 'were'} dropped; `claims.json` lists them with the reason.")
        for item in self.ledger.limitations:
            self.emit(f"- {md(item, 900)}")
        self.emit("")

    def sources_section(self) -> None:
        self.emit("## Sources", "")
        if not self.sources.numbers:
            self.emit("No claim in this synthesis cites a source.", "")
            return
        for url, number in sorted(self.sources.numbers.items(), key=lambda item: item[1]):
            link = f"<{url}>" if _SAFE_URL.match(url) else md(url, 300)
            self.emit(f"{number}. {md(self.sources.titles[url], 300)} — {link}")
        self.emit("")

    def render(self) -> str:
        self.header()
        self.decision_table()
        self.cluster_section("Convergent findings", "convergent",
                             "Supported by counted reports from at least two model families.")
        self.cluster_section("Same-family agreement (not independent)", "same_family",
                             "Several reports agree, but all were written by models of one family: agreement "
                             "within a family is not independent evidence.")
        self.divergences()
        self.single_source()
        self.excluded()
        self.coverage()
        self.limitations()
        self.sources_section()
        return "\n".join(self.lines).rstrip() + "\n"


def render_document(ledger: Ledger, settings: Settings, notice: str | None = None) -> str:
    """The synthesis document; `notice` (the repository's, `core.notice`) is shown under the title."""
    return _Renderer(ledger, settings, notice).render()

