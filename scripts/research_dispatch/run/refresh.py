"""`run`: the whole refresh locally — legs in parallel, then verify, synthesize and publish.

Order of work, and why:

1. plan the legs and make the one preflight (`run/preflight.py`): report paths unique across the plan,
   the cycle valid as its branch's name, the API keys, every path the run writes (no symbolic link, a
   writable directory) and, when it publishes, what publishing needs (`publish/readiness.py`, with
   `--push` also a closed PR of the cycle) — all *before* any leg spends money;
2. take the repository lock (`build/.research-dispatch.lock`, see `core/lock.py`): two writers on one
   checkout would interleave writes and fight over the branch. The lock is held for the whole refresh;
   the stages below take it again re-entrantly, never deadlocking on it;
3. overlay the cycle's refresh branch (`publish/accumulate.py`): its newest good reports of this cycle
   come into the working tree (a fresh clone continues where any earlier run left off), reports of legs
   no longer planned move to `build/unplanned/`; `--fresh` first moves hand-edited reports to
   `build/edited/`;
4. decide which legs to redo (`leg/resume.py`, on `leg/standing.py`): a re-run redoes only failed or changed
   legs, `--fresh` redoes all; a report edited by hand is skipped with a warning; the kept ones are
   listed with the reason (`run/summary.py`);
5. run the legs in the leg pool (`run/pool.py`: `--jobs` threads, default `jobs` in the config; the
   run-level dollar cap `run_budget_usd`; the Ctrl-C path);
6. print the summary (what this run did with each leg, where the leg now stands — one `LegState` —, and
   the money every call cost, failed legs included) and the route table, then synthesize (an edited
   synthesis document is kept when nothing it depends on changed), then publish to the local refresh
   branch (push and PR only with `--push`). A stage failure after the legs is reported and exits 1; a
   failed synthesis still publishes the good reports (the PR is partial and says why it has no synthesis).

Ctrl-C: no new leg starts, running legs stop at their next step or are abandoned after a grace period
(`run/pool.py`), and the run releases the lock and exits 1 within seconds (`interrupt.py` holds the
backstop if anything still blocks the exit).

Exit code (`RunOutcome.final_exit_code`): 1 if any leg failed or did not start, or a later stage
failed, or the run was interrupted; 3 if every leg has its report but some route is not verified; 0
otherwise. Bad input (config, topics, `--topics`, missing keys) raises `BadInput` (exit 2) and a held
lock `LockHeld` (exit 1) — the CLI maps both.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from research_dispatch.config.plan import Leg, plan_legs
from research_dispatch.config.settings import Settings, load_settings
from research_dispatch.config.topics import load_topics, select_topics, topic_paths
from research_dispatch.core.errors import BadInput, DispatchError, ExitCode
from research_dispatch.core.redact import redact, redacting
from research_dispatch.core.sanitize import one_line
from research_dispatch.leg.files import complete_pending, writer_lock
from research_dispatch.leg.resume import decide_all
from research_dispatch.leg.standing import Where, assess_worktree
from research_dispatch.leg.status import read_status
from research_dispatch.publish import PublishOptions, publish, summary_lines, worktree
from research_dispatch.publish.accumulate import accumulate, apply_overlay, branch_view, move_edited_aside
from research_dispatch.publish.readiness import publisher_git
from research_dispatch.run import pool, summary
from research_dispatch.run.outcome import RunOutcome
from research_dispatch.run.preflight import Work, preflight
from research_dispatch.synthesis import synthesize as synthesize_all
from research_dispatch.synthesis.stale import keep_edited_document

Echo = Callable[[str], None]
_TEMP_FILE = re.compile(r"^\..+\.[A-Za-z0-9_]{6,}\.tmp$")  # fsio.write_atomic's temp names


def run_command(repo: Path, *, topics: list[str], models: list[str], jobs: int | None, publish: bool, push: bool,
                fresh: bool, cycle: str, env: Mapping[str, str], echo: Echo, allow_edited: bool = False) -> ExitCode:
    """The `run` command: the whole refresh; returns the exit code (see the module docstring)."""
    return run_refresh(repo, topics=topics, models=models, jobs=jobs, publish=publish, push=push, fresh=fresh,
                       cycle=cycle, env=env, echo=echo, allow_edited=allow_edited).exit_code


def run_refresh(repo: Path, *, topics: list[str] | None = None, models: list[str] | None = None,
                jobs: int | None = None, publish: bool = True, push: bool = False, fresh: bool = False,
                cycle: str, env: Mapping[str, str], echo: Echo, synthesize: bool = True,
                live: bool | None = None, allow_edited: bool = False) -> RunOutcome:
    """Run the refresh and return what happened. `synthesize=False` stops after the route table."""
    started = time.monotonic()
    echo = redacting(echo, env)  # every line `run` prints: the explicit environment's keys never show
    settings = load_settings(repo)
    all_topics = load_topics(repo, settings)
    legs = plan_legs(select_topics(all_topics, topics), settings, models)
    if not legs:
        raise BadInput("nothing to run: the selection has no legs", path="--topics")
    full_plan = plan_legs(all_topics, settings)
    preflight(repo, settings, Work(cycle=cycle, legs=legs, planned=full_plan, synthesize=synthesize,
                                   publish=publish and synthesize, push=push), env)
    outcome = RunOutcome(cycle=cycle)
    with writer_lock(repo, settings.build_dir, "run", warn=lambda message: echo(f"warning: {message}")):
        start = worktree.capture(repo, settings)
        _sweep_temp_files(repo, settings, echo)
        earlier = _overlay(repo, settings, full_plan, outcome, env=env, fresh=fresh, echo=echo)
        _run_legs(repo, settings, legs, outcome, jobs=jobs, fresh=fresh, env=env, echo=echo, live=live)
        _assess_after(repo, settings, outcome, echo)
        summary.legs(outcome, echo)
        if not outcome.interrupted:
            missing = _collect_routes(outcome)
            summary.routes(outcome.routes, missing, echo)
            if synthesize:
                _synthesize(repo, settings, outcome, env=env, legs=full_plan, echo=echo)
                # A failed synthesis never loses the legs (DESIGN): the good reports are published anyway,
                # and the PR says the synthesis is missing. Any other stage failure stops the publish.
                others = [e for e in outcome.stage_errors if not e.startswith("synthesize:")]
                if publish and not others:
                    _publish(repo, settings, outcome, env=env, push=push, legs=full_plan, echo=echo,
                             fresh=fresh, allow_edited=allow_edited)
                    _put_back(repo, settings, outcome, env=env, start=start, earlier=earlier, echo=echo)
                elif publish:
                    echo("publish: skipped because an earlier stage failed")
    outcome.wall_s = round(time.monotonic() - started, 3)
    outcome.exit_code = outcome.final_exit_code()
    summary.closing(outcome, echo)
    return outcome


# ----------------------------------------------------------------------------------------------
# Legs


def _sweep_temp_files(repo: Path, settings: Settings, echo: Echo) -> None:
    """Remove temp files an interrupted writer left behind. Safe: we hold the lock, nobody else writes."""
    directories = {settings.research_dir, settings.framework_dir, f"{settings.build_dir}/legs",
                   str(Path(settings.methodology_path).parent)}
    removed = 0
    for relative in sorted(directories):
        directory = repo / relative
        if not directory.is_dir():
            continue
        for path in directory.iterdir():
            if path.is_file() and _TEMP_FILE.match(path.name):
                path.unlink(missing_ok=True)
                removed += 1
    if removed:
        echo(f"removed {removed} temp file(s) left by an interrupted run")


def _overlay(repo: Path, settings: Settings, planned: list[Leg], outcome: RunOutcome, *, env: Mapping[str, str],
             fresh: bool, echo: Echo) -> list[str]:
    """Bring the cycle branch's newest good reports and its synthesis into the working tree (see
    `publish/accumulate.py`, `publish/worktree.py`), so that resume, the synthesis and the commit all
    start from what the branch already holds. Returns the branch's tips (what `_put_back` may restore)."""
    view = branch_view(repo, settings, outcome.cycle, env)
    accumulation = accumulate(repo, settings, planned, outcome.cycle, view, replace_edited=fresh)
    if fresh and move_edited_aside(repo, settings, accumulation.legs, echo):
        accumulation = accumulate(repo, settings, planned, outcome.cycle, view, replace_edited=fresh)
    result = apply_overlay(repo, settings, accumulation, replace_edited=fresh)
    brought = worktree.bring_synthesis(repo, settings, view)
    lines = result.lines()
    if view is not None and (result.brought or brought) and len(result.brought) == len(lines):
        what = [f"{len(result.brought)} report(s)"] if result.brought else []
        lines = [f"continuing {view.branch}: took {' and '.join([*what, *(['its synthesis'] if brought else [])])} "
                 "from it (this cycle's work so far)"]
    elif brought:
        lines.append(f"took the synthesis from {view.branch if view else 'the refresh branch'}")
    for line in lines:
        echo(f"overlay: {line}")
    return [tip.sha for tip in view.tips] if view is not None else []


