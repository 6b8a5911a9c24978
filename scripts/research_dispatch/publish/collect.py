"""What a publish is about: one entry per planned leg, the computed paths, and the commit messages.

The publisher trusts nothing it did not compute. Paths come from the plan (`Leg.report_relpath`,
`Leg.calls_relpath`) and the settings, never from a directory listing; a report whose front matter names
another topic or model than its computed path is refused. Commit subjects are built from validated data
only (topic id, stem, model slug from the topic file). Trailers carry front-matter facts reduced to a
safe character set; free text (status reasons, error messages) never enters a commit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch import sanitize
from research_dispatch.config import Settings
from research_dispatch.errors import BadInput
from research_dispatch.leg import LegResult, read_status
from research_dispatch.plan import Leg
from research_dispatch.report import Report, load_report
from research_dispatch.verify import RouteRow, verify_report

_TRAILER_UNSAFE = re.compile(r"[^A-Za-z0-9 ._:/+()\[\]-]")
_RUN_LINK = re.compile(r"^https?://[^\s<>\"'`|\\]{1,300}$")
FAILED_STATES = ("failed", "missing")


@dataclass
class LegEntry:
    """One planned leg as the publisher sees it: its report (if any), route row, state and reasons."""

    leg: Leg
    report_rel: str
    calls_rel: str
    state: str  # ok | degraded | failed | missing
    reasons: list[str] = field(default_factory=list)
    report: Report | None = None
    row: RouteRow | None = None
    status: LegResult | None = None
    changed: bool = False

    @property
    def stem(self) -> str:
        return self.leg.stem

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES

    @property
    def unverified(self) -> bool:
        """A report is present but its route is not proven exact."""
        return self.row is not None and not self.row.verified

    @property
    def cost_usd(self) -> float:
        if self.status is not None and self.status.status == "failed":
            return self.status.cost_usd
        if self.report is not None:
            return self.report.meta.usage.cost_usd
        return self.status.cost_usd if self.status is not None else 0.0

    def files(self, repo: Path) -> list[str]:
        """The computed files of this leg that exist in the working tree (report first)."""
        if self.report is None:
            return []
        return [rel for rel in (self.report_rel, self.calls_rel)
                if (repo / rel).is_file() and not (repo / rel).is_symlink()]


def collect_legs(repo: Path, settings: Settings, legs: Iterable[Leg], cycle: str) -> list[LegEntry]:
    """Read each planned leg's report, call log and status file; decide its state."""
    entries = []
    for leg in sorted(legs, key=lambda item: item.stem):
        entries.append(_entry(repo, settings, leg, cycle))
    return entries


def _entry(repo: Path, settings: Settings, leg: Leg, cycle: str) -> LegEntry:
    entry = LegEntry(leg=leg, report_rel=leg.report_relpath(settings), calls_rel=leg.calls_relpath(settings),
                     state="missing")
    status = read_status(repo, settings, leg)
    if status is not None and status.cycle and cycle and status.cycle != cycle:
        status = None  # a status file from another cycle says nothing about this one
    entry.status = status
    path = repo / entry.report_rel
    if path.is_symlink():  # a link could smuggle any file into the commit under a report's name
        entry.state = "failed"
        entry.reasons = [f"report not published: {entry.report_rel} is a symbolic link"]
        return entry
    if path.is_file():
        try:
            report = load_report(path, repo=repo)
            meta = report.meta
            if meta.topic != leg.topic.id or meta.requested_model != leg.route.model:
                raise BadInput(f"front matter names topic {meta.topic!r} and model {meta.requested_model!r}, "
                               f"not this leg's {leg.topic.id!r} and {leg.route.model!r}", path=entry.report_rel)
            entry.row = verify_report(report)
            entry.report = report
        except BadInput as exc:
            entry.state = "failed"
            entry.reasons = [f"report not published: {exc}"]
            return entry
    if status is not None and status.status == "failed":
        entry.state = "failed"
        entry.reasons = [r for r in [status.error, *status.reasons] if r]
        if entry.report is not None:
            entry.reasons.append("the previous report is kept")
    elif entry.report is not None:
        entry.state = entry.report.meta.status if entry.report.meta.status != "failed" else "failed"
        entry.reasons = list(entry.report.meta.status_reasons)
    elif status is not None:
        entry.reasons = [f"the leg status says {status.status}, but there is no report at {entry.report_rel}"]
    else:
        entry.reasons = ["no report and no leg status: the leg did not run or its artefact is missing"]
    if entry.row is not None:
        entry.reasons += [f"route check: {problem}" for problem in entry.row.problems]
    return entry


