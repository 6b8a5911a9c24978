"""`run`: the whole refresh locally — legs in parallel, then verify, synthesize and publish.

Order of work, and why:

1. plan the legs and require both API keys *before* anything touches the network or the disk;
2. take the repository lock (`build/.research-dispatch.lock`, see `lock.py`): two writers on one
   checkout would interleave writes and fight over the branch. The lock is held for the whole refresh;
   the stages below take it again re-entrantly, never deadlocking on it;
3. overlay the cycle's refresh branch (`publish/accumulate.py`): its newest good reports of this cycle
   come into the working tree (a fresh clone continues where any earlier run left off), reports of legs
   no longer planned move to `build/unplanned/`; `--fresh` first moves hand-edited reports to
   `build/edited/`;
4. decide which legs to redo (`resume.py`, on `legstate`): a re-run redoes only failed or changed legs,
   `--fresh` redoes all; a report edited by hand is skipped with a warning; the kept ones are listed
   with the reason;
4. run the legs in a thread pool (`--jobs`, default `jobs` in the config). Legs are I/O-bound (HTTP to
   the gateway and the search API), so threads overlap them fully. A leg's failure — even a crash — is
   that leg's result, never the run's; the others go on;
5. a run-level dollar cap (`run_budget_usd`): once the live total of the legs' `usage.cost` reaches
   it, no new leg starts (they are reported "not started: run budget reached"); running legs finish
   under their own per-leg caps;
6. print the summary (what this run did with each leg, where the leg now stands — one `LegState` —, and
   the money every call cost, failed legs included) and the route table, then synthesize (an edited
   synthesis document is kept when nothing it depends on changed), then publish to the local refresh
   branch (push and PR only with `--push`). A stage failure after the legs is reported and exits 1.

Ctrl-C stops new legs from starting and makes running legs stop at their next step (the interrupt
Event reaches `run_leg`; their status file says `interrupted`; no partial report is ever written:
reports are written atomically, at the end of a leg). A leg blocked inside a model or search call
cannot be cancelled from outside, so after `LEG_STOP_GRACE_S` it is recorded as interrupted and its
daemon thread is left behind; the run releases the lock and exits 1 within seconds (`interrupt.py`
holds the backstop if anything still blocks the exit). Worker threads start only after every heavy
client library is imported (`preload.py`): concurrent first imports in a fresh interpreter lose legs.

Exit code: 1 if any leg failed or did not start, or a later stage failed, or the run was interrupted;
3 if every leg has its report but some route is not verified; 0 otherwise. Bad input (config, topics,
`--topics`, missing keys) raises `BadInput` (exit 2) and a held lock `LockHeld` (exit 1) — the CLI maps
both.
"""

from __future__ import annotations

import contextlib
import enum
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from research_dispatch.core.errors import BadInput, DispatchError, ExitCode
from research_dispatch.core.redact import redacting
from research_dispatch.leg.status import LegResult, LegState, read_status, timestamp, write_status

if TYPE_CHECKING:  # pragma: no cover
    from research_dispatch.config.plan import Leg
    from research_dispatch.config.settings import Settings
    from research_dispatch.leg.events import LegProgress
    from research_dispatch.leg.resume import Decision
    from research_dispatch.leg.state import Candidate
    from research_dispatch.leg.verify import RouteRow
    from research_dispatch.publish.command import PublishResult
    from research_dispatch.publish.gitops import Git
    from research_dispatch.run.progress import Board, Display
    from research_dispatch.synthesis.pipeline import SynthesisResult

Echo = Callable[[str], None]
DIFF_PREVIEW_LINES = 12
_TEMP_FILE = re.compile(r"^\..+\.[A-Za-z0-9_]{6,}\.tmp$")  # fsio.write_atomic's temp names


class Activity(str, enum.Enum):
    """What this run did with a leg (where the leg then stands is its `LegState`)."""

    QUEUED = "queued"
    RAN = "ran"
    KEPT = "kept"  # a good report of this cycle stands and its inputs are unchanged
    SKIPPED = "skipped"  # its report was edited by hand: never regenerated silently
    NOT_STARTED = "not started"

    def __str__(self) -> str:
        return self.value


