"""Regenerate the dispatch table of docs/METHODOLOGY.md between its marker comments.

Only the bytes between the end of the start-marker line and the start of the end-marker line change;
the prose around them is the team's and stays byte-identical. Without both markers (in order) the file
is left untouched and the caller warns: a table is never inserted at a guessed position.
"""

from __future__ import annotations

from research_dispatch.core.sanitize import one_line
from research_dispatch.leg.status import LegState
from research_dispatch.synthesis.read.inputs import LegCoverage, ReportInput

START = "<!-- research-dispatch:dispatch-table:start -->"
END = "<!-- research-dispatch:dispatch-table:end -->"
HEADERS = ("File", "Author model", "Served model", "Route", "Rationale")


class MarkersMissing(ValueError):
    """The document lacks the start/end markers (or has them out of order)."""


def _cell(text: str) -> str:
    return one_line(text, 200).replace("|", "\\|") or "—"


def dispatch_rows(legs: list[LegCoverage], reports: list[ReportInput]) -> list[tuple[str, ...]]:
    """One row per planned leg, then any report that no planned leg accounts for; sorted by file."""
    by_stem = {r.stem: r for r in reports}
    rows: dict[str, tuple[str, ...]] = {}
    for leg in legs:
        report = by_stem.get(leg.stem)
        if report is None:
            route = {LegState.MISSING: "not yet run", LegState.FAILED: "failed (no report)"}.get(
                leg.state, f"{leg.state}: no report used")
            rows[leg.report_relpath] = (leg.report_relpath, leg.model, "—", route, leg.rationale)
        else:
            rows[report.relpath] = _report_row(report, leg.rationale or report.meta.rationale)
    for report in reports:
        rows.setdefault(report.relpath, _report_row(report, report.meta.rationale))
    return [rows[key] for key in sorted(rows)]


def _report_row(report: ReportInput, rationale: str) -> tuple[str, ...]:
    served = ", ".join(report.served_models) or "—"
    route = report.route if report.route_verified else f"{report.route} (not verified)"
    return (report.relpath, report.meta.requested_model, served, route, rationale)


def render_table(rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def replace_table(document: str, table: str) -> str:
    """The document with the text between the markers replaced by `table` (markers kept)."""
    start = document.find(START)
    if start < 0:
        raise MarkersMissing(f"no {START} marker")
    end = document.find(END, start + len(START))
    if end < 0:
        raise MarkersMissing(f"no {END} marker after the start marker")
    after_start = document.find("\n", start)
    if after_start < 0 or after_start > end:
        raise MarkersMissing("the markers must be on lines of their own")
    line_start = document.rfind("\n", 0, end) + 1
    if document[line_start:end].strip():
        raise MarkersMissing("the end marker must start its own line")
    newline = "\r\n" if document[after_start - 1: after_start + 1] == "\r\n" else "\n"
    body = table.replace("\n", newline)
    return document[: after_start + 1] + body + newline + document[line_start:]
