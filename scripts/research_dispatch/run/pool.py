"""The leg pool of `run`: legs on worker threads, the run-level dollar cap, and the Ctrl-C path.

Legs are I/O-bound (HTTP to the gateway and the search API), so threads overlap them fully. A leg's
failure — even a crash — is that leg's result, never the run's; the others go on. Once the live total
of the legs' `usage.cost` reaches `run_budget_usd`, no new leg starts (they are reported "not
started: run budget reached"); running legs finish under their own per-leg caps.

Ctrl-C stops new legs from starting and makes running legs stop at their next step (the interrupt
Event reaches `run_leg`; their status file says `interrupted`; no partial report is ever written:
reports are written atomically, at the end of a leg). A leg blocked inside a model or search call
cannot be cancelled from outside, so after `LEG_STOP_GRACE_S` it is recorded as interrupted and its
daemon thread is left behind (`core/workers.py`: daemon threads, never joined). Worker threads start
only after every client library they use is imported (`preload.py`): concurrent first imports in a fresh
interpreter lose legs. `work` records every failure of its leg itself and never raises.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.config.topics import effective
from research_dispatch.core import interrupt
from research_dispatch.core.ghactions import run_url
from research_dispatch.core.interrupt import shielded
from research_dispatch.core.redact import redact
from research_dispatch.core.sanitize import one_line
from research_dispatch.core.workers import Workers
from research_dispatch.leg.events import LegProgress
from research_dispatch.leg.execute import run_leg
from research_dispatch.leg.resume import Decision, ResumeAction
from research_dispatch.leg.status import LegResult, LegState, timestamp, write_status
from research_dispatch.run.outcome import Activity, LegOutcome, RunOutcome
from research_dispatch.run.preload import import_worker_modules
from research_dispatch.run.progress import Board, Display, make_display

Echo = Callable[[str], None]

LEG_STOP_GRACE_S = 2.0
"""After Ctrl-C, how long running legs get to stop at their next step before the run records them as
interrupted and leaves their threads behind (a thread blocked in a socket read cannot be cancelled)."""

ACTIVITY = {ResumeAction.RUN: Activity.QUEUED, ResumeAction.KEEP: Activity.KEPT,
            ResumeAction.SKIP_EDITED: Activity.SKIPPED}


def run_legs(repo: Path, settings: Settings, decisions: list[Decision], outcome: RunOutcome, *, workers: int,
             env: Mapping[str, str], echo: Echo, live: bool | None) -> None:
    """Record every decided leg in `outcome.legs` (and on the progress board), then run those to run
    on `workers` threads, with the live display, the run budget and the Ctrl-C path."""
    board = Board()
    by_stem: dict[str, LegOutcome] = {}
    for decision in decisions:
        _, budget, _ = effective(decision.leg.topic, settings)
        activity = ACTIVITY[decision.action]
        board.add(decision.leg.stem, decision.leg.route.model, budget.max_steps, status=activity.value)
        by_stem[decision.leg.stem] = LegOutcome(leg=decision.leg, decision=decision, activity=activity,
                                                note="" if decision.run else decision.reason)
    outcome.legs = [by_stem[d.leg.stem] for d in decisions]
    to_run = [d for d in decisions if d.run]
    if not to_run:
        return

    display = make_display(board, echo, live=live)
    stop = threading.Event()
    url = run_url(env)
    cap = settings.run_budget_usd
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

    import_worker_modules()  # before the first worker thread: concurrent first imports lose legs (preload.py)
    threads: Workers[Decision, None] = Workers(to_run, work, workers=workers, name="leg_")
    display.start()
    try:
        threads.start()
        try:
            while not threads.wait(0.5):
                pass
        except KeyboardInterrupt:
            with shielded():
                _stop_legs(repo, settings, threads, by_stem, board, outcome, stop=stop, finishing=finishing,
                           abandoned=abandoned, display=display, echo=echo)
    finally:
        display.stop()
    outcome.legs_cost_usd = round(sum(o.result.cost_usd for o in outcome.legs if o.result), 6)


def _stop_legs(repo: Path, settings: Settings, threads: Workers[Decision, None], by_stem: dict[str, LegOutcome],
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
    """The status record of a leg abandoned while blocked in a call after Ctrl-C."""
    return LegResult(stem=leg.stem, topic=leg.topic.id, model=leg.route.model, family=leg.family,
                     status=LegState.FAILED, error=f"{interrupt.reason()} during a model or search call",
                     reasons=["interrupted"], calls=calls, cost_usd=round(cost_usd, 6), cycle=cycle,
                     finished_at=timestamp(), interrupted=True)


def _run_one(repo: Path, settings: Settings, record: LegOutcome, *, env: Mapping[str, str], cycle: str,
             run_url: str | None, progress: Callable[[LegProgress], None], interrupt: threading.Event,
             finishing: threading.Lock, abandoned: set[str]) -> None:
    """Run one leg; any exception becomes this leg's failure (with a status file), never the run's.

    A leg the interrupt path already recorded as abandoned keeps that record (`abandoned`)."""
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
