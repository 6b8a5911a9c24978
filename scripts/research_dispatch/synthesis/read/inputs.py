"""What the synthesis reads: the reports of planned legs, how each one counts, and every leg's state.

The counting rules, in one place (docs/METHODOLOGY.md states them for readers):

* **Only planned legs.** When the repository has topic files, a report counts only if its stem is a
  leg planned from the current topics (all topics and models, not a `--topics` selection) and its
  front matter names that leg's topic and model. Anything else (a renamed or removed topic, a dropped
  model, a stray file) is *ignored*: not extracted, not counted, and named as ignored. A repository
  without topic files has no plan, and every report under `research/` is used.
* **Failed reports never count.** A report whose front matter says `status: failed` is not extracted
  and never counted (not even with `count_unverified`); its limitation line carries its status reasons.
* **The strictest route wins.** A report counts as verified only when the front matter says
  `route_verified: true` AND `route: exact` AND its call log re-verifies as exact (`verify`). Any
  disagreement leaves it unverified, and an unverified report is excluded from support counts unless
  `synthesis.count_unverified` is set; it is listed either way.
* **Families are the served ones, by lineage.** A verified report's family is its model's. An
  unverified report's families are those of the models its *call log* says served it — never the
  front matter's `served_models`, which is the report's own claim — so a model fallback cannot
  manufacture "independent" agreement when unverified reports are counted, and the report is shown as
  served by those models. A report served by models of several families carries all of them; one with
  no call log carries none, and can make nothing independent. A model's family comes from the lineage
  table (`config.lineage`: a derived model such as `tngtech/deepseek-r1t2-chimera` counts as
  deepseek); an author no table knows is named in a warning.

Legs tell the synthesis what is *missing*: a planned leg with no report, a leg whose latest run failed
(its previous report, if any, is still used and says so), a degraded report, or a report left over from
an earlier cycle. The synthesis must never present a partial council as the full council. Where a leg
stands is `leg/state.assess` — the one rule resume, the run summary and publish use (status files read
by `LegResult.from_json`, a status file of another cycle says nothing about this one) — so the
synthesis' limitations and the pull request never disagree about a leg.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.config.plan import Leg, plan_legs
from research_dispatch.config.settings import Settings
from research_dispatch.config.topics import load_topics, topic_paths
from research_dispatch.core.errors import BadInput
from research_dispatch.core.sanitize import one_line
from research_dispatch.gateway.route import is_verified
from research_dispatch.leg.report import Report, ReportMeta, load_report
from research_dispatch.leg.standing import assess_worktree
from research_dispatch.leg.status import LegResult, LegState
from research_dispatch.leg.verify import verify_report
from research_dispatch.synthesis.common.text import sha256_text

_STEM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


@dataclass(frozen=True)
class Counting:
    """How one report counts towards support: all the classifier needs to know about a report."""

    stem: str
    counted: bool
    families: frozenset[str]

    @property
    def family(self) -> str:
        """One display name: the family, `a+b` when several served it, `unknown` when none is recorded."""
        return "+".join(sorted(self.families)) or "unknown"


@dataclass(frozen=True)
class ReportInput:
    """One report as the synthesis sees it."""

    report: Report
    stem: str
    relpath: str
    sha256: str  # of the whole file
    families: frozenset[str]
    route: str  # the strictest verdict of front matter, route field and call log
    route_verified: bool
    route_problems: tuple[str, ...]
    counted: bool  # counts towards support
    exclusion: str | None = None  # why it does not count (None when counted)
    served_models: tuple[str, ...] = ()  # as its call log records them (the front matter's without a log)

    @property
    def meta(self) -> ReportMeta:
        return self.report.meta

    @property
    def family(self) -> str:
        return self.counting.family

    @property
    def counting(self) -> Counting:
        return Counting(stem=self.stem, counted=self.counted, families=self.families)


@dataclass(frozen=True)
class SkippedReport:
    """A report file the synthesis does not extract: outside the plan, or failed."""

    stem: str
    relpath: str
    reason: str
    kind: str  # "ignored" (not a planned leg) | "failed" (status: failed)


@dataclass(frozen=True)
class LegCoverage:
    """A planned leg for the coverage table and the limitations: where it stands (`leg/state`) and
    whether the synthesis reads a report of it (its own, possibly of an earlier cycle)."""

    stem: str
    topic: str
    model: str
    rationale: str
    report_relpath: str
    state: LegState
    detail: str = ""
    has_report: bool = False  # the synthesis reads a report of this leg
    attempt_failed: bool = False  # this cycle's latest attempt failed (a report may still stand or be used)


@dataclass
class Inputs:
    reports: list[ReportInput]
    skipped: list[SkippedReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def default_legs(repo: Path, settings: Settings) -> list[Leg]:
    """Every planned leg; a repository without topic files has none (its reports are then all used)."""
    if not topic_paths(repo, settings):
        return []
    return plan_legs(load_topics(repo, settings), settings)


@dataclass(frozen=True)
class RouteFacts:
    """What the route check established about one report: the strictest verdict of front matter,
    route field and call log, and the models the call log says served it (None without a call log)."""

    route: str
    verified: bool
    problems: tuple[str, ...]
    logged_models: tuple[str, ...] | None


def route_facts(report: Report, *, trust_self_reported: bool = False) -> RouteFacts:
    """The strictest reading of front matter, route field and call log. `trust_self_reported` is the
    gateway setting that lets an openai-compatible gateway's `self_reported` route count as verified."""
    meta = report.meta
    row = verify_report(report, trust_self_reported=trust_self_reported)
    problems = list(row.problems)
    route = row.route
    if meta.route_verified is not True:
        problems.append("front matter says route_verified: false")
        if is_verified(route, trust_self_reported=trust_self_reported):
            route = "unverified"
    verified = (row.verified and is_verified(meta.route, trust_self_reported=trust_self_reported)
                and meta.route_verified is True and not problems)
    logged = tuple(row.logged_models) if row.logged_models is not None else None
    return RouteFacts(route=route, verified=verified, problems=tuple(dict.fromkeys(problems)), logged_models=logged)


