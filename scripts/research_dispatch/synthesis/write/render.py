"""Render `framework/<name>.md` from the ledger: the document readers act on.

The document is a view of `claims.json` and nothing else, so the two cannot disagree. Sections: the
title, the cycle line and a banner when the synthesis is incomplete; first the TL;DR decision table
(layer, decision, verdict, support in families and sources, status), so a reader meets the answer
before the method; then how the synthesis was made: the extractor and judge models the ledger records,
numbers that add up (claims: anchored, with a supported citation, unsupported, contradicted by their
own source; decisions and findings, each explained once) and the method text, wrapped at `WRAP`
columns; the agreement matrix (decisions × families: for / against / conditional / none),
both from `decisions`; convergent findings ("convergent — one shared source" when every supported
citation is one page); same-family agreement; divergences with a "use X today, switch to Y when Z"
line (or "no consensus" when families are equal) and each side's condition beside the reports that
state it; single-source claims (flagged ones first); claims that do not count, with why; claims only
excluded reports make and the reports not used; coverage, routes and per-leg cost; limitations; and
the sources cited, numbered by first use. Each claim is shown by the report's own words (its quote,
linked to the report section it is in) and each citation by what checking found: the supporting (or
contradicting) passage's words and its link, or why not. Ordering is fixed (by layer, then key) and
the only date-like text is the cycle, so an unchanged ledger renders to the same bytes.

Every string that came from a model or a page is untrusted: it is collapsed to one line by
`sanitize.one_line` and Markdown-escaped here, so it cannot open links, images, HTML or tables.
"""

from __future__ import annotations

import posixpath
import re
import textwrap
from collections.abc import Iterable

from research_dispatch.config.settings import Settings
from research_dispatch.core.sanitize import one_line
from research_dispatch.synthesis.common.checked import Support
from research_dispatch.synthesis.count import decisions as decided
from research_dispatch.synthesis.count.asked import NO_SIDE, NOT_ASKED, ONLY_ONE_ASKED, recorded, single_source_label
from research_dispatch.synthesis.count.classify import FLAG
from research_dispatch.synthesis.count.counting import Standing
from research_dispatch.synthesis.write.ledger import Ledger, LedgerCitation, LedgerClaim, LedgerCluster