def overlay_for_synthesis(repo: Path, settings: Settings, cycle: str, env: Mapping[str, str], echo: Echo) -> bool:
    """The first step of `synthesize` (under its lock): overlay the refresh branch's newer good reports,
    so the synthesis describes what the branch will hold (CI's synthesize job checks out every branch);
    then the edited-document rule. Returns True when an edited document is kept (do not synthesize)."""
    planned = plan_legs(load_topics(repo, settings), settings) if topic_paths(repo, settings) else []
    view = branch_view(repo, settings, cycle, env)
    if planned and view is not None and view.tips:
        result = apply_overlay(repo, settings, accumulate(repo, settings, planned, cycle, view), move_unplanned=False)
        for line in result.lines():
            echo(f"overlay: {line}")
    keep, message = keep_edited_document(repo, settings, planned)
    if message:
        echo(f"synthesis: {message}")
    return keep


def _assess_after(repo: Path, settings: Settings, outcome: RunOutcome, echo: Echo) -> None:
    """Where each leg stands after the run: the one rule of `leg/state`, from the repository."""
    completed, problems = complete_pending(repo, settings.build_dir)
    for what in completed:
        echo(f"completed the write of {what}")
    for problem in problems:
        echo(f"warning: {problem}")
    for item in outcome.legs:
        assessment = assess_worktree(repo, settings, item.leg, cycle=outcome.cycle)
        item.state = assessment.state
        item.worktree = next((c for c in assessment.candidates if c.where is Where.WORKTREE), None)


