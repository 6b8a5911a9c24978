"""The synthesis stage end to end: extract → check citations → align → classify → key → ledger → diff →
render → write.

Order of work and why:

1. Inputs (`inputs`): the reports of planned legs (others are ignored and named), how each counts
   (strictest route, never a failed report, served families), and the planned legs' states; the
   previous ledger (for the diff, stable keys and replays). A report that does not parse is bad input
   (exit 2); a damaged previous ledger or cache entry is a warning, and the synthesis goes on without
   it.
2. Extraction: cached answers first (build cache, then the previous ledger); the rest in parallel,
   bounded by `synthesis.concurrency`. The gateway is created only when a call is actually needed, so a
   missing key is a `MissingKey` before any network call, and a fully cached run needs no key at all.
   A report whose extraction fails is listed under limitations; if every extraction fails, nothing is
   written and `SynthesisFailed` is raised (exit 1).
3. Citation check (`citations`): each anchored claim's cited sources against the report's stored
   evidence, by a judge of another family, decided by code; cached per citation (build cache, then
   the previous ledger), uncached ones in calls per report. A failed call leaves its citations
   `unsupported` with the reason.
4. Alignment: local candidates, batches of `batch_size` claims, one judge call per uncached batch.
   A failed batch leaves its claims unaligned and says so.
5. Code decides the rest: classes, divergences, stable keys, the ledger, the diff and the document.

**Time limit.** `synthesis.timeout_minutes` bounds the whole stage. Every call gets the deadline (the
gateway cuts a call there, and no call starts after it), and the stage stops waiting at it. What was not
done by then is not guessed at: the synthesis is written from what was done, and it says what was not
— the reports not extracted and the batches not judged — in a banner at the top of the document, in
its limitations, in `incomplete` in the ledger, and as warnings. Why a degraded synthesis rather than
exit 1: the answers that did complete are kept in the committed ledger, so the next run replays them
and goes further (a failure would write nothing, and a fresh CI runner would start from zero every
time), and a refresh's reports are still published with a synthesis that matches them. If no report
at all was extracted in time, nothing is written and the stage fails (exit 1).

**One unit.** The document, the claims ledger, the call log and the methodology table are written as one
unit through the journal the legs use (`leg/files.write_unit`): a kill or a full disk at any write leaves
all of them old or all of them new (the next command completes a committed unit), so a document beside
another render's ledger — which every later run would take for a hand edit — cannot happen. A full disk is
one line: nothing changed.

Every gateway call's `CallRecord` is kept: in the ledger next to the answer it produced, and flat in
`framework/synthesis.calls.jsonl` (one line per call the synthesis rests on, replays included, so that
an unchanged re-run writes identical files).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from research_dispatch.config.plan import Leg, companions
from research_dispatch.config.settings import Settings
from research_dispatch.core.fsio import confined
from research_dispatch.core.notice import repository_notice
from research_dispatch.core.redact import redact
from research_dispatch.core.sanitize import one_line
from research_dispatch.core.workers import Workers
from research_dispatch.gateway.client import Gateway
from research_dispatch.gateway.client import credentials as gateway_credentials
from research_dispatch.gateway.protocol import ModelGateway
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.files import FileWrite, write_unit
from research_dispatch.leg.status import LegState
from research_dispatch.synthesis.align import judge as align
from research_dispatch.synthesis.align import picks
from research_dispatch.synthesis.align.judge import Batch, Judgement
from research_dispatch.synthesis.cache import SynthesisCache
from research_dispatch.synthesis.check import citations
from research_dispatch.synthesis.common.checked import CitationCheck, Support
from research_dispatch.synthesis.common.errors import StructuredCallFailed, SynthesisFailed, TimeLimitReached
from research_dispatch.synthesis.count import asked, counting
from research_dispatch.synthesis.count.classify import STATUSES, Cluster, Divergence, classify
from research_dispatch.synthesis.count.keys import assign_cluster_keys, assign_divergence_keys
from research_dispatch.synthesis.extract import claims as extract
from research_dispatch.synthesis.extract.claims import Claim, ExtractionRequest, Malformed, NotAFinding
from research_dispatch.synthesis.read import evidence
from research_dispatch.synthesis.read.inputs import (
    LegCoverage,
    ReportInput,
    SkippedReport,
    default_legs,
    degraded_reasons,
    leg_coverage,
    load_inputs,
)
from research_dispatch.synthesis.write import methodology
from research_dispatch.synthesis.write.diff import LedgerDiff, diff_ledgers
from research_dispatch.synthesis.write.ledger import (
    UNIT_JOURNAL,
    Ledger,
    LedgerBatch,
    LedgerCheck,
    LedgerCheckItem,
    LedgerCitation,
    LedgerClaim,
    LedgerCluster,
    LedgerDivergence,
    LedgerExtraction,
    LedgerLeg,
    LedgerNotFinding,
    LedgerReport,
    LedgerSkipped,
    LedgerSource,
    read_previous,
)
from research_dispatch.synthesis.write.render import render_document

T = TypeVar("T")
R = TypeVar("R")
SYNTHESIS_WHAT = "the synthesis (document, claims ledger, call log, methodology table)"


@dataclass
class SynthesisResult:
    """What one synthesis produced, and what it cost."""

    document_path: Path
    ledger_path: Path
    calls_path: Path
    methodology_path: Path | None
    diff: LedgerDiff
    llm_calls: int
    extraction_calls: int
    cached_extractions: int
    judge_calls: int
    cached_judgements: int
    cost_usd: float
    counts: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)
    check_calls: int = 0
    cached_checks: int = 0


@dataclass
class _Extracted:
    request: ExtractionRequest
    claims: list[Claim] = field(default_factory=list)
    dropped: int = 0
    not_findings: list[NotAFinding] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)  # claims of the answer dropped alone
    calls: list[dict[str, Any]] = field(default_factory=list)
    fresh: list[CallRecord] = field(default_factory=list)
    cached: bool = False
    error: str | None = None
    timed_out: bool = False


@dataclass
class _Judged:
    batch: Batch
    judgement: Judgement | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    fresh: list[CallRecord] = field(default_factory=list)
    cached: bool = False
    error: str | None = None
    timed_out: bool = False


@dataclass
class _Checked:
    """One citation-check call: the answers it gave (by item key), or why it gave none."""

    batch: citations.CheckBatch
    answers: dict[str, citations.Verdicted] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    fresh: list[CallRecord] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False


@dataclass
class _ReportChecks:
    """One report's citation check: every decision, the calls they rest on, and what went wrong."""

    plan: citations.ReportPlan
    decisions: list[citations.Decision] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    fresh: list[CallRecord] = field(default_factory=list)
    cached: int = 0
    error: str | None = None
    timed_out: bool = False


