"""What `run` prints for people: the plan before the legs, the legs' table, the route table, the
synthesis in brief, and the closing line. Console text only; the decisions are made elsewhere
(`leg/resume.py`, `leg/standing.py`, `run/outcome.py`) and only read here.

Every leg row says what this run did with the leg, where the leg now stands (one `LegState`) and the
money every call cost — failed legs included.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import ExitCode
from research_dispatch.core.tables import Column, console_table
from research_dispatch.leg.resume import Decision, ResumeAction
from research_dispatch.leg.status import LegState
from research_dispatch.leg.verify import RouteRow, evidence_lines, text_table
from research_dispatch.run.outcome import Activity, RunOutcome
from research_dispatch.synthesis.pipeline import SynthesisResult

Echo = Callable[[str], None]
DIFF_PREVIEW_LINES = 12
_VERB = {ResumeAction.RUN: "run ", ResumeAction.KEEP: "keep", ResumeAction.SKIP_EDITED: "skip"}



SUMMARY_COLUMNS = (Column("leg", ident=True), Column("this run"), Column("state"), Column("route"),
                   Column("words", right=True), Column("cost", right=True), Column("reason", wrap=True))
"""The run's summary on a terminal (`console_table`: fits it, the reason wraps); in a log, a plain table."""

def plan(decisions: list[Decision], settings: Settings, *, cycle: str, workers: int, echo: Echo) -> None:
    """Before the legs start: how many run, are kept or skipped, and why, leg by leg."""
    to_run = [d for d in decisions if d.run]
    skipped = [d for d in decisions if d.action is ResumeAction.SKIP_EDITED]
    echo(f"run: cycle {cycle}, {len(decisions)} leg(s): {len(to_run)} to run, "
         f"{len(decisions) - len(to_run) - len(skipped)} kept" + (f", {len(skipped)} skipped" if skipped else "")
         + f"; jobs {workers}; run budget ${settings.run_budget_usd:.2f}")
    for decision in decisions:
        echo(f"  {_VERB[decision.action]} {decision.leg.stem} ({decision.leg.route.model}): {decision.reason}")
        if decision.action is ResumeAction.SKIP_EDITED:
            echo(f"warning: {decision.leg.report_relpath(settings)} was edited by hand; it is not regenerated "
                 "(run --fresh to move it to build/edited/ and redo the leg)")


def legs(outcome: RunOutcome, echo: Echo) -> None:
    """One row per leg: what this run did, where the leg stands now, and the money — every call counts,
    also those of a leg that failed after spending."""
    rows = []
    for item in outcome.legs:
        result = item.result
        if result is not None:
            route = result.route if result.status != LegState.FAILED else "—"
            words = str(result.words) if result.words else "—"
            cost = f"${result.cost_usd:.4f}"
        else:
            assessment = item.decision.assessment
            standing = item.activity in (Activity.KEPT, Activity.SKIPPED) and assessment.report is not None
            route = (assessment.row.route if assessment.row is not None else "—") if standing else "—"
            words = str(assessment.report.meta.words) if standing and assessment.report is not None else "—"
            cost = f"${assessment.report_cost_usd:.4f}" if standing else "—"
        rows.append([item.stem, item.label, str(item.state), route, words, cost, item.note or ""])
    echo("")
    echo(console_table(SUMMARY_COLUMNS, [c.header for c in SUMMARY_COLUMNS], rows))
    labels = ("ok", "degraded", "failed", "kept", "skipped", "not started")
    counts = {label: len(outcome.stems(label)) for label in labels}
    parts = [f"{n} {label}" for label, n in counts.items() if n]
    spent_failed = sum(o.result.cost_usd for o in outcome.legs if o.result and o.result.status == LegState.FAILED)
    echo(f"legs: {len(outcome.legs)} planned, {len(outcome.ran)} ran ({', '.join(parts)}); "
         f"legs cost ${outcome.legs_cost_usd:.4f}" + (f" (${spent_failed:.4f} of it by failed legs)"
                                                       if spent_failed else ""))
    failed = outcome.stems("failed")
    if failed:
        kept = [o.stem for o in outcome.legs if o.label == "failed" and o.state.has_report]
        echo(f"failed legs: {', '.join(failed)}" + (f" (a good report of this cycle still stands for "
                                                    f"{', '.join(kept)})" if kept else ""))
    missing = outcome.stems("not started")
    if missing:
        echo(f"not started: {', '.join(missing)}")
    echo("")


