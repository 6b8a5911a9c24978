"""What the synthesis reads: the reports with their re-checked routes, and the state of every planned leg.

Why re-check routes here instead of trusting `route_verified` in the front matter: the front matter is
a claim and the call log is the evidence (`verify.verify_report`). A report whose route is not verified
is excluded from support counts unless `count_unverified` is set, and is listed either way.

Legs tell the synthesis what is *missing*: a planned leg with no report, a leg whose latest run failed
(its previous report, if any, is still used and says so), a degraded report, or a report left over from
an earlier cycle. The synthesis must never present a partial council as the full council.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_dispatch.config import Settings, load_topics, topic_paths
from research_dispatch.errors import BadInput
from research_dispatch.plan import Leg, plan_legs
from research_dispatch.report import Report, load_report
from research_dispatch.synthesis.text import sha256_text
from research_dispatch.verify import verify_report

_STEM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


@dataclass(frozen=True)
class ReportInput:
    """One report as the synthesis sees it."""

    report: Report
    stem: str
    relpath: str
    sha256: str  # of the whole file
    family: str
    route: str  # the re-checked verdict
    route_verified: bool
    route_problems: tuple[str, ...]
    counted: bool  # counts towards support

    @property
    def meta(self) -> Any:
        return self.report.meta


@dataclass(frozen=True)
class LegState:
    """A planned leg and what happened to it, for the coverage table and the limitations."""

    stem: str
    topic: str
    model: str
    rationale: str
    report_relpath: str
    state: str  # ok | degraded | failed | missing
    detail: str = ""
    has_report: bool = False


@dataclass
class Inputs:
    reports: list[ReportInput]
    legs: list[LegState]
    warnings: list[str] = field(default_factory=list)


def default_legs(repo: Path, settings: Settings) -> list[Leg]:
    """Every planned leg; a repository without topic files has none (its reports are still used)."""
    if not topic_paths(repo, settings):
        return []
    return plan_legs(load_topics(repo, settings), settings)


def load_reports(repo: Path, settings: Settings) -> list[ReportInput]:
    """All `research/*.md` reports, sorted by stem. A report that does not parse is bad input."""
    directory = repo / settings.research_dir
    paths = sorted(directory.glob("*.md")) if directory.is_dir() else []
    if not paths:
        raise BadInput("no reports to synthesize", path=settings.research_dir + "/")
    out: list[ReportInput] = []
    for path in paths:
        stem = path.name[: -len(".md")]
        display = f"{settings.research_dir}/{path.name}"
        if not _STEM_RE.fullmatch(stem) or ".." in stem:
            raise BadInput("report file names must be [A-Za-z0-9._-] (as computed by the planner)", path=display)
        report = load_report(path, repo=repo)
        row = verify_report(report)
        verified = row.verified
        out.append(ReportInput(
            report=report, stem=stem, relpath=report.relpath, sha256=sha256_text(report.text),
            family=settings.family_of(report.meta.requested_model), route=row.route, route_verified=verified,
            route_problems=tuple(row.problems), counted=verified or settings.synthesis.count_unverified))
    return out


def _read_status(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def leg_states(repo: Path, settings: Settings, legs: list[Leg], reports: list[ReportInput]) -> list[LegState]:
    """One state per planned leg, from its report (if any) and its `build/legs/<stem>.json` status."""
    by_stem = {r.stem: r for r in reports}
    states: list[LegState] = []
    for leg in sorted(legs, key=lambda item: item.stem):
        report = by_stem.get(leg.stem)
        status = _read_status(repo / leg.status_relpath(settings))
        common = {"stem": leg.stem, "topic": leg.topic.id, "model": leg.route.model,
                  "rationale": leg.route.rationale, "report_relpath": leg.report_relpath(settings),
                  "has_report": report is not None}
        if status is not None and status.get("status") == "failed":
            error = str(status.get("error") or "; ".join(map(str, status.get("reasons") or [])) or "failed")
            detail = f"latest run failed: {error}"
            if report is not None:
                detail += f"; the previous report (cycle {report.meta.cycle or 'unknown'}) is used"
            states.append(LegState(state="failed", detail=detail, **common))
        elif report is None:
            states.append(LegState(state="missing", detail="no report", **common))
        elif report.meta.status == "degraded":
            reasons = "; ".join(report.meta.status_reasons) or "degraded"
            states.append(LegState(state="degraded", detail=reasons, **common))
        else:
            states.append(LegState(state=report.meta.status, **common))
    return states