@dataclass
class _Rechecked:
    """One call of second questions (`citations.run_recheck`): whether each verdict stood, or why no answer."""

    batch: citations.RecheckBatch
    stood: dict[str, bool] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    fresh: list[CallRecord] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False


class _LazyGateway:
    """The gateway, created on first need: no key is required when every answer is replayed. One passed in
    (any `ModelGateway`: the caller's, or a test's scripted model) is used as it is and never closed here.

    One we created is closed when the synthesis is done with it — at once, or, when the time limit left
    calls running (`_parallel`'s late workers, finishing their abandoned attempt's record), when the last
    of them ends: its connections are never left open behind the command (`run` synthesizes in a process
    that goes on; a test runs many commands in one)."""

    def __init__(self, gateway: ModelGateway | None, env: Mapping[str, str], settings: Settings) -> None:
        self._gateway = gateway
        self._own: Gateway | None = None
        self._env = env
        self._settings = settings
        self._lock = threading.Lock()
        self._users = 0  # work items running (`held`)
        self._closing = False

    def get(self) -> ModelGateway:
        if self._gateway is None:
            creds = gateway_credentials(self._env, self._settings.gateway)
            self._gateway = self._own = Gateway(api_key=creds.key, base_url=creds.base_url,
                                                settings=self._settings.gateway)
        return self._gateway

    def held(self, work: Callable[[T], R]) -> Callable[[T], R]:
        """`work` counted as a user of the gateway while it runs, so `close` waits for it."""

        def counted(item: T) -> R:
            with self._lock:
                self._users += 1
            try:
                return work(item)
            finally:
                with self._lock:
                    self._users -= 1
                    last = self._closing and self._users == 0
                if last:
                    self._close_own()

        return counted

    def close(self) -> None:
        """Close a gateway we created once no work uses it: now, or when the last late worker ends."""
        with self._lock:
            self._closing = True
            idle = self._users == 0
        if idle:
            self._close_own()

    def _close_own(self) -> None:
        with self._lock:
            own, self._own = self._own, None
        if own is not None:
            own.close()


class _TimedWork(Protocol):
    """An extraction or judgement outcome: what the time limit marks when it cuts the work short."""

    error: str | None
    timed_out: bool


W = TypeVar("W", bound=_TimedWork)


def _merge_finished(outcomes: list[W], pending: list[W], finished: list[W | None],
                    cut_short: Callable[[W], str]) -> list[W]:
    """`outcomes` with the pending ones replaced by their finished results (`_parallel`'s, in the order of
    `pending`); one the time limit cut short stays as it was, marked timed out with `cut_short`'s note."""
    done = {id(outcome): result for outcome, result in zip(pending, finished, strict=True)}
    merged = list(outcomes)
    for position, outcome in enumerate(outcomes):
        if id(outcome) not in done:
            continue
        result = done[id(outcome)]
        if result is None:
            outcome.error, outcome.timed_out = cut_short(outcome), True
        else:
            merged[position] = result
    return merged


@dataclass(frozen=True)
class SynthesisProgress:
    """How far the synthesis is (an extraction or a judge batch just finished): for the live line that
    `synthesize` and `run` print, so a stage that may take up to its cap is never silent."""

    stage: str  # "extraction" (one call per report) or "judge" (one call per batch of claims)
    done: int
    total: int
    cached: int  # answered from the cache or the previous ledger, before any call
    elapsed_s: float
    cap_s: float  # synthesis.timeout_minutes

    def line(self) -> str:
        replayed = f", {self.cached} replayed" if self.cached else ""
        return (f"synthesis: {self.stage} {self.done}/{self.total}{replayed} — {self.elapsed_s:.0f} s of its "
                f"{self.cap_s / 60:g}-minute cap")


Progress = Callable[[SynthesisProgress], None]
PROGRESS_LINES = 20
"""A stage prints at most about this many progress lines, however many calls it makes."""


