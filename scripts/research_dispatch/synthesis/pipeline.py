"""The synthesis stage end to end: extract → align → classify → key → ledger → diff → render → write.

Order of work and why:

1. Inputs: every report (a report that does not parse is bad input: exit 2), its re-checked route,
   and the planned legs' states; the previous ledger (for the diff, stable keys and replays).
2. Extraction: cached answers first (build cache, then the previous ledger); the rest in parallel,
   bounded by `synthesis.concurrency`. The gateway is created only when a call is actually needed, so a
   missing key is a `MissingKey` before any network call, and a fully cached run needs no key at all.
   A report whose extraction fails is listed under limitations; if every extraction fails, nothing is
   written and `SynthesisFailed` is raised (exit 1).
3. Alignment: local candidates, batches of `batch_size` claims, one judge call per uncached batch.
   A failed batch leaves its claims unaligned and says so.
4. Code decides the rest: classes, divergences, stable keys, the ledger, the diff and the document.

Every gateway call's `CallRecord` is kept: in the ledger next to the answer it produced, and flat in
`framework/synthesis.calls.jsonl` (one line per call the synthesis rests on, replays included, so that
an unchanged re-run writes identical files).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from research_dispatch import environment
from research_dispatch.config import Settings
from research_dispatch.fsio import confined, write_atomic
from research_dispatch.gateway import CallRecord, Gateway
from research_dispatch.plan import Leg
from research_dispatch.redact import redact
from research_dispatch.sanitize import one_line
from research_dispatch.synthesis import align, extract, methodology
from research_dispatch.synthesis.align import Batch, Judgement
from research_dispatch.synthesis.cache import SynthesisCache
from research_dispatch.synthesis.classify import STATUSES, Cluster, Divergence, classify
from research_dispatch.synthesis.diff import LedgerDiff, diff_ledgers
from research_dispatch.synthesis.errors import StructuredCallFailed, SynthesisFailed
from research_dispatch.synthesis.extract import Claim, ExtractionRequest
from research_dispatch.synthesis.inputs import LegState, ReportInput, default_legs, leg_states, load_reports
from research_dispatch.synthesis.keys import assign_cluster_keys, assign_divergence_keys
from research_dispatch.synthesis.ledger import (
    Ledger,
    LedgerBatch,
    LedgerClaim,
    LedgerCluster,
    LedgerDivergence,
    LedgerDivergencePosition,
    LedgerExtraction,
    LedgerLeg,
    LedgerPosition,
    LedgerReport,
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


@dataclass
class _Extracted:
    request: ExtractionRequest
    claims: list[Claim] = field(default_factory=list)
    dropped: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)
    fresh: list[CallRecord] = field(default_factory=list)
    cached: bool = False
    error: str | None = None


@dataclass
class _Judged:
    batch: Batch
    judgement: Judgement | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    fresh: list[CallRecord] = field(default_factory=list)
    cached: bool = False
    error: str | None = None


class _LazyGateway:
    """The gateway, created on first need: no key is required when every answer is replayed."""

    def __init__(self, gateway: Gateway | None, env: Mapping[str, str], settings: Settings) -> None:
        self._gateway = gateway
        self._own = False
        self._env = env
        self._settings = settings

    def get(self) -> Gateway:
        if self._gateway is None:
            creds = environment.require(self._env, environment.OPENROUTER)
            self._gateway = Gateway(api_key=creds.key, base_url=creds.base_url, settings=self._settings.gateway)
            self._own = True
        return self._gateway

    def close(self) -> None:
        if self._own and self._gateway is not None:
            self._gateway.close()


def _parallel(items: list[T], work: Callable[[T], R], workers: int) -> list[R]:
    """Run `work` over items with bounded concurrency; results in input order."""
    if not items:
        return []
    if workers <= 1 or len(items) == 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="synthesis") as pool:
        return list(pool.map(work, items))


def _dicts(records: list[CallRecord]) -> list[dict[str, Any]]:
    return [json.loads(record.to_json()) for record in records]


# --------------------------------------------------------------------------------------------------
# Stages


def _extract_all(reports: list[ReportInput], settings: Settings, cache: SynthesisCache, lazy: _LazyGateway,
                 cycle: str) -> list[_Extracted]:
    syn = settings.synthesis
    outcomes = [_Extracted(extract.build_request(r, model=syn.extractor_model, layers=syn.layers)) for r in reports]
    pending: list[_Extracted] = []
    for outcome in outcomes:
        hit = cache.extraction(outcome.request.key)
        if hit is None:
            pending.append(outcome)
            continue
        extraction, dropped, calls = hit
        outcome.claims, _ = extract.to_claims(extraction, outcome.request.report)
        outcome.dropped, outcome.calls, outcome.cached = dropped, calls, True
    if not pending:
        return outcomes
    gateway = lazy.get()  # MissingKey here, before any network call

    def work(outcome: _Extracted) -> _Extracted:
        try:
            extraction, records = extract.run_extraction(gateway, outcome.request, cycle=cycle)
        except StructuredCallFailed as exc:
            outcome.error, outcome.fresh = str(exc), exc.records
            outcome.calls = _dicts(exc.records)
            return outcome
        outcome.claims, outcome.dropped = extract.to_claims(extraction, outcome.request.report)
        outcome.fresh, outcome.calls = records, _dicts(records)
        cache.store_extraction(outcome.request.key, [c.extracted() for c in outcome.claims], outcome.dropped,
                               outcome.calls)
        return outcome

    _parallel(pending, work, syn.concurrency)
    return outcomes


def _judge_all(batches: list[Batch], settings: Settings, cache: SynthesisCache, lazy: _LazyGateway,
               cycle: str) -> list[_Judged]:
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

    def work(outcome: _Judged) -> _Judged:
        try:
            judgement, records = align.run_judge(gateway, outcome.batch, cycle=cycle)
        except StructuredCallFailed as exc:
            outcome.error, outcome.fresh, outcome.calls = str(exc), exc.records, _dicts(exc.records)
            return outcome
        outcome.judgement, outcome.fresh, outcome.calls = judgement, records, _dicts(records)
        cache.store_judgement(outcome.batch.key, judgement, outcome.calls)
        return outcome

    _parallel(pending, work, settings.synthesis.concurrency)
    return outcomes


# --------------------------------------------------------------------------------------------------
# The ledger


def _limitations(cycle: str, reports: list[ReportInput], legs: list[LegState], extracted: list[_Extracted],
                 judged: list[_Judged]) -> list[str]:
    items: list[str] = []
    for leg in legs:
        if leg.state == "missing":
            items.append(f"Leg {leg.stem} ({leg.model}) has no report; its topic is not covered by that model.")
        elif leg.state == "failed":
            items.append(f"Leg {leg.stem} ({leg.model}): {leg.detail}.")
        elif leg.state == "degraded":
            items.append(f"Report {leg.stem} is degraded: {leg.detail}.")
    planned = {leg.stem for leg in legs}
    for report in reports:
        if legs and report.stem not in planned:
            items.append(f"Report {report.stem} belongs to no planned leg (a removed topic or model?); "
                         "it is still used.")
        if report.meta.status == "degraded" and report.stem not in planned:
            items.append(f"Report {report.stem} is degraded: {'; '.join(report.meta.status_reasons) or 'degraded'}.")
        if report.meta.cycle and report.meta.cycle != cycle:
            items.append(f"Report {report.stem} is from cycle {report.meta.cycle}, not {cycle}.")
        if not report.route_verified:
            if report.counted:
                items.append(f"Report {report.stem} has route {report.route}, which is not verified; it is counted "
                             "because synthesis.count_unverified is on.")
            else:
                items.append(f"Report {report.stem} is excluded from support counts: route {report.route} is not "
                             "verified.")
    for outcome in extracted:
        stem = outcome.request.report.stem
        if outcome.error:
            items.append(f"Report {stem} could not be extracted ({outcome.error}); its claims are missing from "
                         "this synthesis.")
        elif outcome.request.truncated:
            items.append(f"Report {stem} is longer than {extract.MAX_REPORT_CHARS} characters; only its first part "
                         "was extracted.")
    for outcome in judged:
        batch = outcome.batch
        if outcome.error:
            items.append(f"Judge batch {batch.index} failed ({outcome.error}); its {len(batch.ids)} claims were not "
                         "aligned, so agreement among them may show as single-source.")
        if batch.judge_is_author:
            items.append(f"Judge batch {batch.index} was judged by {batch.judge_model}, whose family also wrote "
                         "reports in that batch (no judge of another family is configured).")
    return [one_line(item, 900) for item in items]


def _build_ledger(cycle: str, settings: Settings, reports: list[ReportInput], legs: list[LegState],
                  extracted: list[_Extracted], judged: list[_Judged], clusters: list[Cluster],
                  divergences: list[Divergence], limitations: list[str]) -> Ledger:
    syn = settings.synthesis
    cluster_of = {key: c.key for c in clusters for key in c.members}
    by_index = {c.index: c for c in clusters}
    ledger_reports = []
    ledger_claims = []
    for outcome in extracted:
        report = outcome.request.report
        meta = report.meta
        ledger_reports.append(LedgerReport(
            stem=report.stem, path=report.relpath, topic=meta.topic, title=one_line(meta.title, 200),
            requested_model=meta.requested_model, family=report.family, served_models=list(meta.served_models),
            served_providers=list(meta.served_providers), route=report.route, route_verified=report.route_verified,
            route_problems=[one_line(p, 300) for p in report.route_problems], counted=report.counted,
            status=meta.status, cycle=meta.cycle, sha256=report.sha256, words=meta.words,
            sources=[LedgerSource(id=s.id, url=s.url, title=one_line(s.title, 300)) for s in meta.sources],
            extraction=LedgerExtraction(
                status="failed" if outcome.error else "ok", key=outcome.request.key, model=syn.extractor_model,
                prompt_version=extract.PROMPT_VERSION, error=one_line(outcome.error, 500) if outcome.error else None,
                truncated=outcome.request.truncated, dropped_citations=outcome.dropped, calls=outcome.calls),
            claims=[c.key for c in outcome.claims]))
        for claim in outcome.claims:
            ledger_claims.append(LedgerClaim(cluster=cluster_of[claim.key], key=claim.key, report=claim.report,
                                             layer_key=claim.layer_key, pick_key=claim.pick_key, **claim.extracted()))
    ledger_clusters = []
    for cluster in clusters:
        ledger_clusters.append(LedgerCluster(
            key=cluster.key, base=cluster.base, layer=cluster.layer, layer_key=cluster.layer_key,
            status=cluster.status, flagged=cluster.flagged, pick=cluster.pick, pick_key=cluster.pick_key,
            summary=cluster.summary, members=cluster.members,
            positions=[LedgerPosition(label=p.label, pick=p.pick, condition=p.condition, claims=p.claims,
                                      reports=p.reports, families=p.families, excluded_reports=p.excluded_reports)
                       for p in cluster.positions],
            reports=cluster.reports, families=cluster.families, excluded_reports=cluster.excluded_reports,
            batches=cluster.batches, unaligned=cluster.unaligned, divergence=cluster.divergence))
    ledger_divergences = [LedgerDivergence(
        key=d.key, layer=d.layer, kind=d.kind, line=d.line,
        positions=[LedgerDivergencePosition(cluster=by_index[i].key, label=p.label, pick=p.pick,
                                            condition=p.condition, claims=p.claims, reports=p.reports,
                                            families=p.families) for i, p in d.positions])
        for d in divergences]
    ledger_batches = [LedgerBatch(
        index=o.batch.index, key=o.batch.key, status="failed" if o.judgement is None else "ok",
        judge_model=o.batch.judge_model, judge_is_author=o.batch.judge_is_author, labels=o.batch.labels,
        ids=o.batch.ids, anchors=o.batch.anchors, error=one_line(o.error, 500) if o.error else None,
        judgement=o.judgement.model_dump(mode="json") if o.judgement is not None else None, calls=o.calls)
        for o in judged]
    statuses = {status: sum(1 for c in clusters if c.status == status) for status in STATUSES}
    counts = {"reports": len(reports), "counted": sum(1 for r in reports if r.counted),
              "excluded": sum(1 for r in reports if not r.counted),
              "extracted": sum(1 for o in extracted if not o.error), "claims": len(ledger_claims),
              "clusters": statuses, "flagged": sum(1 for c in clusters if c.flagged),
              "divergences": len(divergences), "batches": len(judged)}
    return Ledger(
        cycle=cycle, framework=settings.framework_name,
        settings={"extractor_model": syn.extractor_model, "extraction_prompt": extract.PROMPT_VERSION,
                  "judge_models": list(syn.judge_models), "judge_prompt": align.PROMPT_VERSION,
                  "count_unverified": syn.count_unverified, "batch_size": syn.batch_size,
                  "similarity_threshold": syn.similarity_threshold, "layers": list(syn.layers)},
        counts=counts,
        reports=sorted(ledger_reports, key=lambda r: r.stem),
        claims=sorted(ledger_claims, key=lambda c: c.key),
        clusters=sorted(ledger_clusters, key=lambda c: c.key),
        divergences=sorted(ledger_divergences, key=lambda d: d.key),
        batches=sorted(ledger_batches, key=lambda b: b.index),
        legs=[LedgerLeg(stem=leg.stem, topic=leg.topic, model=leg.model, state=leg.state,
                        detail=one_line(leg.detail, 500), report=leg.report_relpath) for leg in legs],
        limitations=limitations)


def _calls_log(extracted: list[_Extracted], judged: list[_Judged]) -> str:
    lines = []
    for outcome in sorted(extracted, key=lambda o: o.request.report.stem):
        lines += [json.dumps({**call, "subject": outcome.request.report.relpath}, sort_keys=True,
                             separators=(",", ":")) for call in outcome.calls]
    for judged_batch in judged:
        lines += [json.dumps({**call, "subject": f"judge batch {judged_batch.batch.index}"}, sort_keys=True,
                             separators=(",", ":")) for call in judged_batch.calls]
    return redact("".join(line + "\n" for line in lines))


# --------------------------------------------------------------------------------------------------
# Entry point


def synthesize(repo: Path, settings: Settings, *, env: Mapping[str, str], cycle: str, legs: list[Leg] | None = None,
               gateway: Gateway | None = None) -> SynthesisResult:
    """Write framework/<name>.md, framework/claims.json, the call log and the methodology table."""
    warnings: list[str] = []
    reports = load_reports(repo, settings)
    planned = default_legs(repo, settings) if legs is None else list(legs)
    states = leg_states(repo, settings, planned, reports)
    ledger_path = confined(repo, settings.ledger_relpath)
    document_path = confined(repo, settings.document_relpath)
    calls_path = confined(repo, settings.synthesis_calls_relpath)
    old, problem = read_previous(ledger_path)
    if problem:
        warnings.append(problem)
    cache = SynthesisCache(repo, settings, old)
    lazy = _LazyGateway(gateway, env, settings)
    try:
        extracted = _extract_all(reports, settings, cache, lazy, cycle)
        failures = [o for o in extracted if o.error]
        if len(failures) == len(extracted):
            raise SynthesisFailed(f"every extraction failed; nothing was written (first: {failures[0].error})")
        claims = [claim for outcome in extracted for claim in outcome.claims]
        by_key = {c.key: c for c in claims}
        by_stem = {r.stem: r for r in reports}
        edges = align.candidate_edges(claims, settings.synthesis.similarity_threshold)
        plans = align.plan_batches(align.candidate_components(claims, edges), edges, settings.synthesis.batch_size)
        batches = [align.build_batch(i + 1, plan, by_key, by_stem, settings, cycle) for i, plan in enumerate(plans)]
        judged = _judge_all(batches, settings, cache, lazy, cycle)
    finally:
        lazy.close()

    raw = align.assemble(claims, batches, {o.batch.index: o.judgement for o in judged})
    clusters, divergences = classify(raw, by_key, by_stem)
    assign_cluster_keys(clusters, old)
    assign_divergence_keys(divergences, clusters)
    limitations = _limitations(cycle, reports, states, extracted, judged)
    ledger = _build_ledger(cycle, settings, reports, states, extracted, judged, clusters, divergences, limitations)
    ledger_dict = ledger.to_dict()
    diff = diff_ledgers(old, ledger_dict)

    for outcome in extracted:
        if outcome.error:
            warnings.append(outcome.error)
        if outcome.dropped:
            warnings.append(f"{outcome.request.report.relpath}: the extractor cited {outcome.dropped} source "
                            "number(s) the report does not have; they were dropped")
    for outcome in judged:
        if outcome.error:
            warnings.append(outcome.error)
        if outcome.batch.judge_is_author:
            warnings.append(f"judge batch {outcome.batch.index}: {outcome.batch.judge_model} is of the family of a "
                            "report it judges (configure a judge of another family)")

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
        warnings=[one_line(w, 500) for w in warnings], ledger=ledger_dict)


def _update_methodology(repo: Path, settings: Settings, legs: list[LegState], reports: list[ReportInput],
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