def stray_files(repo: Path, settings: Settings, entries: Iterable[LegEntry]) -> list[str]:
    """Files in research/ and framework/ that are not computed paths: reported, never committed."""
    computed = {rel for e in entries for rel in (e.report_rel, e.calls_rel)} | set(settings.synthesis_relpaths())
    found: list[str] = []
    for directory in (settings.research_dir, settings.framework_dir):
        root = repo / directory
        if root.is_dir():
            found += [p.relative_to(repo).as_posix() for p in sorted(root.rglob("*"))
                      if p.is_file() and not p.name.startswith(".")]
    return [rel for rel in found if rel not in computed]


def synthesis_cost(repo: Path, settings: Settings) -> float:
    """Sum of `cost_usd` over the synthesis call log, if there is one (best effort)."""
    path = repo / settings.synthesis_calls_relpath
    total = 0.0
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0.0
    for line in lines:
        try:
            value = json.loads(line).get("cost_usd", 0.0)
            total += float(value) if isinstance(value, (int, float)) else 0.0
        except (ValueError, AttributeError):
            continue
    return round(total, 6)


# --------------------------------------------------------------------------------------------------
# Commit messages


def trailer_value(text: str, limit: int = 120) -> str:
    """One safe line for a trailer: no newlines, no markup, a small character set."""
    value = _TRAILER_UNSAFE.sub("", sanitize.one_line(str(text), limit * 2)).strip()
    return value[:limit] or "unknown"


def safe_run_link(url: str | None) -> str | None:
    return url if url and _RUN_LINK.fullmatch(url) else None


def report_message(entry: LegEntry, cycle: str, run_link: str | None) -> str:
    """`research(<topic>): refresh <stem> with <model>` plus the FIXED trailers and provenance."""
    assert entry.report is not None and entry.row is not None
    leg, meta, row = entry.leg, entry.report.meta, entry.row
    subject = f"research({leg.topic.id}): refresh {leg.stem} with {leg.route.model}"
    body = (f"Refreshes {entry.report_rel}: {meta.words} words, {len(meta.sources)} cited sources, "
            f"{meta.calls} gateway calls.")
    trailers = [f"Requested-Model: {leg.route.model}"]
    trailers += [f"Served-Model: {trailer_value(m)}" for m in sorted(set(meta.served_models))] or \
        ["Served-Model: unknown"]
    trailers += [f"Served-Provider: {trailer_value(p)}" for p in sorted(set(meta.served_providers))] or \
        ["Served-Provider: unknown"]
    trailers += [f"Route: {row.route}", f"Report-Status: {meta.status}",
                 f"Generation-Count: {len(meta.generation_ids)}", f"Cost-USD: {meta.usage.cost_usd:.6f}",
                 f"Refresh-Cycle: {cycle}", f"Research-Leg: {leg.stem}"]
    link = safe_run_link(meta.run_url) or run_link
    if link:
        trailers.append(f"Run-Link: {link}")
    return f"{subject}\n\n{body}\n\n" + "\n".join(trailers) + "\n"


def synthesis_message(paths: list[str], cycle: str, run_link: str | None, reports: int) -> str:
    subject = f"research(synthesis): regenerate for {cycle}"
    body = "Regenerates " + ", ".join(paths) + f" from {reports} report(s)."
    trailers = [f"Refresh-Cycle: {cycle}", f"Synthesis-Reports: {reports}"]
    if run_link:
        trailers.append(f"Run-Link: {run_link}")
    return f"{subject}\n\n{body}\n\n" + "\n".join(trailers) + "\n"