def _reporter(progress: Progress | None, stage: str, total: int, cached: int, started: float,
              cap_s: float) -> Callable[[int], None]:
    """`done -> None`: says how far the stage is, on the first, the last and every n-th finished call."""
    every = max(1, total // PROGRESS_LINES)

    def report(done: int) -> None:
        if progress is not None and (done in (1, total) or done % every == 0):
            progress(SynthesisProgress(stage, done + cached, total + cached, cached,
                                       time.monotonic() - started, cap_s))

    return report


def _parallel(items: list[T], work: Callable[[T], R], workers: int, deadline: float,
              on_done: Callable[[int], None] | None = None) -> list[R | None]:
    """`work` over items on `workers` threads until `deadline`, results in input order (None: not finished
    in time); `on_done(n)` after the n-th finished; an exception in `work` re-raised (`core/workers.py`)."""
    return Workers(items, work, workers=workers, name="synthesis-", deadline=deadline).results(on_done)


def _dicts(records: list[CallRecord]) -> list[dict[str, Any]]:
    return [json.loads(record.to_json()) for record in records]


def _time_limit_note(minutes: float) -> str:
    return f"not done when the synthesis time limit ({minutes:g} min, synthesis.timeout_minutes) was reached"


# --------------------------------------------------------------------------------------------------
# Stages


def _extract_all(reports: list[ReportInput], settings: Settings, cache: SynthesisCache, lazy: _LazyGateway,
                 cycle: str, deadline: float, report: Callable[[int, int], Callable[[int], None]]) -> list[_Extracted]:
    syn = settings.synthesis
    outcomes = [_Extracted(extract.build_request(r, model=syn.extractor_model, layers=syn.layers)) for r in reports]
    pending: list[_Extracted] = []
    for outcome in outcomes:
        hit = cache.extraction(outcome.request.key, outcome.request.report.stem)
        if hit is None:
            pending.append(outcome)
            continue
        cleaned = extract.to_claims(hit.extraction, outcome.request.report)
        outcome.claims, outcome.dropped, outcome.malformed = cleaned.claims, hit.dropped_citations, hit.malformed
        outcome.not_findings = sorted({(n.statement, n.reason): n for n in [*hit.not_findings, *cleaned.not_findings]}
                                      .values(), key=lambda n: n.statement)
        outcome.calls, outcome.cached = hit.calls, True
    if not pending:
        return outcomes
    gateway = lazy.get()  # MissingKey here, before any network call

    def work(shared: _Extracted) -> _Extracted:
        outcome = replace(shared)  # a late worker must not change what the caller already wrote up
        try:
            cleaned, records = extract.extract_report(gateway, outcome.request, cycle=cycle, deadline=deadline)
        except TimeLimitReached as exc:
            outcome.error, outcome.timed_out = str(exc), True
            outcome.fresh, outcome.calls = exc.records, _dicts(exc.records)
            return outcome
        except StructuredCallFailed as exc:
            outcome.error, outcome.fresh = str(exc), exc.records
            outcome.calls = _dicts(exc.records)
            return outcome
        outcome.claims, outcome.dropped, outcome.not_findings = cleaned.claims, cleaned.dropped_citations, \
            cleaned.not_findings
        outcome.malformed = cleaned.malformed
        outcome.fresh, outcome.calls = records, _dicts(records)
        cache.store_extraction(outcome.request.key, [c.extracted() for c in outcome.claims], outcome.dropped,
                               outcome.not_findings, outcome.calls, outcome.malformed)
        return outcome

    done = report(len(pending), len(outcomes) - len(pending))
    return _merge_finished(outcomes, pending, _parallel(pending, lazy.held(work), syn.concurrency, deadline, done),
                           lambda o: f"{o.request.report.relpath}: {_time_limit_note(syn.timeout_minutes)}")


def _judge_all(batches: list[Batch], settings: Settings, cache: SynthesisCache, lazy: _LazyGateway,
               cycle: str, deadline: float, report: Callable[[int, int], Callable[[int], None]]) -> list[_Judged]:
    outcomes = [_Judged(batch) for batch in batches]
    pending: list[_Judged] = []
    for outcome in outcomes:
        hit = cache.judgement(outcome.batch.key, set(outcome.batch.ids))
        if hit is None:
            pending.append(outcome)
        else:
            outcome.judgement, outcome.calls = hit
            outcome.cached = True
    if not pending:
        return outcomes
    gateway = lazy.get()

    def work(shared: _Judged) -> _Judged:
        outcome = replace(shared)
        try:
            judgement, records = align.run_judge(gateway, outcome.batch, cycle=cycle, deadline=deadline)
        except TimeLimitReached as exc:
            outcome.error, outcome.timed_out = str(exc), True
            outcome.fresh, outcome.calls = exc.records, _dicts(exc.records)
            return outcome
        except StructuredCallFailed as exc:
            outcome.error, outcome.fresh, outcome.calls = str(exc), exc.records, _dicts(exc.records)
            return outcome
        outcome.judgement, outcome.fresh, outcome.calls = judgement, records, _dicts(records)
        cache.store_judgement(outcome.batch.key, judgement, outcome.calls)
        return outcome

    minutes = settings.synthesis.timeout_minutes
    done = report(len(pending), len(outcomes) - len(pending))
    return _merge_finished(outcomes, pending,
                           _parallel(pending, lazy.held(work), settings.synthesis.concurrency, deadline, done),
                           lambda o: f"judge batch {o.batch.id}: {_time_limit_note(minutes)}")


_Answered = tuple[citations.Verdicted, list[dict[str, Any]]]
"""A citation judge's answer and the calls it rests on; held by (report, key): two reports may ask one
question, and each decision rests on its own report's calls (issue 30.5)."""


def _check_all(repo: Path, reports: list[ReportInput], extracted: list[_Extracted], settings: Settings,
               cache: SynthesisCache, lazy: _LazyGateway, cycle: str, deadline: float) -> list[_ReportChecks]:
    """Check every citation of every extracted claim (`citations`); cached answers first."""
    by_stem = {r.stem: r for r in reports}
    checks: list[_ReportChecks] = []
    pending: list[_Checked] = []
    # by (report, key): two reports may ask one question, and each decision rests on its own report's calls
    answered: dict[tuple[str, str], _Answered] = {}
    for outcome in extracted:
        if outcome.error:
            continue
        report = by_stem[outcome.request.report.stem]
        relpath = companions(report.relpath).evidence
        stored = evidence.load_for_report(repo, relpath, report.meta.evidence_sha256)
        report_checks = _ReportChecks(citations.plan_report(report, outcome.claims, stored, settings))
        checks.append(report_checks)
        uncached = []
        for item in report_checks.plan.items:
            hit = cache.citation(item.key, report.stem)
            if hit is None:
                uncached.append(item)
            else:
                answered[(report.stem, item.key)] = hit
                report_checks.cached += 1
        pending += [_Checked(b) for b in citations.build_batches(report.stem, uncached)]
    minutes = settings.synthesis.timeout_minutes
    finished: list[_Checked] = []
    if pending:
        gateway = lazy.get()

        def work(shared: _Checked) -> _Checked:
            outcome = replace(shared)

            def ask() -> list[CallRecord]:
                outcome.answers, records = citations.run_check(gateway, outcome.batch, cycle=cycle, deadline=deadline)
                return records

            _attempt(outcome, ask)
            return outcome

        finished = _merge_finished(pending, pending,
                                   _parallel(pending, lazy.held(work), settings.synthesis.concurrency, deadline),
                                   lambda o: f"citation check {o.batch.index} of {o.batch.report}: "
                                             f"{_time_limit_note(minutes)}")
    failed: dict[tuple[str, str], _Checked] = {}
    by_report: dict[str, list[_Checked]] = {}
    fresh: set[tuple[str, str]] = set()
    for checked in finished:
        by_report.setdefault(checked.batch.report, []).append(checked)
        for item in checked.batch.items.values():
            if item.key in checked.answers:
                answered[(checked.batch.report, item.key)] = (checked.answers[item.key], checked.calls)
                fresh.add((checked.batch.report, item.key))
            else:
                failed[(checked.batch.report, item.key)] = checked
    rechecked: dict[str, list[_Rechecked]] = {}
    for second in _recheck_all(checks, answered, settings, lazy, cycle, deadline):
        rechecked.setdefault(second.batch.report, []).append(second)
        fresh |= {(second.batch.report, q.key) for q in second.batch.items.values()}
    # each answer is kept once complete (with its second question's answer)
    cache.store_citations([(key, *answered[(stem, key)]) for stem, key in sorted(fresh)])
    for report_checks in checks:
        stem = report_checks.plan.report
        _decide_report(report_checks, answered, failed, by_report.get(stem, []), rechecked.get(stem, []))
    return checks


class _Attempted(Protocol):
    """A call's outcome as `_attempt` fills it in."""

    fresh: list[CallRecord]
    calls: list[dict[str, Any]]
    error: str | None
    timed_out: bool


def _attempt(outcome: _Attempted, ask: Callable[[], list[CallRecord]]) -> None:
    """Make one structured call (`ask` keeps its answer and returns the calls it made) and record on `outcome`
    the calls, or why there is no answer: the time limit, or a failed call."""
    try:
        outcome.fresh = ask()
    except TimeLimitReached as exc:
        outcome.error, outcome.timed_out, outcome.fresh = str(exc), True, exc.records
    except StructuredCallFailed as exc:
        outcome.error, outcome.fresh = str(exc), exc.records
    outcome.calls = _dicts(outcome.fresh)


def _recheck_all(checks: list[_ReportChecks], answered: dict[tuple[str, str], _Answered],
                 settings: Settings, lazy: _LazyGateway, cycle: str, deadline: float) -> list[_Rechecked]:
    """Ask the second, opposite-direction question about every answer whose pointed sentence is in doubt
    (`citations.recheck_of`): one call per report (at most `MAX_ITEMS_PER_CALL` each); each answer in
    `answered` gets the reply (and the calls it rests on). A failed call leaves its answers unasked: the
    citation is then unsupported, with the reason."""
    pending: list[_Rechecked] = []
    for report_checks in checks:
        plan = report_checks.plan
        questions = [question for item in plan.items if (plan.report, item.key) in answered
                     for question in [citations.recheck_of(item, answered[(plan.report, item.key)][0])]
                     if question is not None]
        if questions and plan.judge_model is not None:
            pending += [_Rechecked(b) for b in citations.build_rechecks(plan.report, plan.judge_model, questions)]
    if not pending:
        return []
    gateway = lazy.get()

    def work(shared: _Rechecked) -> _Rechecked:
        outcome = replace(shared)

        def ask() -> list[CallRecord]:
            outcome.stood, records = citations.run_recheck(gateway, outcome.batch, cycle=cycle, deadline=deadline)
            return records

        _attempt(outcome, ask)
        return outcome

    minutes = settings.synthesis.timeout_minutes
    done = _merge_finished(pending, pending, _parallel(pending, work, settings.synthesis.concurrency, deadline),
                           lambda o: f"second questions {o.batch.index} of {o.batch.report}: "
                                     f"{_time_limit_note(minutes)}")
    for outcome in done:
        for question in outcome.batch.items.values():
            answer, calls = answered[(outcome.batch.report, question.key)]
            stood = outcome.stood.get(question.key)
            answered[(outcome.batch.report, question.key)] = (
                replace(answer, recheck=stood) if stood is not None else answer, calls + outcome.calls)
    return done


def _decide_report(checks: _ReportChecks, answered: dict[tuple[str, str], _Answered],
                   failed: dict[tuple[str, str], _Checked], outcomes: list[_Checked],
                   rechecks: list[_Rechecked]) -> None:
    """Every decision of one report, in claim order, with the calls each rests on (deduplicated)."""
    calls: list[dict[str, Any]] = []
    index: dict[str, int] = {}

    def refer(records: list[dict[str, Any]]) -> tuple[int, ...]:
        out = []
        for call in records:
            ident = json.dumps(call, sort_keys=True)
            if ident not in index:
                index[ident] = len(calls)
                calls.append(call)
            out.append(index[ident])
        return tuple(out)

    decisions = list(checks.plan.decided)
    for item in checks.plan.items:
        hit = answered.get((checks.plan.report, item.key))
        if hit is not None:
            answer, records = hit
            check, reason = citations.decide(item, answer)
            decisions.append(citations.Decision(item.claim, item.number, check, reason, item, answer, refer(records)))
            continue
        outcome = failed.get((checks.plan.report, item.key))
        why = outcome.error if outcome is not None and outcome.error else "the check call gave no answer"
        decisions.append(citations.Decision(
            item.claim, item.number, CitationCheck(item.url, Support.UNSUPPORTED),
            f"not checked: {why}", item, None, refer(outcome.calls) if outcome is not None else ()))
    checks.decisions = sorted(decisions, key=lambda d: (d.claim, d.number))
    checks.calls = calls
    checks.fresh = [r for o in outcomes for r in o.fresh] + [r for o in rechecks for r in o.fresh]
    errors = [(o.error, o.timed_out) for o in outcomes if o.error] + \
        [(o.error, o.timed_out) for o in rechecks if o.error]
    checks.timed_out = any(timed_out for _, timed_out in errors)
    checks.error = errors[0][0] if errors else None


def _with_citations(extracted: list[_Extracted], checks: list[_ReportChecks]) -> None:
    """Each claim carries its citations as decided (in the order of its citation numbers)."""
    by_claim: dict[str, list[citations.Decision]] = {}
    for report_checks in checks:
        for decision in report_checks.decisions:
            by_claim.setdefault(decision.claim, []).append(decision)
    for outcome in extracted:
        outcome.claims = [replace(c, citations=tuple(d.check for d in by_claim.get(c.key, ()))) for c in outcome.claims]


# --------------------------------------------------------------------------------------------------
# The ledger


def _incomplete(extracted: list[_Extracted], judged: list[_Judged], minutes: float,
                checks: list[_ReportChecks]) -> list[str]:
    """What this synthesis did not process because its time limit was reached (empty when complete)."""
    reports = [o.request.report.stem for o in extracted if o.timed_out]
    batches = [o.batch.id for o in judged if o.timed_out]
    unchecked = [c.plan.report for c in checks if c.timed_out]
    items = []
    if unchecked:
        items.append(f"The synthesis time limit ({minutes:g} min) was reached before the citations of these reports "
                     f"were all checked; those not checked are unsupported: {', '.join(unchecked)}.")
    if reports:
        items.append(f"The synthesis time limit ({minutes:g} min) was reached before these reports were extracted; "
                     f"their claims are missing: {', '.join(reports)}.")
    if batches:
        items.append(f"The synthesis time limit ({minutes:g} min) was reached before judge batch(es) "
                     f"{', '.join(batches)} were judged; their claims were not aligned, so agreement among them "
                     "may show as single-source.")
    return items


def _limitations(cycle: str, reports: list[ReportInput], skipped: list[SkippedReport], legs: list[LegCoverage],
                 extracted: list[_Extracted], judged: list[_Judged], incomplete: list[str],
                 checks: list[_ReportChecks]) -> list[str]:
    items: list[str] = list(incomplete)
    by_stem = {r.stem: r for r in reports}
    for leg in legs:
        report = by_stem.get(leg.stem)
        if leg.state is LegState.MISSING:
            items.append(f"Leg {leg.stem} ({leg.model}) has no report; its topic is not covered by that model.")
        elif leg.attempt_failed or leg.state is LegState.INVALID or (leg.state is LegState.STALE and report is None):
            items.append(f"Leg {leg.stem} ({leg.model}): {leg.detail}.")
        if leg.state is LegState.DEGRADED and report is not None:
            items.append(f"Report {leg.stem} is degraded: {degraded_reasons(report.meta)}.")
        elif leg.state is LegState.EDITED and report is not None and report.report.edited:
            items.append(f"Report {leg.stem} was edited by hand after it was generated (its body no longer matches "
                         "its body_sha256): its claims are the edited text's, not only the model's.")
    planned = {leg.stem for leg in legs}
    for item in skipped:
        if item.kind == "ignored":
            items.append(f"Report {item.stem} was ignored: {item.reason}; it is not counted or shown.")
        elif item.stem not in planned:
            items.append(f"Report {item.stem} is not counted: {item.reason}.")
    for report in reports:
        if report.meta.status == "degraded" and report.stem not in planned:
            items.append(f"Report {report.stem} is degraded: {degraded_reasons(report.meta)}.")
        if report.meta.cycle and report.meta.cycle != cycle:
            items.append(f"Report {report.stem} is from cycle {report.meta.cycle}, not {cycle}.")
        if not report.route_verified:
            if report.counted:
                families = ", ".join(sorted(report.families)) or "none: it has no call log"
                served = ", ".join(report.served_models) or "nothing recorded"
                items.append(f"Report {report.stem} has route {report.route}, which is not verified; it is counted "
                             f"because synthesis.count_unverified is on, under the families its call log says "
                             f"served it ({families}; served by {served}).")
            else:
                items.append(f"Report {report.stem} is excluded from support counts: route {report.route} is not "
                             "verified.")
    for outcome in extracted:
        stem = outcome.request.report.stem
        if outcome.error and not outcome.timed_out:
            items.append(f"Report {stem} could not be extracted ({outcome.error}); its claims are missing from "
                         "this synthesis.")
        elif outcome.request.truncated and not outcome.error:
            items.append(f"Report {stem} is longer than {extract.MAX_REPORT_CHARS} characters; only its first part "
                         "was extracted.")
    for judged_batch in judged:
        batch = judged_batch.batch
        if judged_batch.error and not judged_batch.timed_out:
            items.append(f"Judge batch {batch.id} failed ({judged_batch.error}); its {len(batch.ids)} claims were "
                         "not aligned, so agreement among them may show as single-source.")
        if batch.judge_is_author:
            items.append(f"Judge batch {batch.id} was judged by {batch.judge_model}, whose family also wrote "
                         "reports in that batch (no judge of another family is configured).")
    items += _check_limitations(checks)
    return [one_line(item, 900) for item in items]


def _check_limitations(checks: list[_ReportChecks]) -> list[str]:
    """What the citation check could not do, per report (each citation's own reason is in the ledger)."""
    items = []
    for report_checks in checks:
        plan = report_checks.plan
        cited = len(report_checks.decisions)
        if plan.evidence.refused and cited:
            items.append(f"Report {plan.report}: its evidence file {plan.evidence.relpath} {plan.evidence.refused}; "
                         f"it is not used, so its {cited} citation(s) are no_evidence.")
        elif not plan.evidence.present and cited:
            items.append(f"Report {plan.report} has no usable evidence file ({plan.evidence.relpath}); its {cited} "
                         "citation(s) are no_evidence.")
        if plan.judge_model is None and any(d.reason.startswith(citations.NO_JUDGE) for d in report_checks.decisions):
            items.append(f"Report {plan.report}'s citations were not checked: no citation judge of another family "
                         "is configured (synthesis.citation_models); they are unsupported.")
        if report_checks.error and not report_checks.timed_out:
            items.append(f"Citation check of report {plan.report} failed ({report_checks.error}); the citations it "
                         "covered are unsupported.")
        if plan.skipped:
            items.append(f"Report {plan.report} has more than {citations.MAX_ITEMS_PER_REPORT} citations to check; "
                         f"{plan.skipped} were not checked and are unsupported.")
    return items


def _claim_limitations(extracted: list[_Extracted], checks: list[_ReportChecks], report_counting: Mapping[str, Any],
                       count_unsupported: bool) -> list[str]:
    """One line per claim of a counted report that the synthesis extracted but could not locate, check or count,
    with its specific reason (docs/ARCHITECTURE.md, "Evidence and checked claims — FIXED": `limitations`): a
    malformed claim of the answer, a statement that is
    not a finding, a claim its pointer does not locate, a position its own sentence contradicts, a claim no
    citation of which stands (each citation's reason: no passage, phantom, the judge found nothing, pointed at
    a sentence that does not address it, or failed). A located claim is shown by its report sentence; the
    extractor's words are shown only where there is no report sentence, and are marked as such."""
    reasons: dict[str, list[str]] = {}
    for report_checks in checks:
        for decision in report_checks.decisions:
            reasons.setdefault(decision.claim, []).append(
                f"[{decision.number}] {decision.check.support.value}: {decision.reason}")
    lines: list[str] = []
    for outcome in sorted(extracted, key=lambda o: o.request.report.stem):
        stem = outcome.request.report.stem
        if outcome.error or not report_counting[stem].counted:
            continue  # said once for the whole report
        for bad in outcome.malformed:
            lines.append(f"Report {stem}: a claim of the extractor's answer was dropped: {bad.reason}; the "
                         f"extractor's words, not the report's: “{one_line(bad.statement, 200)}”.")
        for note in outcome.not_findings:
            lines.append(f"Report {stem}: the extracted statement “{one_line(note.statement, 200)}” was dropped: it "
                         f"{note.reason} (the extractor's words, not the report's).")
        for claim in outcome.claims:
            standing = counting.standing(claim, report_counting[stem], count_unsupported=count_unsupported)
            said = f"Report {stem}, “{one_line(claim.quote, 300)}”: not counted"
            if standing is counting.Standing.NOT_ANCHORED:
                lines.append(f"Report {stem}: a claim could not be located in the report: {claim.unlocated}; the "
                             f"extractor's statement, not the report's words: “{one_line(claim.statement, 200)}”.")
            elif standing is counting.Standing.POSITION_CONTRADICTED:
                dispute = claim.dispute
                why = dispute.reason if dispute is not None else "its sentence contradicts its position"
                lines.append(f"{said}: {why}; asked again, the extractor still said “for” ({claim.pick}).")
            elif standing in (counting.Standing.UNSUPPORTED, counting.Standing.CONTRADICTED):
                cited = "; ".join(reasons.get(claim.key, [])) or "it cites no source"
                lines.append(f"{said}: no citation of it stands ({cited}).")
    return [one_line(line, 900) for line in lines]


def _ledger_report(outcome: _Extracted, settings: Settings) -> LedgerReport:
    report = outcome.request.report
    meta = report.meta
    status: Literal["ok", "failed", "timed_out"] = "timed_out" if outcome.timed_out else \
        "failed" if outcome.error else "ok"
    return LedgerReport(
        stem=report.stem, path=report.relpath, topic=meta.topic, title=one_line(meta.title, 200),
        requested_model=meta.requested_model, family=report.family, families=sorted(report.families),
        served_models=list(report.served_models), served_providers=list(meta.served_providers), route=report.route,
        route_verified=report.route_verified, route_problems=[one_line(p, 300) for p in report.route_problems],
        counted=report.counted, exclusion=report.exclusion, status=meta.status,
        status_reasons=[one_line(str(r), 300) for r in meta.status_reasons], cycle=meta.cycle, sha256=report.sha256,
        words=meta.words,
        sources=[LedgerSource(id=s.id, url=s.url, title=one_line(s.title, 300)) for s in meta.sources],
        cost_usd=meta.usage.cost_usd,
        extraction=LedgerExtraction(
            status=status, key=outcome.request.key, model=settings.synthesis.extractor_model,
            prompt_version=extract.PROMPT_VERSION, error=one_line(outcome.error, 500) if outcome.error else None,
            truncated=outcome.request.truncated, dropped_citations=outcome.dropped,
            not_findings=[LedgerNotFinding(statement=n.statement, reason=n.reason) for n in outcome.not_findings],
            malformed=[LedgerNotFinding(statement=m.statement, reason=m.reason) for m in outcome.malformed],
            calls=outcome.calls),
        claims=[c.key for c in outcome.claims])


def _ledger_checks(checks: list[_ReportChecks]) -> list[LedgerCheck]:
    out = []
    for report_checks in sorted(checks, key=lambda c: c.plan.report):
        plan = report_checks.plan
        status: Literal["ok", "failed", "timed_out"] = "timed_out" if report_checks.timed_out else \
            "failed" if report_checks.error else "ok"
        items = [LedgerCheckItem(
            claim=d.claim, number=d.number, url=d.check.url, support=d.check.support, reason=one_line(d.reason, 500),
            key=d.item.key if d.item is not None else None,
            judge_model=d.item.judge_model if d.item is not None else None,
            passages=[s.passage.sha256 for s in d.item.shown] if d.item is not None else [],
            answer=d.answer.to_dict() if d.answer is not None else None, calls=list(d.calls))
            for d in report_checks.decisions]
        out.append(LedgerCheck(report=plan.report, judge_model=plan.judge_model, evidence=plan.evidence.relpath,
                               evidence_present=plan.evidence.present, status=status,
                               error=one_line(report_checks.error, 500) if report_checks.error else None,
                               items=items, calls=report_checks.calls))
    return out


@dataclass
class _Work:
    """Everything one synthesis did and found: what the ledger records."""

    cycle: str
    settings: Settings
    reports: list[ReportInput]
    skipped: list[SkippedReport]
    legs: list[LegCoverage]
    extracted: list[_Extracted]
    judged: list[_Judged]
    checks: list[_ReportChecks]
    clusters: list[Cluster]
    divergences: list[Divergence]
    limitations: list[str]
    incomplete: list[str]

    @property
    def claims(self) -> list[Claim]:
        return [claim for outcome in self.extracted for claim in outcome.claims]


def _build_ledger(work: _Work) -> Ledger:
    """The ledger of one synthesis, section by section (each step below builds one)."""
    claims = _ledger_claims(work)
    return Ledger(
        cycle=work.cycle, framework=work.settings.framework_name, settings=_ledger_settings(work.settings),
        counts=_ledger_counts(work, claims),
        reports=sorted((_ledger_report(o, work.settings) for o in work.extracted), key=lambda r: r.stem),
        skipped=[LedgerSkipped(stem=s.stem, path=s.relpath, kind=s.kind, reason=one_line(s.reason, 500))
                 for s in sorted(work.skipped, key=lambda s: s.stem)],
        claims=sorted(claims, key=lambda c: c.key),
        clusters=sorted(_ledger_clusters(work.clusters), key=lambda c: c.key),
        divergences=sorted(_ledger_divergences(work.divergences, work.clusters), key=lambda d: d.key),
        batches=sorted(_ledger_batches(work.judged), key=lambda b: b.id),
        citation_checks=_ledger_checks(work.checks),
        legs=[LedgerLeg(stem=leg.stem, topic=leg.topic, model=leg.model, state=leg.state.value,
                        detail=one_line(leg.detail, 500), report=leg.report_relpath) for leg in work.legs],
        limitations=work.limitations, incomplete=work.incomplete)


def _ledger_settings(settings: Settings) -> dict[str, Any]:
    """The settings a synthesis' answers depend on (the diff compares them to say what was re-run)."""
    syn = settings.synthesis
    return {"extractor_model": syn.extractor_model, "extraction_prompt": extract.PROMPT_VERSION,
            "judge_models": list(syn.judge_models), "judge_prompt": align.PROMPT_VERSION,
            "citation_models": list(syn.citation_models), "citation_prompt": citations.PROMPT_VERSION,
            "count_unverified": syn.count_unverified, "count_unsupported": syn.count_unsupported,
            "batch_size": syn.batch_size, "similarity_threshold": syn.similarity_threshold,
            "layers": list(syn.layers), "timeout_minutes": syn.timeout_minutes}


def _ledger_claims(work: _Work) -> list[LedgerClaim]:
    """Every claim with its cluster's key and where it stands with the counting rules."""
    cluster_of = {key: c.key for c in work.clusters for key in c.members}
    report_counting = {r.stem: r.counting for r in work.reports}
    unsupported = work.settings.synthesis.count_unsupported
    return [LedgerClaim(cluster=cluster_of[claim.key], key=claim.key, report=claim.report, layer_key=claim.layer_key,
                        standing=counting.standing(claim, report_counting[claim.report], count_unsupported=unsupported),
                        decision_key=claim.decision_key, pick_key=claim.pick_key, anchored=claim.anchored,
                        citations=[LedgerCitation.of(c) for c in claim.citations], **claim.extracted())
            for claim in work.claims]


def _ledger_clusters(clusters: list[Cluster]) -> list[LedgerCluster]:
    key_of = {c.index: c.key for c in clusters}
    return [LedgerCluster.of(cluster, key_of) for cluster in clusters]


def _ledger_divergences(divergences: list[Divergence], clusters: list[Cluster]) -> list[LedgerDivergence]:
    key_of = {c.index: c.key for c in clusters}
    return [LedgerDivergence.of(divergence, key_of) for divergence in divergences]


def _ledger_batches(judged: list[_Judged]) -> list[LedgerBatch]:
    """Each judge call: its anonymisation, its judge and its validated answer (or why it has none)."""
    return [LedgerBatch(
        id=o.batch.id, key=o.batch.key,
        status="ok" if o.judgement is not None else "timed_out" if o.timed_out else "failed",
        judge_model=o.batch.judge_model, judge_is_author=o.batch.judge_is_author, labels=o.batch.labels,
        ids=o.batch.ids, anchors=o.batch.anchors, error=one_line(o.error, 500) if o.error else None,
        judgement=o.judgement.model_dump(mode="json") if o.judgement is not None else None, calls=o.calls)
        for o in judged]


def _ledger_counts(work: _Work, claims: list[LedgerClaim]) -> dict[str, Any]:
    """The numbers the document's header and the PR read: reports, claims, findings by class, citations."""
    reports, skipped, extracted, clusters = work.reports, work.skipped, work.extracted, work.clusters
    every_claim = work.claims
    counted = frozenset(c.key for c in claims if c.standing is counting.Standing.COUNTED)
    return {"reports": len(reports), "counted": sum(1 for r in reports if r.counted),
            "excluded": sum(1 for r in reports if not r.counted),
            "ignored": sum(1 for s in skipped if s.kind == "ignored"),
            "failed": sum(1 for s in skipped if s.kind == "failed"),
            "extracted": sum(1 for o in extracted if not o.error), "claims": len(claims),
            "not_findings": sum(len(o.not_findings) for o in extracted),
            "clusters": {status: sum(1 for c in clusters if c.status == status) for status in STATUSES},
            "flagged": sum(1 for c in clusters if c.flagged and c.status == "single_source"),
            "flagged_only_one_asked": sum(1 for c in clusters if c.flagged and c.status == "single_source"
                                          and asked.single_source_label(c.families, asked.recorded(c.topics, c.asked))
                                          == asked.ONLY_ONE_ASKED),
            "flagged_sides": sum(1 for c in clusters if c.flagged and c.status == "divergent"),
            "checked": counting.Tally.of(every_claim, counted).as_dict(),
            "divergences": len(work.divergences), "ties": sum(1 for d in work.divergences if d.tie),
            "batches": len(work.judged), "anchored": sum(1 for c in every_claim if c.anchored),
            "citations": {support.value: sum(1 for c in every_claim for x in c.citations if x.support is support)
                          for support in Support}}


def _calls_log(extracted: list[_Extracted], judged: list[_Judged], checks: list[_ReportChecks]) -> str:
    lines = []
    for outcome in sorted(extracted, key=lambda o: o.request.report.stem):
        lines += [json.dumps({**call, "subject": outcome.request.report.relpath}, sort_keys=True,
                             separators=(",", ":")) for call in outcome.calls]
    for report_checks in sorted(checks, key=lambda c: c.plan.report):
        lines += [json.dumps({**call, "subject": f"citations of {report_checks.plan.report}"}, sort_keys=True,
                             separators=(",", ":")) for call in report_checks.calls]
    for judged_batch in judged:
        lines += [json.dumps({**call, "subject": f"judge batch {judged_batch.batch.id}"}, sort_keys=True,
                             separators=(",", ":")) for call in judged_batch.calls]
    return redact("".join(line + "\n" for line in lines))


# --------------------------------------------------------------------------------------------------
# Entry point


def synthesize(repo: Path, settings: Settings, *, env: Mapping[str, str], cycle: str, legs: list[Leg] | None = None,
               gateway: ModelGateway | None = None, progress: Progress | None = None) -> SynthesisResult:
    """Write framework/<name>.md, framework/claims.json, the call log and the methodology table.

    `legs` is the plan (every leg of the current topics); by default it is computed from the topics.
    `progress` hears how far the extraction and the judging are (`SynthesisProgress`).
    """
    syn = settings.synthesis
    started = time.monotonic()
    deadline = started + syn.timeout_minutes * 60

    def reporter(stage: str) -> Callable[[int, int], Callable[[int], None]]:
        return lambda total, cached: _reporter(progress, stage, total, cached, started, syn.timeout_minutes * 60)

    warnings: list[str] = []
    planned = default_legs(repo, settings) if legs is None else list(legs)
    inputs = load_inputs(repo, settings, planned)
    reports = inputs.reports
    warnings += inputs.warnings
    states = leg_coverage(repo, settings, planned, reports, inputs.skipped, cycle=cycle)
    ledger_path = confined(repo, settings.ledger_relpath)
    document_path = confined(repo, settings.document_relpath)
    calls_path = confined(repo, settings.synthesis_calls_relpath)
    old, problem = read_previous(ledger_path)
    if problem:
        warnings.append(problem)
    if not reports:
        raise SynthesisFailed("no report can be synthesized: every report file is outside the plan or failed "
                              f"({'; '.join(inputs.warnings[:3])}); nothing was written")
    cache = SynthesisCache(repo, settings, old)
    lazy = _LazyGateway(gateway, env, settings)
    try:
        extracted = _extract_all(reports, settings, cache, lazy, cycle, deadline, reporter("extraction"))
        failures = [o for o in extracted if o.error]
        if len(failures) == len(extracted):
            raise SynthesisFailed(f"every extraction failed; nothing was written (first: {failures[0].error})")
        checks = _check_all(repo, reports, extracted, settings, cache, lazy, cycle, deadline)
        _with_citations(extracted, checks)
        claims = picks.with_aliases([claim for outcome in extracted for claim in outcome.claims])
        by_key = {c.key: c for c in claims}
        for outcome in extracted:
            outcome.claims = [by_key[c.key] for c in outcome.claims]
        report_counting = {r.stem: r.counting for r in reports}
        edges = align.candidate_edges(claims, syn.similarity_threshold)
        plans = align.plan_batches(align.candidate_components(claims, edges), edges, syn.batch_size)
        batches = [align.build_batch(i + 1, plan, by_key, report_counting, settings) for i, plan in enumerate(plans)]
        judged = _judge_all(batches, settings, cache, lazy, cycle, deadline, reporter("judge"))
    finally:
        lazy.close()
    warnings += cache.warnings

    counted = counting.counted_claims(claims, report_counting, count_unsupported=syn.count_unsupported)
    alignment = align.assemble(claims, batches, {o.batch.index: o.judgement for o in judged}, counted)
    clusters, divergences = classify(alignment, by_key, report_counting, counted)
    asked.mark(clusters, divergences, asked.Asked.of((r.meta.topic, r.counting) for r in reports),
               {c.key: c.report for c in claims})
    assign_cluster_keys(clusters, old, set(counted))
    assign_divergence_keys(divergences, clusters)
    incomplete = _incomplete(extracted, judged, syn.timeout_minutes, checks)
    dropped_claims = _claim_limitations(extracted, checks, report_counting, syn.count_unsupported)
    limitations = _limitations(cycle, reports, inputs.skipped, states, extracted, judged, incomplete, checks) + \
        dropped_claims
    ledger = _build_ledger(_Work(cycle, settings, reports, inputs.skipped, states, extracted, judged, checks, clusters,
                                 divergences, limitations, incomplete))
    ledger.counts["dropped_claims"] = len(dropped_claims)  # each listed in `limitations` with its reason
    ledger_dict = ledger.to_dict()
    diff = diff_ledgers(old, ledger_dict)

    for outcome in extracted:
        if outcome.error:
            warnings.append(outcome.error)
        if outcome.dropped:
            warnings.append(f"{outcome.request.report.relpath}: the extractor cited {outcome.dropped} source "
                            "number(s) the report does not have; they were dropped")
    for report_checks in checks:
        warnings += report_checks.plan.evidence.warnings
        if report_checks.error:
            warnings.append(report_checks.error)
    for judged_batch in judged:
        if judged_batch.error:
            warnings.append(judged_batch.error)
        if judged_batch.batch.judge_is_author:
            warnings.append(f"judge batch {judged_batch.batch.id}: {judged_batch.batch.judge_model} is of the "
                            "family of a report it judges (configure a judge of another family)")

    methodology_path, methodology_text = _updated_methodology(repo, settings, states, reports, warnings)
    notice = repository_notice(repo, settings.research_dir)  # the demo's, or canned reports' (a run on the fakes)
    write_unit(repo, settings.build_dir, UNIT_JOURNAL, [
        FileWrite(settings.synthesis_calls_relpath, _calls_log(extracted, judged, checks)),
        FileWrite(settings.ledger_relpath, redact(ledger.to_json())),
        *([FileWrite(settings.methodology_path, methodology_text)] if methodology_text is not None else []),
        FileWrite(settings.document_relpath, redact(render_document(ledger, settings, notice)))],
        what=SYNTHESIS_WHAT)

    fresh = [r for o in extracted for r in o.fresh] + [r for o in judged for r in o.fresh] + \
        [r for c in checks for r in c.fresh]
    extraction_calls = sum(len(o.fresh) for o in extracted)
    judge_calls = sum(len(o.fresh) for o in judged)
    check_calls = sum(len(c.fresh) for c in checks)
    return SynthesisResult(
        document_path=document_path, ledger_path=ledger_path, calls_path=calls_path,
        methodology_path=methodology_path, diff=diff, llm_calls=extraction_calls + judge_calls + check_calls,
        extraction_calls=extraction_calls, cached_extractions=sum(1 for o in extracted if o.cached),
        judge_calls=judge_calls, cached_judgements=sum(1 for o in judged if o.cached),
        cost_usd=round(sum(r.cost_usd for r in fresh), 6), counts=ledger_dict["counts"],
        check_calls=check_calls, cached_checks=sum(c.cached for c in checks),
        warnings=[one_line(w, 500) for w in warnings], ledger=ledger_dict, incomplete=incomplete)


def _updated_methodology(repo: Path, settings: Settings, legs: list[LegCoverage], reports: list[ReportInput],
                         warnings: list[str]) -> tuple[Path | None, str | None]:
    """(the methodology page, its new text when the dispatch table changes it); (None, None) without one."""
    path = confined(repo, settings.methodology_path)
    if not path.is_file():
        return None, None
    text = path.read_bytes().decode("utf-8")  # bytes, so line endings outside the markers are kept
    table = methodology.render_table(methodology.dispatch_rows(legs, reports))
    try:
        updated = methodology.replace_table(text, table)
    except methodology.MarkersMissing as exc:
        warnings.append(f"{settings.methodology_path}: dispatch table not updated: {exc} "
                        f"(add {methodology.START} and {methodology.END} around it)")
        return None, None
    return path, updated if updated != text else None