def _run_legs(repo: Path, settings: Settings, legs: list[Leg], outcome: RunOutcome, *, jobs: int | None,
              fresh: bool, env: Mapping[str, str], echo: Echo, live: bool | None) -> None:
    """Decide which legs to redo, say so, and run them in the leg pool."""
    for leg in legs:  # a damaged status file is only a record: say so, and let the report decide
        read_status(repo, settings, leg, warn=lambda message: echo(f"warning: {message}"))
    decisions = decide_all(repo, settings, legs, cycle=outcome.cycle, fresh=fresh)
    workers = max(1, min(jobs or settings.jobs, sum(1 for d in decisions if d.run) or 1))
    summary.plan(decisions, settings, cycle=outcome.cycle, workers=workers, echo=echo)
    pool.run_legs(repo, settings, decisions, outcome, workers=workers, env=env, echo=echo, live=live)


def _collect_routes(outcome: RunOutcome) -> list[str]:
    """The route rows of the working tree's reports, from the rows `_assess_after` already verified
    (each report and call log is read and checked once per run), into `outcome.routes`; returns the
    legs without a report. An unreadable report is a stage error."""
    missing = []
    for item in outcome.legs:
        candidate = item.worktree
        if candidate is None:
            missing.append(item.stem)
        elif candidate.row is None:
            outcome.stage_errors.append(f"verify: {candidate.relpath}: {candidate.problem or 'unreadable'}")
        else:
            outcome.routes.append(candidate.row)
    return missing