@dataclass
class LegOutcome:
    """One leg of this run: what was decided, what this run did, and where the leg stands after it."""

    leg: Leg
    decision: Decision
    activity: Activity
    note: str = ""
    result: LegResult | None = None
    state: LegState = LegState.MISSING  # after the run, from the repository (`legstate.assess`)
    worktree: Candidate | None = None  # the working tree's report after the run, as `legstate` read it
    cost_usd_before: float = 0.0  # the standing report's cost, for kept legs

    @property
    def stem(self) -> str:
        return self.leg.stem

    @property
    def ran(self) -> bool:
        return self.result is not None

    @property
    def label(self) -> str:
        """This run's word for the leg: the attempt's outcome (ok, degraded, failed) or the activity."""
        if self.result is not None:
            return self.result.status.value
        return self.activity.value

    @property
    def good(self) -> bool:
        return self.state.has_report


@dataclass
class RunOutcome:
    """Everything `run` did, for the summary, the demo and the tests."""

    cycle: str
    legs: list[LegOutcome] = field(default_factory=list)
    routes: list[RouteRow] = field(default_factory=list)
    synthesis: SynthesisResult | None = None
    publication: PublishResult | None = None
    stage_errors: list[str] = field(default_factory=list)
    interrupted: bool = False
    legs_cost_usd: float = 0.0
    branch_changed: bool = False
    wall_s: float = 0.0
    exit_code: ExitCode = ExitCode.FAILED

    def stems(self, *labels: str) -> list[str]:
        """Legs whose label in this run (ok, degraded, failed, kept, skipped, not started) is one of these."""
        return [o.stem for o in self.legs if o.label in labels]

    @property
    def ran(self) -> list[str]:
        return [o.stem for o in self.legs if o.ran]

    @property
    def cost_usd(self) -> float:
        synthesis_usd = self.synthesis.cost_usd if self.synthesis is not None else 0.0
        return round(self.legs_cost_usd + synthesis_usd, 6)


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
    from research_dispatch.config.plan import plan_legs
    from research_dispatch.config.settings import load_settings
    from research_dispatch.config.topics import load_topics, select_topics
    from research_dispatch.leg.run import require_keys
    from research_dispatch.run.lock import writer_lock

    started = time.monotonic()
    echo = redacting(echo, env)  # every line `run` prints: the explicit environment's keys never show
    settings = load_settings(repo)
    all_topics = load_topics(repo, settings)
    legs = plan_legs(select_topics(all_topics, topics), settings, models)
    if not legs:
        raise BadInput("nothing to run: the selection has no legs", path="--topics")
    require_keys(env, settings, legs)
    _require_output_dirs(repo, settings, synthesize=synthesize)
    if publish and synthesize:
        _preflight_publish(repo, settings, env, push=push, cycle=cycle)
    outcome = RunOutcome(cycle=cycle)
    full_plan = plan_legs(all_topics, settings)
    with writer_lock(repo, settings.build_dir, "run", warn=lambda message: echo(f"warning: {message}")):
        _sweep_temp_files(repo, settings, echo)
        _overlay(repo, settings, full_plan, outcome, env=env, fresh=fresh, echo=echo)
        _run_legs(repo, settings, legs, outcome, jobs=jobs, fresh=fresh, env=env, echo=echo, live=live)
        _assess_after(repo, settings, outcome, echo)
        _summarise_legs(outcome, echo)
        if not outcome.interrupted:
            _route_table(repo, settings, outcome, echo)
            if synthesize:
                _synthesize(repo, settings, outcome, env=env, legs=full_plan, echo=echo)
                if publish and not outcome.stage_errors:
                    _publish(repo, settings, outcome, env=env, push=push, legs=full_plan, echo=echo,
                             fresh=fresh, allow_edited=allow_edited)
                elif publish:
                    echo("publish: skipped because an earlier stage failed")
    outcome.wall_s = round(time.monotonic() - started, 3)
    outcome.exit_code = _exit_code(outcome)
    _closing_line(outcome, echo)
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
             fresh: bool, echo: Echo) -> None:
    """Bring the cycle branch's newest good reports into the working tree (see `publish/accumulate.py`),
    so that resume, the synthesis and the commit all start from what the branch already holds."""
    from research_dispatch.publish.accumulate import accumulate, apply_overlay, branch_view, move_edited_aside

    view = branch_view(repo, settings, outcome.cycle, env)
    accumulation = accumulate(repo, settings, planned, outcome.cycle, view, replace_edited=fresh)
    if fresh and move_edited_aside(repo, settings, accumulation.legs, echo):
        accumulation = accumulate(repo, settings, planned, outcome.cycle, view, replace_edited=fresh)
    result = apply_overlay(repo, settings, accumulation, replace_edited=fresh)
    for line in result.lines():
        echo(f"overlay: {line}")