def counted_families(report: Report, facts: RouteFacts, settings: Settings) -> frozenset[str]:
    """The families a report counts under: its model's when verified, else those of the models its call
    log says served it (none without a log: the front matter's word is not evidence)."""
    if facts.verified:
        return frozenset({settings.family_of(report.meta.requested_model)})
    return frozenset(settings.family_of(model) for model in facts.logged_models or ())


def lineage_warnings(reports: list[ReportInput], settings: Settings) -> list[str]:
    """One warning per author of a counted report's model that no lineage table knows."""
    authors: dict[str, list[str]] = {}
    for report in reports:
        if not report.counted:
            continue
        for model in dict.fromkeys((report.meta.requested_model, *report.served_models)):
            author = settings.unknown_author(model)
            if author is not None:
                authors.setdefault(author, []).append(report.relpath)
    return [f"{', '.join(sorted(set(paths)))}: model author {author!r} is not in the lineage table, so it counts as "
            "its own family; if its model is derived from another family's model, say so in "
            "[tool.research-dispatch] lineage (model slug = family)"
            for author, paths in sorted(authors.items())]


def _status_reasons(meta: ReportMeta) -> str:
    reasons = "; ".join(one_line(str(r), 300) for r in meta.status_reasons if str(r).strip())
    return reasons or "no reason recorded in its front matter"


def _outside_plan(report: Report, leg: Leg | None) -> str | None:
    """Why a report is not the report of a planned leg, or None when it is."""
    meta = report.meta
    if leg is None:
        return "no planned leg has this file name (a renamed or removed topic, or a dropped model)"
    if meta.topic != leg.topic.id:
        return f"its front matter says topic {meta.topic!r}, the planned leg is topic {leg.topic.id!r}"
    if meta.requested_model != leg.route.model:
        return f"its front matter says model {meta.requested_model!r}, the planned leg is {leg.route.model!r}"
    return None