# ----------------------------------------------------------------------------------------------
# Synthesis and publishing


def _stage_failed(outcome: RunOutcome, stage: str, exc: BaseException, echo: Echo) -> str:
    """Record a stage's failure (one line, redacted) and say it; returns the line."""
    message = one_line(redact(f"{type(exc).__name__}: {exc}" if not isinstance(exc, DispatchError) else str(exc)),
                       400)
    outcome.stage_errors.append(f"{stage}: {message}")
    echo(f"{stage}: FAILED — {message}")
    return message



def _synthesize(repo: Path, settings: Settings, outcome: RunOutcome, *, env: Mapping[str, str], legs: list[Leg],
                echo: Echo) -> None:
    research = repo / settings.research_dir
    if not (research.is_dir() and any(research.glob("*.md"))):
        outcome.stage_errors.append("synthesize: no reports to synthesize")
        echo("synthesize: skipped — there are no reports")
        return
    keep, message = keep_edited_document(repo, settings, legs)
    if message:
        echo(f"synthesis: {message}")
    if keep:
        echo("")
        return
    try:
        result = synthesize_all(repo, settings, env=env, cycle=outcome.cycle, legs=legs,
                                progress=lambda p: echo(p.line()))
    except Exception as exc:
        outcome.synthesis_error = _stage_failed(outcome, "synthesize", exc, echo)
        return
    outcome.synthesis = result
    summary.synthesis(repo, result, echo)


def _publish(repo: Path, settings: Settings, outcome: RunOutcome, *, env: Mapping[str, str], push: bool,
             legs: list[Leg], echo: Echo, fresh: bool = False, allow_edited: bool = False) -> None:
    """Commit to the local refresh branch; with `push`, also push it and create or update the PR."""
    branch = f"{settings.pr.branch_prefix}{outcome.cycle}"
    options = PublishOptions(cycle=outcome.cycle, push=push, open_pr=push, legs=legs, planned=legs,
                             replace_edited=fresh, allow_edited=allow_edited,
                             synthesis_failure=f"the synthesis failed: {outcome.synthesis_error}"
                             if outcome.synthesis_error else "")
    try:
        git = publisher_git(repo, settings, env)
        tips_before = {git.rev(f"refs/heads/{branch}"), git.rev(f"refs/remotes/{settings.pr.remote}/{branch}")}
        result = publish(repo, settings, options, env=env, log=lambda message: echo(f"  {message}"))
    except Exception as exc:
        _stage_failed(outcome, "publish", exc, echo)
        return
    outcome.publication = result
    outcome.branch_changed = bool(result.commits) and result.commits[-1] not in tips_before
    for index, line in enumerate(summary_lines(result)):
        echo(line if index == 0 else f"  {line}")
    if result.exit_code != ExitCode.OK:
        outcome.stage_errors.append(f"publish: {result.message or 'did not complete'}")
    echo("")


def _put_back(repo: Path, settings: Settings, outcome: RunOutcome, *, env: Mapping[str, str],
              start: worktree.Start, earlier: list[str], echo: Echo) -> None:
    """Once the refresh branch holds the results, put the checkout back as the run found it
    (`publish/worktree.py`): the base branch never carries research that was not reviewed."""
    publication = outcome.publication
    if publication is None or not publication.commits or publication.operation == "blocked":
        return
    try:
        git = publisher_git(repo, settings, env)
        outcome.put_back = worktree.put_back(repo, settings, git, publication.commits[-1], start, earlier)
    except Exception as exc:  # nothing is lost: the results are on the branch and still in the working tree
        message = one_line(redact(str(exc) if isinstance(exc, DispatchError) else f"{type(exc).__name__}: {exc}"),
                           300)
        echo(f"warning: the working tree was not put back ({message}); the results are on {publication.branch} "
             "and still in the working tree too")