def overlay_for_synthesis(repo: Path, settings: Settings, cycle: str, env: Mapping[str, str], echo: Echo) -> bool:
    """The first step of `synthesize` (under its lock): overlay the refresh branch's newer good reports,
    so the synthesis describes what the branch will hold (CI's synthesize job checks out every branch);
    then the edited-document rule. Returns True when an edited document is kept (do not synthesize)."""
    from research_dispatch.config.plan import plan_legs
    from research_dispatch.config.topics import load_topics, topic_paths
    from research_dispatch.publish.accumulate import accumulate, apply_overlay, branch_view
    from research_dispatch.synthesis.stale import keep_edited_document

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
    """Where each leg stands after the run: the one rule of `legstate`, from the repository."""
    from research_dispatch.leg.files import complete_pending
    from research_dispatch.leg.state import Where, assess_worktree

    completed, problems = complete_pending(repo, settings.build_dir)
    for stem in completed:
        echo(f"completed the write of {stem}'s report and call log")
    for problem in problems:
        echo(f"warning: {problem}")
    for item in outcome.legs:
        assessment = assess_worktree(repo, settings, item.leg, cycle=outcome.cycle)
        item.state = assessment.state
        item.worktree = next((c for c in assessment.candidates if c.where is Where.WORKTREE), None)


def _run_legs(repo: Path, settings: Settings, legs: list[Leg], outcome: RunOutcome, *, jobs: int | None,
              fresh: bool, env: Mapping[str, str], echo: Echo, live: bool | None) -> None:
    from research_dispatch.config.topics import effective
    from research_dispatch.core.ghactions import run_url
    from research_dispatch.leg.resume import ResumeAction, decide_all
    from research_dispatch.run.progress import Board, make_display

    for leg in legs:  # a damaged status file is only a record: say so, and let the report decide
        read_status(repo, settings, leg, warn=lambda message: echo(f"warning: {message}"))
    decisions = decide_all(repo, settings, legs, cycle=outcome.cycle, fresh=fresh)
    to_run = [d for d in decisions if d.run]
    skipped = [d for d in decisions if d.action is ResumeAction.SKIP_EDITED]
    workers = max(1, min(jobs or settings.jobs, len(to_run) or 1))
    cap = settings.run_budget_usd
    echo(f"run: cycle {outcome.cycle}, {len(legs)} leg(s): {len(to_run)} to run, "
         f"{len(legs) - len(to_run) - len(skipped)} kept" + (f", {len(skipped)} skipped" if skipped else "")
         + f"; jobs {workers}; run budget ${cap:.2f}")
    for decision in decisions:
        verb = {ResumeAction.RUN: "run ", ResumeAction.KEEP: "keep", ResumeAction.SKIP_EDITED: "skip"}[decision.action]
        echo(f"  {verb} {decision.leg.stem} ({decision.leg.route.model}): {decision.reason}")
        if decision.action is ResumeAction.SKIP_EDITED:
            echo(f"warning: {decision.leg.report_relpath(settings)} was edited by hand; it is not regenerated "
                 "(run --fresh to move it to build/edited/ and redo the leg)")

    board = Board()
    by_stem: dict[str, LegOutcome] = {}
    for decision in decisions:
        _, budget, _ = effective(decision.leg.topic, settings)
        activity = {ResumeAction.RUN: Activity.QUEUED, ResumeAction.KEEP: Activity.KEPT,
                    ResumeAction.SKIP_EDITED: Activity.SKIPPED}[decision.action]
        board.add(decision.leg.stem, decision.leg.route.model, budget.max_steps, status=activity.value)
        by_stem[decision.leg.stem] = LegOutcome(leg=decision.leg, decision=decision, activity=activity,
                                                note="" if decision.run else decision.reason)
    outcome.legs = [by_stem[d.leg.stem] for d in decisions]
    if not to_run:
        return

    display = make_display(board, echo, live=live)
    stop = threading.Event()
    url = run_url(env)
    finishing = threading.Lock()  # a leg's record is set once: by its thread, or by the interrupt path
    abandoned: set[str] = set()

    def work(decision: Decision) -> None:
        leg = decision.leg
        record = by_stem[leg.stem]
        if stop.is_set():
            record.activity, record.note = Activity.NOT_STARTED, "not started: interrupted"
        elif board.spent_usd >= cap:
            record.activity = Activity.NOT_STARTED
            record.note = f"not started: run budget reached (${board.spent_usd:.4f} of ${cap:.2f})"
        else:
            _run_one(repo, settings, record, env=env, cycle=outcome.cycle, run_url=url, progress=display.event,
                     interrupt=stop, finishing=finishing, abandoned=abandoned)
        if leg.stem in abandoned:
            return
        route = record.result.route if record.result and record.label != "failed" else ""
        display.finished(leg.stem, record.label, route,
                         record.note if record.label in ("failed", "not started", "degraded") else "")

    from research_dispatch.run.preload import import_worker_modules

    import_worker_modules()  # before the first worker thread: concurrent first imports lose legs (preload.py)
    threads = _LegThreads(to_run, work, workers)
    display.start()
    try:
        threads.start()
        try:
            while not threads.wait(0.5):
                pass
        except KeyboardInterrupt:
            from research_dispatch.core.interrupt import shielded

            with shielded():
                _stop_legs(repo, settings, threads, by_stem, board, outcome, stop=stop, finishing=finishing,
                           abandoned=abandoned, display=display, echo=echo)
    finally:
        display.stop()
    outcome.legs_cost_usd = round(sum(o.result.cost_usd for o in outcome.legs if o.result), 6)