def load_inputs(repo: Path, settings: Settings, legs: list[Leg]) -> Inputs:
    """The reports the synthesis uses, sorted by stem, and the ones it skips (with reasons).

    A report that does not parse is bad input (exit 2) — even one outside the plan, because a file
    that cannot be read cannot be shown to be outside it.
    """
    directory = repo / settings.research_dir
    paths = sorted(directory.glob("*.md")) if directory.is_dir() else []
    if not paths:
        raise BadInput("no reports to synthesize", path=settings.research_dir + "/")
    by_stem = {leg.stem: leg for leg in legs}
    syn = settings.synthesis
    out = Inputs(reports=[])
    for path in paths:
        stem = path.name[: -len(".md")]
        display = f"{settings.research_dir}/{path.name}"
        if not _STEM_RE.fullmatch(stem) or ".." in stem:
            raise BadInput("report file names must be [A-Za-z0-9._-] (as computed by the planner)", path=display)
        report = load_report(path, repo=repo)
        report.require_no_conflict()  # as publish refuses it
        if legs:
            why = _outside_plan(report, by_stem.get(stem))
            if why is not None:
                out.skipped.append(SkippedReport(stem=stem, relpath=report.relpath, kind="ignored",
                                                 reason=f"not a planned leg: {why}"))
                continue
        meta = report.meta
        if meta.status == "failed":
            out.skipped.append(SkippedReport(stem=stem, relpath=report.relpath, kind="failed",
                                             reason=f"status failed: {_status_reasons(meta)}"))
            continue
        facts = route_facts(report, trust_self_reported=settings.gateway.trust_self_reported)
        counted = facts.verified or syn.count_unverified
        exclusion = None if counted else f"route {facts.route} is not verified"
        served = facts.logged_models if facts.logged_models is not None else tuple(meta.served_models)
        out.reports.append(ReportInput(
            report=report, stem=stem, relpath=report.relpath, sha256=sha256_text(report.text),
            families=counted_families(report, facts, settings), route=facts.route, route_verified=facts.verified,
            route_problems=facts.problems, counted=counted, exclusion=exclusion, served_models=served))
    out.warnings += lineage_warnings(out.reports, settings)
    for item in out.skipped:
        if item.kind == "ignored":
            out.warnings.append(f"{item.relpath}: ignored, {item.reason}")
        else:
            out.warnings.append(f"{item.relpath}: not counted, {item.reason}")
    return out


def _attempt_error(status: LegResult | None) -> str:
    if status is None:
        return "failed"
    return status.error or "; ".join(status.reasons) or "failed"


def leg_coverage(repo: Path, settings: Settings, legs: list[Leg], reports: list[ReportInput],
                 skipped: list[SkippedReport] | None = None, *, cycle: str) -> list[LegCoverage]:
    """One entry per planned leg: its `LegState` (`leg/state.assess_worktree`: its report, call log and
    status file of this cycle) and what the synthesis says about it."""
    by_stem = {r.stem: r for r in reports}
    failed_reports = {s.stem: s for s in skipped or [] if s.kind == "failed"}
    coverage: list[LegCoverage] = []
    for leg in sorted(legs, key=lambda item: item.stem):
        report = by_stem.get(leg.stem)
        assessment = assess_worktree(repo, settings, leg, cycle=cycle)
        state = assessment.state
        attempt_failed = state is LegState.FAILED or assessment.last_attempt_failed
        if leg.stem in failed_reports:
            detail = f"its report has {failed_reports[leg.stem].reason}"
        elif attempt_failed:
            detail = f"latest run failed: {_attempt_error(assessment.status)}"
            if report is not None:
                detail += f"; the previous report (cycle {report.meta.cycle or 'unknown'}) is used"
        elif state is LegState.DEGRADED and report is not None:
            detail = degraded_reasons(report.meta)
        elif state is LegState.MISSING:
            detail = "no report"
        else:
            detail = "; ".join(assessment.reasons)
        coverage.append(LegCoverage(stem=leg.stem, topic=leg.topic.id, model=leg.route.model,
                                    rationale=leg.route.rationale, report_relpath=leg.report_relpath(settings),
                                    state=state, detail=detail, has_report=report is not None,
                                    attempt_failed=attempt_failed))
    return coverage


def degraded_reasons(meta: ReportMeta) -> str:
    """Why a report is degraded, from its front matter."""
    return "; ".join(str(r) for r in meta.status_reasons) or "degraded"