MAX_OTHER_SINGLE = 200
MAX_MATRIX_ROWS = 200
MAX_NOT_COUNTED = 200
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|])")
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,20}):(//)")
_SAFE_URL = re.compile(r"^https?://[^\s<>\"'`]+$")
STATUS_TEXT = {
    "convergent": "convergent",
    "same_family": "same family only — not independent",
    "divergent": "divergent",
    "single_source": "single-source",
    "unsupported": "not counted — no checked support",
    "excluded": "excluded reports only",
}
#: How the document words a citation that is not supported (the demo looks for the unsupported line).
CITATION_TEXT = {
    Support.UNSUPPORTED: "does not support it (the judge found nothing, or pointed at no sentence that addresses "
                         "it)",
    Support.NO_EVIDENCE: "no stored passage of this source",
    Support.PHANTOM: "cited, but not in the report's references",
}


def md(text: str, limit: int = 600) -> str:
    """Untrusted text as inert inline Markdown: one line, special characters escaped, no autolinks."""
    text = one_line(text, limit)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return _SCHEME.sub(r"\1&#58;\2", text)


def title_of(name: str) -> str:
    words = re.split(r"[-_.]+", name)
    return " ".join(w[:1].upper() + w[1:] for w in words if w)


_plural = decided.plural


def anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


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
        self.clusters = {c.key: c for c in ledger.clusters}
        self.decisions = decided.decisions(ledger.to_dict())
        self.grid = decided.matrix(ledger.to_dict())
        self.sources = _Sources()
        self.lines: list[str] = []

    # -- pieces ------------------------------------------------------------------------------------
    def report_link(self, stem: str) -> str:
        report = self.reports[stem]
        target = posixpath.relpath(report.path, self.settings.framework_dir)
        return f"[{md(stem, 200)}](<{target}>)"

    def who(self, stem: str) -> str:
        return f"{self.report_link(stem)} ({md(self.reports[stem].family, 60)})"

    def source_ref(self, url: str | None, title: str) -> str:
        """`[n]` for a source (numbered by first use in the document), linked when its url is safe."""
        if url is None:
            return "\\[?\\]"
        n = self.sources.number(url, title)
        return f"[\\[{n}\\]](<{url}>)" if _SAFE_URL.match(url) else f"\\[{n}\\]"

    def cite(self, claim: LedgerClaim) -> str:
        """The claim's citation numbers, as the document numbers its sources (unchecked claims)."""
        by_id = {s.id: s for s in self.reports[claim.report].sources}
        refs = [self.source_ref(by_id[n].url, by_id[n].title) for n in claim.sources if n in by_id]
        return (" " + " ".join(refs)) if refs else ""

    def citation_line(self, claim: LedgerClaim, citation: LedgerCitation) -> str:
        """One citation and what checking it found: the passage's own words when verified, else why not."""
        titles = {s.url: s.title for s in self.reports[claim.report].sources}
        ref = self.source_ref(citation.url, titles.get(citation.url or "", citation.url or ""))
        if citation.support in (Support.SUPPORTED, Support.CONTRADICTED) and citation.quote:
            verb = "supports it" if citation.support is Support.SUPPORTED else "**contradicts it**"
            return f"{ref} {verb}: “{md(citation.quote, 400)}”"
        return f"{ref} {CITATION_TEXT[citation.support]}"

    def words(self, claim: LedgerClaim) -> str:
        """What the report says: its own words when code located them; never the extractor's paraphrase (a claim
        that could not be located is listed under Limitations with the reason)."""
        if claim.anchored and claim.quote:
            return f"“{md(claim.quote)}”"
        return "(a claim that could not be located in the report: see Limitations)"

    def where(self, claim: LedgerClaim) -> str:
        """The report, linked to the section the quote is in."""
        report = self.reports[claim.report]
        target = posixpath.relpath(report.path, self.settings.framework_dir)
        if claim.section:
            target += "#" + anchor(claim.section)
            section = f", § {md(claim.section, 120)}"
        else:
            section = ""
        return f"[{md(claim.report, 200)}](<{target}>) ({md(report.family, 60)}){section}"

    def statement_line(self, claim: LedgerClaim, indent: str = "- ") -> str:
        extra = []
        if claim.condition:
            extra.append(f"condition: {md(claim.condition, 200)}")
        if claim.alternatives:
            extra.append("alternatives: " + ", ".join(md(a, 80) for a in claim.alternatives))
        if claim.position.value == "against" and claim.pick:
            extra.append(f"against {md(claim.pick, 80)}")
        if claim.standing is not Standing.COUNTED:
            extra.append(f"not counted: {claim.standing.reason}")
        tail = f" ({'; '.join(extra)})" if extra else ""
        pad = " " * max(len(indent), 2)  # nested under the claim's own list item
        checked = "".join(f"\n{pad}- {self.citation_line(claim, c)}" for c in claim.citations)
        cited = "" if claim.citations else self.cite(claim)
        return f"{indent}{self.where(claim)}: {self.words(claim)}{cited}{tail}{checked}"

    def support(self, reports: list[str], families: list[str], sources: list[str] | None = None) -> str:
        if not reports:
            return "no counted report"
        text = (f"1 report ({md(families[0] if families else self.reports[reports[0]].family, 60)})"
                if len(reports) == 1 else
                f"{_plural(len(reports), 'report')} · {_plural(len(families), 'family', 'families')}")
        return text if sources is None else f"{text} · {_plural(len(sources), 'source')}"

    def members(self, keys: Iterable[str]) -> list[LedgerClaim]:
        return sorted((self.claims[k] for k in keys), key=lambda c: (c.report, c.key))

    def heading(self, cluster: LedgerCluster) -> str:
        what = cluster.pick if cluster.pick else cluster.summary
        return f"### {md(cluster.layer, 80)} — {md(what, 160)}"

    def flag_counts(self) -> str:
        """'2 flagged “… may be model bias”, 1 “… only one family was asked”' (the second only when some)."""
        flagged = [c for c in self.ledger.clusters if c.status == "single_source" and c.flagged]
        alone = sum(1 for c in flagged if self.flag(c) == ONLY_ONE_ASKED)
        text = f"{len(flagged) - alone} flagged “{FLAG}”"
        return text + (f", {alone} flagged “{ONLY_ONE_ASKED}”" if alone else "")

    def flag(self, cluster: LedgerCluster) -> str:
        """A consequential single-source finding's label: "may be model bias" only when another family was
        asked about its topics."""
        return single_source_label(cluster.families, recorded(cluster.topics, cluster.asked))

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
            f"{counts['excluded']} excluded (route not verified){skipped}.", "")
        if self.ledger.incomplete:
            self.emit("> **Incomplete synthesis.** " + " ".join(md(item, 900) for item in self.ledger.incomplete)
                      + " Re-running `research-dispatch synthesize` replays what was done and continues.", "")

    def models(self) -> str:
        """Which models extracted and judged, as the ledger records them (the calls made, or replayed), so a
        reader can weigh the synthesis by who made it. Only the ledger: the document is a view of it (a
        re-render must give the same bytes, or a hand edit is suspected), so a role no call filled names
        the ledger's settings as configured, not as having run."""
        configured = self.ledger.settings
        extractors = sorted({r.extraction.model for r in self.ledger.reports})
        aligners = sorted({b.judge_model for b in self.ledger.batches})
        checkers = sorted({c.judge_model for c in self.ledger.citation_checks if c.judge_model})

        def names(models: list[str], role: str) -> str:
            if models:
                return ", ".join(f"`{one_line(m, 120).replace('`', '')}`" for m in models)
            value = configured.get(role) or configured.get("judge_models") or []
            wanted = [value] if isinstance(value, str) else [str(m) for m in value]
            return "none called this cycle" + (f" (configured: {names(wanted, role)})" if wanted else "")

        return (f"**Models.** Extractor: {names(extractors, 'extractor_model')}. Judges aligning claims across "
                f"reports: {names(aligners, 'judge_models')}. Citation judges: {names(checkers, 'citation_models')} "
                "(for each report, one of another family than its author's).")

    def method(self) -> None:
        """After the decision table: what the numbers count, who made the synthesis and how it decides —
        wrapped, so that the source reads as well as the rendered page."""
        counts = self.ledger.counts
        statuses = counts["clusters"]
        self.emit("## How this synthesis was made", "", *_wrapped(self.models()), "")
        checked = counts.get("checked") or {}
        if checked:
            dropped = counts.get("dropped_claims", 0)
            self.emit(*_wrapped(
                f"**Claims.** {_plural(checked['claims'], 'claim')} from {_plural(checked['reports'], 'report')}: "
                f"{checked['anchored']} anchored (located in their report, quoted as whole sentences; "
                f"{checked['not_anchored']} not located), of which {checked['supported']} with a supported citation, "
                f"{checked['unsupported']} unsupported, {checked['contradicted']} contradicted by their own source. "
                f"{checked['counted']} count towards support; "
                + (f"{_plural(dropped, 'claim')} extracted from counted reports could not be located, checked or "
                   "counted, each listed under Limitations with its reason." if dropped else
                   "every claim of a counted report was located, checked and counted.")), "")
        made = self.decisions
        by_status = {status: sum(1 for d in made if d.status == status)
                     for status in ("convergent", "same_family", "divergent", "single_source")}
        ties = sum(1 for d in made if d.tie)
        total = sum(statuses.values())
        self.emit(*_wrapped(
            f"**Decisions and findings.** A *finding* is a set of claims that agree; a *decision* is a row of the "
            "table above — a divergence (a finding per side) or a recommendation that stands alone. "
            f"{_plural(len(made), 'decision')}: {by_status['convergent']} convergent, {by_status['same_family']} "
            f"same-family, {by_status['divergent']} divergent ({ties} without consensus), "
            f"{by_status['single_source']} single-source. "
            f"{_plural(total, 'finding')}: {statuses['convergent']} convergent, {statuses['same_family']} "
            f"same-family, {statuses['divergent']} divergent (the sides of the "
            f"{_plural(counts.get('divergences', 0), 'divergence')}), {statuses['single_source']} single-source "
            f"({self.flag_counts()}), {statuses.get('unsupported', 0)} not counted (no checked "
            f"support), {statuses['excluded']} made only by excluded reports."), "")
        self.emit(*_wrapped(
            "A claim counts only when code located the report sentence it points at (its quote is that whole "
            "sentence) and a judge of another family confirmed at least one of its citations by pointing at "
            "sentences of the stored passage that address it (the quote shown is the passage's own). A finding is "
            "**convergent** when counted reports from at least two independent model families support it "
            "(“one shared source” when all their supporting citations are one page); agreement within one family "
            "is shown separately because it is not independent. Positions are **divergent** when the judge found "
            "them to be alternatives for the same decision or opposite findings, or when code found one pick "
            "held for and against (or numbers that differ), and different counted reports hold them; a "
            "divergence reads “use X today, switch to Y when Z” when X has more independent families, and "
            "“no consensus” when families are equal (sources order the sides, report counts never do). A claim "
            f"made by one counted report only is **single-source**; a recommendation or a high-confidence one is "
            f"flagged “{FLAG}” when another family was asked about its topic (had a counted report on it) and "
            f"“{ONLY_ONE_ASKED}” when none was. Claims were extracted by a model; alignment and citation checks "
            "were judged "
            "by models that saw anonymised reports; everything else is deterministic code over `claims.json`."),
            "")

    def decision_table(self) -> None:
        self.emit("## TL;DR — decision table", "")
        made = self.decisions
        if not made:
            self.emit("No report made a recommendation that could be placed in the table.", "")
            return
        self.emit("| Layer | Decision | Verdict | Support | Status |", "|---|---|---|---|---|")
        for decision in made:
            if decision.status == "divergent":
                support = " vs ".join(f"{_plural(len(s.families), 'family', 'families')}, "
                                      f"{_plural(len(s.sources), 'source')}" for s in decision.sides)
                status = "**divergent**" + (" — no consensus" if decision.tie else "")
                if decision.kind == "contradiction":
                    status += " (contradiction)"
                verdict = md(decision.verdict.removeprefix("Use "), 400)
            else:
                cluster = self.clusters[decision.key]
                support = self.support(cluster.reports, cluster.families, cluster.sources)
                status = {"convergent": "**convergent**" + (" — one shared source" if cluster.shared_source else ""),
                          "single_source": self.flag(cluster) if cluster.flagged else STATUS_TEXT["single_source"]
                          }.get(cluster.status, STATUS_TEXT[cluster.status])
                verdict = md(cluster.label, 100)
            self.emit(f"| {md(decision.layer, 80)} | {md(decision.question or '—', 80)} | {verdict} | {support} "
                      f"| {status} |")
        self.emit("")

    def agreement_matrix(self) -> None:
        grid = self.grid
        self.emit("## Agreement matrix", "",
                  "What each model family's counted reports hold on each decision: for, against, conditional (for, "
                  "every claim stating a condition); on a divergence, the side the family holds. "
                  f"“{NOT_ASKED}”: no counted report of that family covers the decision's topics, so it was not "
                  f"asked; “{NO_SIDE}”: it was asked and took no side (a family whose reports hold more than one "
                  "side of a divergence counts for none).", "")
        if not grid.rows or not grid.families:
            self.emit("No decision this cycle.", "")
            return
        self.emit("| Decision | " + " | ".join(md(f, 40) for f in grid.families) + " |",
                  "|---|" + "---|" * len(grid.families))
        for decision, cells in grid.rows[:MAX_MATRIX_ROWS]:
            title = md(decision.layer, 60) + (f" — {md(decision.question, 80)}" if decision.question else "")
            self.emit(f"| {title} | " + " | ".join(md(c, 80) for c in cells) + " |")
        if len(grid.rows) > MAX_MATRIX_ROWS:
            self.emit("", f"… and {len(grid.rows) - MAX_MATRIX_ROWS} more decisions in `claims.json`.")
        self.emit("")

    def cluster_section(self, title: str, status: str, intro: str) -> None:
        clusters = [c for c in self.ledger.clusters if c.status == status]
        self.emit(f"## {title}", "", intro, "")
        if not clusters:
            self.emit("None this cycle.", "")
            return
        for cluster in sorted(clusters, key=lambda c: (c.layer.casefold(), c.key)):
            shared = (" **Convergent — one shared source**: every supporting citation is the same page, so the "
                      "families agree on what one source says." if cluster.shared_source else "")
            self.emit(self.heading(cluster), "",
                      f"Supported by {self.support(cluster.reports, cluster.families, cluster.sources)}: "
                      + ", ".join(self.who(r) for r in cluster.reports) + f".{shared} Key `{cluster.key}`.", "")
            self.emit(*(self.statement_line(c) for c in self.members(cluster.members)
                        if c.standing is Standing.COUNTED))
            self.not_counted_members(cluster)
            if cluster.excluded_reports:
                self.emit("- Also stated by reports excluded from support: "
                          + ", ".join(self.report_link(r) for r in cluster.excluded_reports) + ".")
            self.contrary(cluster.contrary_excluded)
            self.emit("")

    def not_counted_members(self, cluster: LedgerCluster, indent: str = "- ") -> None:
        """Claims of counted reports in a counted cluster that do not count themselves: shown, with why."""
        mine = [c for c in self.members(cluster.members)
                if c.standing is not Standing.COUNTED and self.reports[c.report].counted]
        if mine:
            self.emit(f"{indent}Also stated, not counted:")
            self.emit(*(self.statement_line(c, indent=f"{' ' * len(indent)}  - ") for c in mine))

    def divergences(self) -> None:
        self.emit("## Divergent findings", "",
                  "Positions the judge found to be alternatives for the same decision or opposite findings, or "
                  "one pick that some counted reports hold for and others against, held by different counted "
                  "reports. Neither position is dropped. The line in bold favours a position only when it has "
                  "more independent families; equal families read “no consensus” (sources order the sides, "
                  "report counts never do). A condition is shown beside the reports that state it.", "")
        if not self.ledger.divergences:
            self.emit("None this cycle.", "")
            return
        by_key = {c.key: c for c in self.ledger.clusters}
        for divergence in sorted(self.ledger.divergences, key=lambda d: (d.layer.casefold(), d.key)):
            kind = "alternatives" if divergence.kind == "alternatives" else "contradiction"
            decision = f" — {md(divergence.decision, 120)}" if divergence.decision else ""
            self.emit(f"### {md(divergence.layer, 80)}{decision} ({kind})", "", f"**{md(divergence.line, 900)}**", "")
            for number, position in enumerate(divergence.positions, start=1):
                single = " · one report" if len(position.reports) == 1 else ""
                condition = ""
                if position.condition:
                    stated = ", ".join(md(r, 200) for r in position.condition_reports)
                    condition = f" · condition ({stated}): {md(position.condition, 200)}"
                self.emit(f"{number}. **{md(position.label, 160)}** — "
                          f"{self.support(position.reports, position.families, position.sources)}{single}{condition}")
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
                  "agrees.", "")
        for label, intro in ((FLAG, "Recommendations and high-confidence findings that another family was "
                                    "asked about (it had a counted report on the topic) and did not make."),
                             (ONLY_ONE_ASKED, "Recommendations and high-confidence findings on a topic no other "
                                              "family was asked about: not evidence of bias, and not confirmed.")):
            mine = [c for c in flagged if self.flag(c) == label]
            if label == ONLY_ONE_ASKED and not mine:
                continue
            self.emit(f"### Flagged: {label}", "", intro, "")
            if not mine:
                self.emit("None this cycle.", "")
            for cluster in sorted(mine, key=lambda c: (c.layer.casefold(), c.key)):
                claim = self.members(c for c in cluster.members if self.claims[c].standing is Standing.COUNTED)[0]
                what = f"**{md(cluster.pick, 100)}** — " if cluster.pick else ""
                self.emit(f"- {md(cluster.layer, 80)}: {what}{self.statement_line(claim, indent='')} "
                          f"({claim.stance}, {claim.confidence} confidence)")
                self.contrary(cluster.contrary_excluded, indent="  - ")
            self.emit("")
        self.emit("### Other single-source findings", "")
        if not other:
            self.emit("None this cycle.", "")
        ordered = sorted(other, key=lambda c: (c.layer.casefold(), c.key))
        for cluster in ordered[:MAX_OTHER_SINGLE]:
            claim = self.members(c for c in cluster.members if self.claims[c].standing is Standing.COUNTED)[0]
            self.emit(f"- {md(cluster.layer, 80)}: {self.statement_line(claim, indent='')}")
            self.contrary(cluster.contrary_excluded, indent="  - ")
        if len(ordered) > MAX_OTHER_SINGLE:
            self.emit(f"- … and {len(ordered) - MAX_OTHER_SINGLE} more in `claims.json`.")
        self.emit("")

    def not_counted(self) -> None:
        """Findings no claim of which counts: shown with each claim's reason, never silently dropped."""
        clusters = sorted((c for c in self.ledger.clusters if c.status == "unsupported"),
                          key=lambda c: (c.layer.casefold(), c.key))
        self.emit("## Not counted: claims without checked support", "",
                  "Claims of counted reports that count towards nothing, shown by the report's own sentence: no "
                  "citation of theirs was confirmed by a judge of another family pointing at a sentence of the "
                  "stored passage that addresses them, or their own sentence contradicts their position "
                  "(`synthesis.count_unsupported = true` counts located ones without such a citation). Claims that "
                  "could not be located are listed under Limitations.", "")
        clusters = [c for c in clusters if any(self.reports[m.report].counted and m.anchored
                                               for m in self.members(c.members))]
        if not clusters:
            self.emit("None this cycle.", "")
            return
        for cluster in clusters[:MAX_NOT_COUNTED]:
            mine = [c for c in self.members(cluster.members) if self.reports[c.report].counted and c.anchored]
            self.emit(f"- {md(cluster.layer, 80)}: {self.statement_line(mine[0], indent='')}")
            for claim in mine[1:]:
                self.emit(self.statement_line(claim, indent="  - "))
        if len(clusters) > MAX_NOT_COUNTED:
            self.emit(f"- … and {len(clusters) - MAX_NOT_COUNTED} more in `claims.json`.")
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
                  "| Report | Topic | Author model | Family | Served model | Route | Status | Claims | Counted "
                  "| Cost |",
                  "|---|---|---|---|---|---|---|---|---|---|")
        for report in self.ledger.reports:
            served = ", ".join(report.served_models) or "—"
            route = report.route + ("" if report.route_verified else " ⚠")
            claims = str(len(report.claims)) if report.extraction.status == "ok" else (
                "not extracted (time limit)" if report.extraction.status == "timed_out" else "extraction failed")
            self.emit(f"| {self.report_link(report.stem)} | {md(report.topic, 80)} | {md(report.requested_model, 80)} "
                      f"| {md(report.family, 40)} | {md(served, 160)} | {md(route, 40)} | {md(report.status, 20)} "
                      f"| {claims} | {'yes' if report.counted else 'no'} | ${report.cost_usd:.4f} |")
        for leg in self.ledger.legs:  # planned legs the synthesis read no report of (missing, failed, ...)
            if leg.stem in self.reports:
                continue
            self.emit(f"| {md(leg.stem, 200)} | {md(leg.topic, 80)} | {md(leg.model, 80)} | — | — | — "
                      f"| {md(leg.state, 20)} | — | no | — |")
        self.emit("")

    def limitations(self) -> None:
        self.emit("## Limitations", "")
        if not self.ledger.limitations:
            self.emit("- None recorded: every planned leg has an ok report with a verified route, every report was "
                      "extracted, every batch was judged by a model of another family, and every claim was located, "
                      "checked and counted.")
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
        self.method()
        self.agreement_matrix()
        self.cluster_section("Convergent findings", "convergent",
                             "Supported by counted reports from at least two model families.")
        self.cluster_section("Same-family agreement (not independent)", "same_family",
                             "Several reports agree, but all were written by models of one family: agreement "
                             "within a family is not independent evidence.")
        self.divergences()
        self.single_source()
        self.not_counted()
        self.excluded()
        self.coverage()
        self.limitations()
        self.sources_section()
        return "\n".join(self.lines).rstrip() + "\n"