def routes(rows: list[RouteRow], missing: list[str], echo: Echo) -> None:
    """The route table of the working tree's reports, with each report's route problems and evidence
    warnings (`verify` says the same)."""
    if rows:
        echo("route fidelity:")
        echo(text_table(rows))
        for row in rows:
            for problem in row.problems:
                echo(f"problem: {row.relpath}: {problem}")
        for line in evidence_lines(rows):
            echo(line)
    if missing:
        echo(f"no report: {', '.join(missing)}")
    echo("")


def synthesis(repo: Path, result: SynthesisResult, echo: Echo) -> None:
    """The synthesis in brief: its files, its calls and cost, the first lines of the claim diff."""
    echo("synthesis:")
    for label, path in (("document", result.document_path), ("claims ledger", result.ledger_path),
                        ("methodology", result.methodology_path)):
        if path is not None:
            echo(f"  {label}: {_rel(repo, path)}")
    calls = [f"{count} {label}" for count, label in
             ((result.extraction_calls, "extraction"), (result.judge_calls, "judge"), (result.llm_calls, "model"))
             if count]
    echo(f"  calls: {', '.join(calls) or 'none'}; cost ${result.cost_usd:.4f}")
    lines = result.diff.text().splitlines() or ["claim diff: no change"]
    for line in lines[:DIFF_PREVIEW_LINES]:
        echo(f"  {line}")
    if len(lines) > DIFF_PREVIEW_LINES:
        echo(f"    … {len(lines) - DIFF_PREVIEW_LINES} more line(s): `research-dispatch synthesize` prints "
             "the whole diff; the PR body carries it too")
    for warning in result.warnings:
        echo(f"  warning: {warning}")
    echo("")


def closing(outcome: RunOutcome, echo: Echo) -> None:
    """The last line: the verdict, what ran, the money and the wall time (and whether anything changed)."""
    if outcome.interrupted:
        echo(f"run interrupted after {outcome.wall_s:.1f} s; the lock is released. Run again to redo "
             "the legs that did not finish.")
        return
    result = outcome.synthesis
    if not outcome.ran and result is not None and result.diff.is_empty and not outcome.branch_changed:
        echo("nothing changed: every leg already had a good report for this cycle, the synthesis is unchanged"
             + (" and the refresh branch already holds it." if outcome.publication is not None else "."))
    results(outcome, echo)
    verdict = {ExitCode.OK: "ok", ExitCode.FAILED: "FAILED",
               ExitCode.ROUTE_UNVERIFIED: "ROUTE NOT VERIFIED"}[outcome.exit_code]
    problems = "; ".join(outcome.stage_errors)
    echo(f"run {verdict}: {len(outcome.ran)} leg(s) ran, {len(outcome.stems('kept'))} kept, "
         f"{len(outcome.stems('failed'))} failed, {len(outcome.stems('not started'))} not started; "
         f"cost ${outcome.cost_usd:.4f}; {outcome.wall_s:.1f} s" + (f" — {problems}" if problems else ""))


def results(outcome: RunOutcome, echo: Echo) -> None:
    """Where the results are: the refresh branch, how to look at it and how to push it, and what the
    working tree still holds (`publish/worktree.py` puts the checkout back once the branch holds them)."""
    publication = outcome.publication
    if publication is None or not publication.commits or publication.operation == "blocked":
        return
    branch, base = publication.branch, publication.base
    where = f"pushed to {branch}" if publication.pushed else f"on the local branch {branch}"
    echo(f"results: {len(publication.commits)} commit(s) {where}, on top of {base}")
    put_back = outcome.put_back
    if put_back is not None and not put_back.left:
        echo("  your working tree is as it was: the reports and the synthesis are commits on that branch")
    elif put_back is not None:
        echo("  still in your working tree, on no commit of that branch: " + ", ".join(put_back.left[:8])
             + (f" and {len(put_back.left) - 8} more" if len(put_back.left) > 8 else ""))
    echo(f"  look at it:  git log --stat {base}..{branch}")
    if publication.pr_url:
        echo(f"  review it:   {publication.pr_url}")
    elif not publication.pushed:
        echo("  push it:     research-dispatch run --push   (pushes the branch and opens or updates the pull "
             "request; no leg is redone)")
    echo("")


def _rel(repo: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(repo.resolve()).as_posix()
    except (ValueError, OSError):
        return str(path)