LEG_STOP_GRACE_S = 2.0
"""After Ctrl-C, how long running legs get to stop at their next step before the run records them as
interrupted and leaves their threads behind (a thread blocked in a socket read cannot be cancelled)."""


class _LegThreads:
    """Runs legs on `workers` daemon threads, taking the next leg from a shared queue.

    Why not `ThreadPoolExecutor`: its workers are joined when the pool closes and again at interpreter
    exit, so one leg blocked in a 40-second socket read would hold Ctrl-C for 40 seconds. Daemon threads
    are never joined: after Ctrl-C and a short grace period the run records what is still running as
    interrupted, releases the lock and exits, leaving the blocked reads behind.
    """

    def __init__(self, decisions: list[Decision], work: Callable[[Decision], None], workers: int) -> None:
        self._queue = list(decisions)
        self._work = work
        self._workers = max(1, workers)
        self._lock = threading.Lock()
        self._running: dict[str, Decision] = {}
        self._unfinished = len(decisions)
        self._done = threading.Event()
        if not decisions:
            self._done.set()

    def start(self) -> None:
        for number in range(min(self._workers, len(self._queue))):
            threading.Thread(target=self._worker, name=f"leg_{number}", daemon=True).start()

    def _worker(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                decision = self._queue.pop(0)
                self._running[decision.leg.stem] = decision
            try:
                self._work(decision)
            finally:
                with self._lock:
                    self._running.pop(decision.leg.stem, None)
                    self._finished(1)

    def _finished(self, count: int) -> None:
        self._unfinished -= count
        if self._unfinished <= 0:
            self._done.set()

    def wait(self, timeout: float | None) -> bool:
        """True once every leg has finished or been cancelled."""
        return self._done.wait(timeout)

    def cancel_queued(self) -> list[Decision]:
        """Take every leg that has not started off the queue; they will not start."""
        with self._lock:
            cancelled, self._queue = self._queue, []
            self._finished(len(cancelled))
        return cancelled

    def running(self) -> list[Decision]:
        with self._lock:
            return list(self._running.values())


def _stop_legs(repo: Path, settings: Settings, threads: _LegThreads, by_stem: dict[str, LegOutcome],
               board: Board, outcome: RunOutcome, *, stop: threading.Event, finishing: threading.Lock,
               abandoned: set[str], display: Display, echo: Echo) -> None:
    """The Ctrl-C path: no new leg starts, running legs get `LEG_STOP_GRACE_S` to stop at their next
    step, and any still blocked in a call are recorded as interrupted (status file too) and left behind."""
    stop.set()
    outcome.interrupted = True
    for decision in threads.cancel_queued():
        record = by_stem[decision.leg.stem]
        record.activity, record.note = Activity.NOT_STARTED, "not started: interrupted"
    display.stop()
    running = [d.leg.stem for d in threads.running()]
    echo("interrupted: no new legs start; " + (f"giving {', '.join(running)} up to {LEG_STOP_GRACE_S:g} s to stop "
                                                "at their next step" if running else "no leg was running"))
    with contextlib.suppress(KeyboardInterrupt):
        threads.wait(LEG_STOP_GRACE_S)
    blocked = []
    rows = {row.stem: row for row in board.snapshot()}
    with finishing:
        for decision in threads.running():
            record = by_stem[decision.leg.stem]
            if record.result is not None:
                continue
            abandoned.add(record.stem)
            row = rows.get(record.stem)
            record.result = _interrupted_result(decision.leg, outcome.cycle, calls=row.step if row else 0,
                                                cost_usd=row.cost_usd if row else 0.0)
            record.activity, record.note = Activity.RAN, "interrupted (blocked in a call; abandoned)"
            write_status(repo, settings, decision.leg, record.result, quiet=True)
            blocked.append(record.stem)
    if blocked:
        echo(f"interrupted: {', '.join(blocked)} still waiting on a model or search call after "
             f"{LEG_STOP_GRACE_S:g} s; recorded as interrupted and abandoned")


def _interrupted_result(leg: Leg, cycle: str, *, calls: int, cost_usd: float) -> LegResult:
    return LegResult(stem=leg.stem, topic=leg.topic.id, model=leg.route.model, family=leg.family,
                     status=LegState.FAILED, error="interrupted by the user (Ctrl-C) during a model or search call",
                     reasons=["interrupted"], calls=calls, cost_usd=round(cost_usd, 6), cycle=cycle,
                     finished_at=timestamp(), interrupted=True)


def _run_one(repo: Path, settings: Settings, record: LegOutcome, *, env: Mapping[str, str], cycle: str,
             run_url: str | None, progress: Callable[[LegProgress], None], interrupt: threading.Event,
             finishing: threading.Lock, abandoned: set[str]) -> None:
    """Run one leg; any exception becomes this leg's failure (with a status file), never the run's.

    A leg the interrupt path already recorded as abandoned keeps that record (`abandoned`)."""
    from research_dispatch.core.redact import redact
    from research_dispatch.core.sanitize import one_line
    from research_dispatch.leg.run import run_leg

    leg = record.leg
    try:
        result = run_leg(repo, settings, leg, env=env, cycle=cycle, run_url=run_url, progress=progress,
                         interrupt=interrupt)
    except Exception as exc:  # a crash outside the leg's own guard: still only this leg's failure
        result = LegResult(stem=leg.stem, topic=leg.topic.id, model=leg.route.model, family=leg.family,
                           status=LegState.FAILED, error=redact(f"{type(exc).__name__}: {exc}"), cycle=cycle,
                           reasons=["the leg crashed; see the trace"])
        write_status(repo, settings, leg, result, quiet=True)
    with finishing:
        if leg.stem in abandoned:
            return
        record.result = result
        record.activity = Activity.RAN
        if result.interrupted:
            record.note = "interrupted"
        elif result.status == LegState.FAILED:
            record.note = one_line(result.error or "; ".join(result.reasons) or "failed", 200)
        elif result.reasons:
            record.note = one_line("; ".join(result.reasons), 200)


# ----------------------------------------------------------------------------------------------
# Summary and route table


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _summarise_legs(outcome: RunOutcome, echo: Echo) -> None:
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
    echo(_table(["leg", "this run", "state", "route", "words", "cost", "reason"], rows))
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


def _route_table(repo: Path, settings: Settings, outcome: RunOutcome, echo: Echo) -> None:
    """The route table of the working tree's reports, from the rows `_assess_after` already verified
    (each report and call log is read and checked once per run)."""
    from research_dispatch.leg.verify import text_table

    rows = []
    missing = []
    for item in outcome.legs:
        candidate = item.worktree
        if candidate is None:
            missing.append(item.stem)
        elif candidate.row is None:
            outcome.stage_errors.append(f"verify: {candidate.relpath}: {candidate.problem or 'unreadable'}")
        else:
            rows.append(candidate.row)
    outcome.routes = rows
    if rows:
        echo("route fidelity:")
        echo(text_table(rows))
        for row in rows:
            for problem in row.problems:
                echo(f"problem: {row.relpath}: {problem}")
    if missing:
        echo(f"no report: {', '.join(missing)}")
    echo("")


# ----------------------------------------------------------------------------------------------
# Synthesis and publishing


def _stage_failed(outcome: RunOutcome, stage: str, exc: BaseException, echo: Echo) -> None:
    from research_dispatch.core.redact import redact
    from research_dispatch.core.sanitize import one_line

    message = one_line(redact(f"{type(exc).__name__}: {exc}" if not isinstance(exc, DispatchError) else str(exc)),
                       400)
    outcome.stage_errors.append(f"{stage}: {message}")
    echo(f"{stage}: FAILED — {message}")


def _synthesize(repo: Path, settings: Settings, outcome: RunOutcome, *, env: Mapping[str, str], legs: list[Leg],
                echo: Echo) -> None:
    from research_dispatch.synthesis.stale import keep_edited_document

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
        from research_dispatch.synthesis import synthesize

        result = synthesize(repo, settings, env=env, cycle=outcome.cycle, legs=legs)
    except Exception as exc:
        _stage_failed(outcome, "synthesize", exc, echo)
        return
    outcome.synthesis = result
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


def _publish(repo: Path, settings: Settings, outcome: RunOutcome, *, env: Mapping[str, str], push: bool,
             legs: list[Leg], echo: Echo, fresh: bool = False, allow_edited: bool = False) -> None:
    """Commit to the local refresh branch; with `push`, also push it and create or update the PR."""
    from research_dispatch.publish import publish, summary_lines

    branch = f"{settings.pr.branch_prefix}{outcome.cycle}"
    try:
        git = _git(repo, settings, env)
        tips_before = {git.rev(f"refs/heads/{branch}"), git.rev(f"refs/remotes/{settings.pr.remote}/{branch}")}
        result = publish(repo, settings, cycle=outcome.cycle, push=push, open_pr=push, env=env, legs=legs,
                         planned=legs, log=lambda message: echo(f"  {message}"), replace_edited=fresh,
                         allow_edited=allow_edited)
    except Exception as exc:
        _stage_failed(outcome, "publish", exc, echo)
        return
    outcome.publication = result
    outcome.branch_changed = bool(result.commits) and result.commits[-1] not in tips_before
    for index, line in enumerate(summary_lines(result)):
        echo(line if index == 0 else f"  {line}")
    if not push:
        echo("  local branch only: use --push to push it and open or update the pull request")
    if result.exit_code != ExitCode.OK:
        outcome.stage_errors.append(f"publish: {result.message or 'did not complete'}")
    echo("")


def _require_output_dirs(repo: Path, settings: Settings, *, synthesize: bool) -> None:
    """Every directory the run writes to, checked before any leg spends money (exit 2 naming it)."""
    from research_dispatch.core.fsio import confined, require_writable_dir

    places = [(settings.build_dir, "build_dir"), (settings.research_dir, "research_dir")]
    if synthesize:
        places += [(settings.framework_dir, "framework_dir"),
                   (str(Path(settings.methodology_path).parent), "methodology_path")]
    for relative, setting in places:
        require_writable_dir(confined(repo, relative), label=relative, field=setting)


def _preflight_publish(repo: Path, settings: Settings, env: Mapping[str, str], *, push: bool, cycle: str) -> None:
    """What publishing will need, checked before any leg spends money — the same checks, in the same
    terms, that the publish stage makes after the legs (publish/command.py), using its read-only git
    helpers:

    * a git work tree with a commit, and the refresh branch not checked out in a worktree;
    * the base branch (`pr.base`): locally, or with `--push` on the remote — which must be reachable;
    * with `--push`, the GitHub token and API URL (`environment`) and the repository name;
    * no commit on the refresh branch (local, and remote with `--push`) that the bot did not make:
      publish would refuse to overwrite it, so the legs' money would buy nothing.

    Bad settings or environment are `BadInput` (exit 2); an unreachable remote or a branch someone else
    committed to is `PublishError` (exit 1).
    """
    from research_dispatch.core.errors import PublishError

    git = _git(repo, settings, env)
    if git.rev("HEAD") is None:
        raise BadInput("not a git repository with a commit to branch from; run `git init` and commit, or pass "
                       "--no-publish", path=str(repo))
    git.check_repository()
    pr = settings.pr
    branch = f"{pr.branch_prefix}{cycle}"
    if f"refs/heads/{branch}" in git.checked_out_branches():
        raise PublishError(f"branch {branch!r} is checked out in a worktree; switch to another branch first "
                           "(publish never touches your working tree), or pass --no-publish")
    remote_tip: str | None = None
    if push:
        from research_dispatch.publish.pulls import require_target

        target = require_target(env)  # the token and API URL through `environment`, and the repository
        url = git.remote_url(pr.remote)
        if url is None:
            raise BadInput(f"no git remote {pr.remote!r} to push to; add one or run without --push",
                           path="pr.remote")
        git.use_token_for(url, target.token)
        try:
            heads = git.ls_remote_heads(pr.remote, [pr.base, branch])
        except PublishError as exc:
            raise PublishError(f"remote {pr.remote!r} is not reachable, so the refresh could not be pushed; "
                               f"no leg was run ({exc})") from None
        if pr.base not in heads:
            raise BadInput(f"base branch {pr.base!r} does not exist on remote {pr.remote!r}", path="pr.base")
        refspecs = [f"+refs/heads/{pr.base}:refs/remotes/{pr.remote}/{pr.base}"]
        if branch in heads:
            refspecs.append(f"+refs/heads/{branch}:refs/remotes/{pr.remote}/{branch}")
        git.fetch(pr.remote, refspecs)
        base_sha = git.rev(f"refs/remotes/{pr.remote}/{pr.base}")
        remote_tip = git.rev(f"refs/remotes/{pr.remote}/{branch}") if branch in heads else None
    else:
        base_sha = git.rev(f"refs/heads/{pr.base}") or git.rev(f"refs/remotes/{pr.remote}/{pr.base}")
    if base_sha is None:
        raise BadInput(f"base branch {pr.base!r} not found (neither refs/heads/{pr.base} nor "
                       f"refs/remotes/{pr.remote}/{pr.base})", path="pr.base")
    for where, tip in (("remote", remote_tip), ("local", git.rev(f"refs/heads/{branch}"))):
        foreign = git.foreign_commits(base_sha, tip) if tip else []
        if foreign:
            from research_dispatch.core.sanitize import one_line

            names = ", ".join(f"{c.sha[:8]} by {one_line(c.author_name, 60)}" for c in foreign[:5])
            raise PublishError(f"the {where} branch {branch} has {len(foreign)} commit(s) the bot did not make "
                               f"({names}); publish would not overwrite them, so no leg was run. Merge or "
                               "remove them, or run with --no-publish")


def _git(repo: Path, settings: Settings, env: Mapping[str, str]) -> Git:
    """The publisher's git (`publish/gitops.py`: argument lists, a controlled environment, keys redacted),
    for the run's read-only questions before publishing (which commit a ref points at)."""
    from research_dispatch.publish.command import resolve_identity
    from research_dispatch.publish.gitops import Git

    return Git(repo, env, resolve_identity(settings.pr, env))


def _rel(repo: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(repo.resolve()).as_posix()
    except (ValueError, OSError):
        return str(path)


# ----------------------------------------------------------------------------------------------
# Exit code and closing line


def _exit_code(outcome: RunOutcome) -> ExitCode:
    if outcome.interrupted or outcome.stage_errors or outcome.stems("failed", "not started", "queued"):
        return ExitCode.FAILED
    if any(not row.verified for row in outcome.routes):
        return ExitCode.ROUTE_UNVERIFIED
    return ExitCode.OK


def _closing_line(outcome: RunOutcome, echo: Echo) -> None:
    if outcome.interrupted:
        echo(f"run interrupted after {outcome.wall_s:.1f} s; the lock is released. Run again to redo "
             "the legs that did not finish.")
        return
    synthesis = outcome.synthesis
    if not outcome.ran and synthesis is not None and synthesis.diff.is_empty and not outcome.branch_changed:
        echo("nothing changed: every leg already had a good report for this cycle, the synthesis is unchanged"
             + (" and the refresh branch already holds it." if outcome.publication is not None else "."))
    verdict = {ExitCode.OK: "ok", ExitCode.FAILED: "FAILED",
               ExitCode.ROUTE_UNVERIFIED: "ROUTE NOT VERIFIED"}[outcome.exit_code]
    problems = "; ".join(outcome.stage_errors)
    echo(f"run {verdict}: {len(outcome.ran)} leg(s) ran, {len(outcome.stems('kept'))} kept, "
         f"{len(outcome.stems('failed'))} failed, {len(outcome.stems('not started'))} not started; "
         f"cost ${outcome.cost_usd:.4f}; {outcome.wall_s:.1f} s" + (f" — {problems}" if problems else ""))
