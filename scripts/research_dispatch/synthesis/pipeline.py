"""The synthesis stage end to end: extract → align → classify → key → ledger → diff → render → write.

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
3. Alignment: local candidates, batches of `batch_size` claims, one judge call per uncached batch.
   A failed batch leaves its claims unaligned and says so.
4. Code decides the rest: classes, divergences, stable keys, the ledger, the diff and the document.

**Time limit.** `synthesis.timeout_minutes` bounds the whole stage. Every call gets the deadline (the
gateway cuts a call there, and no call starts after it), and the stage stops waiting at it. What was not
done by then is not guessed at: the synthesis is written from what was done, and it says what was not
— the reports not extracted and the batches not judged — in a banner at the top of the document, in
its limitations, in `incomplete` in the ledger, and as warnings. Why a degraded synthesis rather than
exit 1: the answers that did complete are kept in the committed ledger, so the next run replays them
and goes further (a failure would write nothing, and a fresh CI runner would start from zero every
time), and a refresh's reports are still published with a synthesis that matches them. If no report
at all was extracted in time, nothing is written and the stage fails (exit 1).

Every gateway call's `CallRecord` is kept: in the ledger next to the answer it produced, and flat in
`framework/synthesis.calls.jsonl` (one line per call the synthesis rests on, replays included, so that
an unchanged re-run writes identical files).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.core.redact import redact
from research_dispatch.core.sanitize import one_line
from research_dispatch.gateway.client import CallRecord, Gateway
from research_dispatch.gateway.client import credentials as gateway_credentials
from research_dispatch.gateway.protocol import ModelGateway
from research_dispatch.leg.status import LegState
from research_dispatch.synthesis import align, extract, methodology
from research_dispatch.synthesis.align import Batch, Judgement
from research_dispatch.synthesis.cache import SynthesisCache
from research_dispatch.synthesis.classify import STATUSES, Cluster, Divergence, classify
from research_dispatch.synthesis.diff import LedgerDiff, diff_ledgers
from research_dispatch.synthesis.errors import StructuredCallFailed, SynthesisFailed, TimeLimitReached
from research_dispatch.synthesis.extract import Claim, ExtractionRequest, NotAFinding
from research_dispatch.synthesis.inputs import (
    LegCoverage,
    ReportInput,
    SkippedReport,
    default_legs,
    degraded_reasons,
    leg_coverage,
    load_inputs,
)
from research_dispatch.synthesis.keys import assign_cluster_keys, assign_divergence_keys
from research_dispatch.synthesis.ledger import (
    Ledger,
    LedgerBatch,
    LedgerCitation,
    LedgerClaim,
    LedgerCluster,
    LedgerDivergence,
    LedgerExtraction,
    LedgerLeg,
    LedgerNotFinding,
    LedgerReport,
    LedgerSide,
    LedgerSkipped,
    LedgerSource,
    read_previous,
)
from research_dispatch.synthesis.render import render_document

T = TypeVar("T")
R = TypeVar("R")


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


@dataclass
class _Extracted:
    request: ExtractionRequest
    claims: list[Claim] = field(default_factory=list)
    dropped: int = 0
    not_findings: list[NotAFinding] = field(default_factory=list)
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


class _LazyGateway:
    """The gateway, created on first need: no key is required when every answer is replayed. One passed in
    (any `ModelGateway`: the caller's, or a test's scripted model) is used as it is and never closed here."""

    def __init__(self, gateway: ModelGateway | None, env: Mapping[str, str], settings: Settings) -> None:
        self._gateway = gateway
        self._own: Gateway | None = None
        self._env = env
        self._settings = settings

    def get(self) -> ModelGateway:
        if self._gateway is None:
            creds = gateway_credentials(self._env, self._settings.gateway)
            self._gateway = self._own = Gateway(api_key=creds.key, base_url=creds.base_url,
                                                settings=self._settings.gateway)
        return self._gateway

    def close(self, *, in_use: bool = False) -> None:
        """Close a gateway we created, unless calls that outlived the time limit may still use it."""
        if self._own is not None and not in_use:
            self._own.close()


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


def _parallel(items: list[T], work: Callable[[T], R], workers: int, deadline: float) -> list[R | None]:
    """Run `work` over items with bounded concurrency until `deadline`; results in input order.

    An item not finished by the deadline is None. Workers are daemon threads, so a call that outlives
    the deadline (the gateway should have cut it) can never keep the process alive; `work` must not
    share mutable state with the caller (a late result is simply dropped). An exception in `work` is
    re-raised here.
    """
    results: list[R | None] = [None] * len(items)
    if not items:
        return results
    todo: queue.Queue[int] = queue.Queue()
    for index in range(len(items)):
        todo.put(index)
    finished: queue.Queue[tuple[int, R | None, BaseException | None]] = queue.Queue()

    def run() -> None:
        while time.monotonic() < deadline:
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            try:
                finished.put((index, work(items[index]), None))
            except BaseException as exc:  # handed to the caller's thread, which re-raises it
                finished.put((index, None, exc))

    for number in range(min(workers, len(items))):
        threading.Thread(target=run, name=f"synthesis-{number}", daemon=True).start()
    for _ in items:
        try:
            index, value, error = finished.get(timeout=max(0.001, deadline - time.monotonic()))
        except queue.Empty:
            break
        if error is not None:
            raise error
        results[index] = value
    return results


def _dicts(records: list[CallRecord]) -> list[dict[str, Any]]:
    return [json.loads(record.to_json()) for record in records]


def _time_limit_note(minutes: float) -> str:
    return f"not done when the synthesis time limit ({minutes:g} min, synthesis.timeout_minutes) was reached"


# --------------------------------------------------------------------------------------------------
# Stages


def _extract_all(reports: list[ReportInput], settings: Settings, cache: SynthesisCache, lazy: _LazyGateway,
                 cycle: str, deadline: float) -> list[_Extracted]:
    syn = settings.synthesis
    outcomes = [_Extracted(extract.build_request(r, model=syn.extractor_model, layers=syn.layers)) for r in reports]
    pending: list[_Extracted] = []
    for outcome in outcomes:
        hit = cache.extraction(outcome.request.key)
        if hit is None:
            pending.append(outcome)
            continue
        cleaned = extract.to_claims(hit.extraction, outcome.request.report)
        outcome.claims, outcome.dropped = cleaned.claims, hit.dropped_citations
        outcome.not_findings = sorted({(n.statement, n.reason): n for n in [*hit.not_findings, *cleaned.not_findings]}
                                      .values(), key=lambda n: n.statement)
        outcome.calls, outcome.cached = hit.calls, True
    if not pending:
        return outcomes
    gateway = lazy.get()  # MissingKey here, before any network call

    def work(shared: _Extracted) -> _Extracted:
        outcome = replace(shared)  # a late worker must not change what the caller already wrote up
        try:
            extraction, records = extract.run_extraction(gateway, outcome.request, cycle=cycle, deadline=deadline)
        except TimeLimitReached as exc:
            outcome.error, outcome.timed_out = str(exc), True
            outcome.fresh, outcome.calls = exc.records, _dicts(exc.records)
            return outcome
        except StructuredCallFailed as exc:
            outcome.error, outcome.fresh = str(exc), exc.records
            outcome.calls = _dicts(exc.records)
            return outcome
        cleaned = extract.to_claims(extraction, outcome.request.report)
        outcome.claims, outcome.dropped, outcome.not_findings = cleaned.claims, cleaned.dropped_citations, \
            cleaned.not_findings
        outcome.fresh, outcome.calls = records, _dicts(records)
        cache.store_extraction(outcome.request.key, [c.extracted() for c in outcome.claims], outcome.dropped,
                               outcome.not_findings, outcome.calls)
        return outcome

    return _merge_finished(outcomes, pending, _parallel(pending, work, syn.concurrency, deadline),
                           lambda o: f"{o.request.report.relpath}: {_time_limit_note(syn.timeout_minutes)}")


def _judge_all(batches: list[Batch], settings: Settings, cache: SynthesisCache, lazy: _LazyGateway,
               cycle: str, deadline: float) -> list[_Judged]:
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
    return _merge_finished(outcomes, pending, _parallel(pending, work, settings.synthesis.concurrency, deadline),
                           lambda o: f"judge batch {o.batch.id}: {_time_limit_note(minutes)}")


# --------------------------------------------------------------------------------------------------
# The ledger


def _incomplete(extracted: list[_Extracted], judged: list[_Judged], minutes: float) -> list[str]:
    """What this synthesis did not process because its time limit was reached (empty when complete)."""
    reports = [o.request.report.stem for o in extracted if o.timed_out]
    batches = [o.batch.id for o in judged if o.timed_out]
    items = []
    if reports:
        items.append(f"The synthesis time limit ({minutes:g} min) was reached before these reports were extracted; "
                     f"their claims are missing: {', '.join(reports)}.")
    if batches:
        items.append(f"The synthesis time limit ({minutes:g} min) was reached before judge batch(es) "
                     f"{', '.join(batches)} were judged; their claims were not aligned, so agreement among them "
                     "may show as single-source.")
    return items


def _limitations(cycle: str, reports: list[ReportInput], skipped: list[SkippedReport], legs: list[LegCoverage],
                 extracted: list[_Extracted], judged: list[_Judged], incomplete: list[str]) -> list[str]:
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
        elif leg.state is LegState.EDITED and report is not None:
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
    return [one_line(item, 900) for item in items]


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
        extraction=LedgerExtraction(
            status=status, key=outcome.request.key, model=settings.synthesis.extractor_model,
            prompt_version=extract.PROMPT_VERSION, error=one_line(outcome.error, 500) if outcome.error else None,
            truncated=outcome.request.truncated, dropped_citations=outcome.dropped,
            not_findings=[LedgerNotFinding(statement=n.statement, reason=n.reason) for n in outcome.not_findings],
            calls=outcome.calls),
        claims=[c.key for c in outcome.claims])


def _build_ledger(cycle: str, settings: Settings, reports: list[ReportInput], skipped: list[SkippedReport],
                  legs: list[LegCoverage], extracted: list[_Extracted], judged: list[_Judged], clusters: list[Cluster],
                  divergences: list[Divergence], limitations: list[str], incomplete: list[str]) -> Ledger:
    syn = settings.synthesis
    cluster_of = {key: c.key for c in clusters for key in c.members}
    by_index = {c.index: c for c in clusters}
    ledger_claims = [
        LedgerClaim(cluster=cluster_of[claim.key], key=claim.key, report=claim.report, layer_key=claim.layer_key,
                    decision_key=claim.decision_key, pick_key=claim.pick_key, quote=claim.quote,
                    section=claim.section, position=claim.position, anchored=claim.anchored,
                    citations=[LedgerCitation.of(c) for c in claim.citations], **claim.extracted())
        for outcome in extracted for claim in outcome.claims]
    ledger_clusters = [LedgerCluster(
        key=c.key, base=c.base, layer=c.layer, layer_key=c.layer_key, decision=c.decision, status=c.status,
        flagged=c.flagged, pick=c.pick, pick_key=c.pick_key, condition=c.condition, label=c.label, summary=c.summary,
        members=c.members, reports=c.reports, families=c.families, excluded_reports=c.excluded_reports,
        batches=c.batches, unaligned=c.unaligned, divergence=c.divergence,
        contradicts=sorted(by_index[i].key for i in c.contradicts), contrary_excluded=c.contrary_excluded)
        for c in clusters]
    ledger_divergences = [LedgerDivergence(
        key=d.key, layer=d.layer, decision=d.decision, kind=d.kind, tie=d.tie, line=d.line,
        positions=[LedgerSide(cluster=by_index[s.cluster].key, label=s.label, pick=s.pick, condition=s.condition,
                              claims=s.claims, reports=s.reports, families=s.families) for s in d.sides],
        ambivalent_reports=d.ambivalent_reports, weighed=sorted(by_index[i].key for i in d.weighed_clusters),
        excluded_claims=d.excluded_claims)
        for d in divergences]
    ledger_batches = [LedgerBatch(
        id=o.batch.id, key=o.batch.key,
        status="ok" if o.judgement is not None else "timed_out" if o.timed_out else "failed",
        judge_model=o.batch.judge_model, judge_is_author=o.batch.judge_is_author, labels=o.batch.labels,
        ids=o.batch.ids, anchors=o.batch.anchors, error=one_line(o.error, 500) if o.error else None,
        judgement=o.judgement.model_dump(mode="json") if o.judgement is not None else None, calls=o.calls)
        for o in judged]
    statuses = {status: sum(1 for c in clusters if c.status == status) for status in STATUSES}
    counts = {"reports": len(reports), "counted": sum(1 for r in reports if r.counted),
              "excluded": sum(1 for r in reports if not r.counted),
              "ignored": sum(1 for s in skipped if s.kind == "ignored"),
              "failed": sum(1 for s in skipped if s.kind == "failed"),
              "extracted": sum(1 for o in extracted if not o.error), "claims": len(ledger_claims),
              "not_findings": sum(len(o.not_findings) for o in extracted),
              "clusters": statuses, "flagged": sum(1 for c in clusters if c.flagged),
              "divergences": len(divergences), "ties": sum(1 for d in divergences if d.tie),
              "batches": len(judged)}
    return Ledger(
        cycle=cycle, framework=settings.framework_name,
        settings={"extractor_model": syn.extractor_model, "extraction_prompt": extract.PROMPT_VERSION,
                  "judge_models": list(syn.judge_models), "judge_prompt": align.PROMPT_VERSION,
                  "count_unverified": syn.count_unverified, "batch_size": syn.batch_size,
                  "similarity_threshold": syn.similarity_threshold, "layers": list(syn.layers),
                  "timeout_minutes": syn.timeout_minutes},
        counts=counts,
        reports=sorted((_ledger_report(o, settings) for o in extracted), key=lambda r: r.stem),
        skipped=[LedgerSkipped(stem=s.stem, path=s.relpath, kind=s.kind, reason=one_line(s.reason, 500))
                 for s in sorted(skipped, key=lambda s: s.stem)],
        claims=sorted(ledger_claims, key=lambda c: c.key),
        clusters=sorted(ledger_clusters, key=lambda c: c.key),
        divergences=sorted(ledger_divergences, key=lambda d: d.key),
        batches=sorted(ledger_batches, key=lambda b: b.id),
        legs=[LedgerLeg(stem=leg.stem, topic=leg.topic, model=leg.model, state=leg.state.value,
                        detail=one_line(leg.detail, 500), report=leg.report_relpath) for leg in legs],
        limitations=limitations, incomplete=incomplete)


def _calls_log(extracted: list[_Extracted], judged: list[_Judged]) -> str:
    lines = []
    for outcome in sorted(extracted, key=lambda o: o.request.report.stem):
        lines += [json.dumps({**call, "subject": outcome.request.report.relpath}, sort_keys=True,
                             separators=(",", ":")) for call in outcome.calls]
    for judged_batch in judged:
        lines += [json.dumps({**call, "subject": f"judge batch {judged_batch.batch.id}"}, sort_keys=True,
                             separators=(",", ":")) for call in judged_batch.calls]
    return redact("".join(line + "\n" for line in lines))


# --------------------------------------------------------------------------------------------------
# Entry point


def synthesize(repo: Path, settings: Settings, *, env: Mapping[str, str], cycle: str, legs: list[Leg] | None = None,
               gateway: ModelGateway | None = None) -> SynthesisResult:
    """Write framework/<name>.md, framework/claims.json, the call log and the methodology table.

    `legs` is the plan (every leg of the current topics); by default it is computed from the topics.
    """
    syn = settings.synthesis
    deadline = time.monotonic() + syn.timeout_minutes * 60
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
        extracted = _extract_all(reports, settings, cache, lazy, cycle, deadline)
        failures = [o for o in extracted if o.error]
        if len(failures) == len(extracted):
            raise SynthesisFailed(f"every extraction failed; nothing was written (first: {failures[0].error})")
        claims = [claim for outcome in extracted for claim in outcome.claims]
        by_key = {c.key: c for c in claims}
        by_stem = {r.stem: r for r in reports}
        edges = align.candidate_edges(claims, syn.similarity_threshold)
        plans = align.plan_batches(align.candidate_components(claims, edges), edges, syn.batch_size)
        batches = [align.build_batch(i + 1, plan, by_key, by_stem, settings) for i, plan in enumerate(plans)]
        judged = _judge_all(batches, settings, cache, lazy, cycle, deadline)
    finally:
        lazy.close(in_use=time.monotonic() >= deadline)
    warnings += cache.warnings

    counted = {r.stem for r in reports if r.counted}
    alignment = align.assemble(claims, batches, {o.batch.index: o.judgement for o in judged}, counted)
    clusters, divergences = classify(alignment, by_key, {r.stem: r.counting for r in reports})
    assign_cluster_keys(clusters, old, {c.key for c in claims if c.report in counted})
    assign_divergence_keys(divergences, clusters)
    incomplete = _incomplete(extracted, judged, syn.timeout_minutes)
    limitations = _limitations(cycle, reports, inputs.skipped, states, extracted, judged, incomplete)
    ledger = _build_ledger(cycle, settings, reports, inputs.skipped, states, extracted, judged, clusters, divergences,
                           limitations, incomplete)
    ledger_dict = ledger.to_dict()
    diff = diff_ledgers(old, ledger_dict)

    for outcome in extracted:
        if outcome.error:
            warnings.append(outcome.error)
        if outcome.dropped:
            warnings.append(f"{outcome.request.report.relpath}: the extractor cited {outcome.dropped} source "
                            "number(s) the report does not have; they were dropped")
    for judged_batch in judged:
        if judged_batch.error:
            warnings.append(judged_batch.error)
        if judged_batch.batch.judge_is_author:
            warnings.append(f"judge batch {judged_batch.batch.id}: {judged_batch.batch.judge_model} is of the "
                            "family of a report it judges (configure a judge of another family)")

    write_atomic(ledger_path, redact(ledger.to_json()))
    write_atomic(document_path, redact(render_document(ledger, settings)))
    write_atomic(calls_path, _calls_log(extracted, judged))
    methodology_path = _update_methodology(repo, settings, states, reports, warnings)

    fresh = [r for o in extracted for r in o.fresh] + [r for o in judged for r in o.fresh]
    extraction_calls = sum(len(o.fresh) for o in extracted)
    judge_calls = sum(len(o.fresh) for o in judged)
    return SynthesisResult(
        document_path=document_path, ledger_path=ledger_path, calls_path=calls_path,
        methodology_path=methodology_path, diff=diff, llm_calls=extraction_calls + judge_calls,
        extraction_calls=extraction_calls, cached_extractions=sum(1 for o in extracted if o.cached),
        judge_calls=judge_calls, cached_judgements=sum(1 for o in judged if o.cached),
        cost_usd=round(sum(r.cost_usd for r in fresh), 6), counts=ledger_dict["counts"],
        warnings=[one_line(w, 500) for w in warnings], ledger=ledger_dict, incomplete=incomplete)


def _update_methodology(repo: Path, settings: Settings, legs: list[LegCoverage], reports: list[ReportInput],
                        warnings: list[str]) -> Path | None:
    path = confined(repo, settings.methodology_path)
    if not path.is_file():
        return None
    text = path.read_bytes().decode("utf-8")  # bytes, so line endings outside the markers are kept
    table = methodology.render_table(methodology.dispatch_rows(legs, reports))
    try:
        updated = methodology.replace_table(text, table)
    except methodology.MarkersMissing as exc:
        warnings.append(f"{settings.methodology_path}: dispatch table not updated: {exc} "
                        f"(add {methodology.START} and {methodology.END} around it)")
        return None
    if updated != text:
        write_atomic(path, updated)
    return path