WRAP = 100
"""The document's own prose is wrapped at this width: its source is read in diffs and terminals too."""
_BLOCK_START = re.compile(r"^(?:[-+*](?:\s|$)|[>#|<]|(?:[-*_]\s*){3,}$|=+\s*$|```|~~~|\d+[.)](?:\s|$))")
"""How a line starts a block in CommonMark: a list item, a quote, a heading, a table row, HTML, a
setext underline or a thematic break, a fence."""


def _wrapped(paragraph: str) -> list[str]:
    """A paragraph as lines of at most `WRAP` characters (a long word stays whole). Markdown joins them
    back into one paragraph — unless a line would start like a block (a list item, a quote, a heading)
    or end in a hard break: then the paragraph stays on one line rather than render differently."""
    lines = textwrap.wrap(paragraph, WRAP, break_long_words=False, break_on_hyphens=False)
    starts_block = any(_BLOCK_START.match(line) for line in lines[1:])
    hard_break = any(line.endswith("\\") for line in lines[:-1])  # `\` before a line end is a hard break
    return [paragraph] if starts_block or hard_break else lines


def render_document(ledger: Ledger, settings: Settings, notice: str | None = None) -> str:
    """The synthesis document; `notice` (the repository's, `core.notice`) is shown under the title."""
    return _Renderer(ledger, settings, notice).render()

