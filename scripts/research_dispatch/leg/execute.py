"""Run one leg end to end: check keys, research, finalise citations, judge the route, write files.

Files written (atomically, at computed paths only):
* `research/<stem>.md`, `research/<stem>.calls.jsonl` and `research/<stem>.evidence.jsonl` (the
  passages the researcher was shown of every cited source, `evidence.py`) — only when a report was
  produced, and as ONE unit (`legfiles.write_unit`): after any failure all three are the old ones or all
  three the new ones; a failed leg never replaces the last good report;
* `build/traces/<stem>.jsonl` — the full conversation and tool trace (an artefact, not committed);
* `build/legs/<stem>.json` — the leg's status, written after the report and call log (and even when the
  leg fails), so the synthesis, the run summary and the workflow can say which legs are missing. Its
  `cost_usd` counts every call the leg made, also when it failed after spending (a crash, an interrupt,
  a failed write): money is never hidden.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from research_dispatch.config import environment
from research_dispatch.config.environment import Credentials
from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Budget, SearchSettings, Settings, WordBand
from research_dispatch.config.topics import effective
from research_dispatch.core.errors import Interrupted, MissingKey
from research_dispatch.core.fsio import append_line, confined
from research_dispatch.core.interrupt import reason as interrupted_reason
from research_dispatch.core.redact import redact, register_env
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.gateway import route
from research_dispatch.gateway.client import Gateway, gateway_service
from research_dispatch.gateway.protocol import ModelGateway
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.events import (
    CallEvent,
    CrashEvent,
    LegProgress,
    McpStartEvent,
    TraceEvent,
    WriteFailedEvent,
    WritePendingEvent,
)
from research_dispatch.leg.evidence import report_with_evidence
from research_dispatch.leg.files import FileWrite, UnitNotWritten, UnitPending, write_unit
from research_dispatch.leg.report import (
    FinalBody,
    ReportMeta,
    RouteVerdict,
    SourceEntry,
    Usage,
    body_sha256_of,
    count_words,
    finalize_citations,
)
from research_dispatch.leg.researcher import PROMPT_VERSION, LegSpec, Researcher, ResearchOutcome, Trace
from research_dispatch.leg.status import LegResult, LegState, timestamp, write_status
from research_dispatch.tools.destinations import DestinationPolicy
from research_dispatch.tools.mcp_servers import McpToolset
from research_dispatch.tools.providers import ExaProvider, SearchProvider, TavilyProvider
from research_dispatch.tools.search import MODEL_ERROR_KINDS, SearchStats, SearchTools
from research_dispatch.tools.sources import SourceRegistry

MIN_CITED_SOURCES = 3


SEARCH_SERVICES = {"tavily": environment.TAVILY, "exa": environment.EXA}


def require_keys(env: Mapping[str, str], settings: Settings | None = None,
                 legs: Iterable[Leg] = ()) -> tuple[Credentials, dict[str, Credentials]]:
    """Gateway and search credentials, checked (`environment`), or a clear error before any network call.

    The gateway's are those of the configured kind: OPENROUTER_* by default, OPENAI_API_KEY and
    OPENAI_BASE_URL for an `openai-compatible` gateway. The search services checked are those the legs
    use (each topic's providers), else the configured providers, else Tavily.
    """
    providers: set[str] = set()
    for leg in legs:
        providers.update(effective(leg.topic, settings)[2].providers if settings else ("tavily",))
    if not providers:
        providers.update(settings.search.providers if settings else ("tavily",))
    names = sorted(providers)
    services = [gateway_service(settings.gateway if settings is not None else None),
                *(SEARCH_SERVICES[name] for name in names)]
    found = environment.require_all(env, services)  # every key that is not set, named in one message
    return found[0], dict(zip(names, found[1:], strict=True))


def search_providers(search: SearchSettings, credentials: Mapping[str, Credentials]) -> list[SearchProvider]:
    """The leg's providers, in the topic's order, each with its official client on a bounded session."""
    providers: list[SearchProvider] = []
    for name in search.providers:
        creds = credentials[name]
        if name == "exa":
            providers.append(ExaProvider(api_key=creds.key, base_url=creds.base_url))
        else:
            providers.append(TavilyProvider(api_key=creds.key, base_url=creds.base_url))
    return providers


def input_hash(*, topic_sha256: str, model: str, provider: str | None, words: WordBand, budget: Budget,
               search: SearchSettings, mcp: Mapping[str, Any] | None = None) -> str:
    """What a report depends on; an unchanged hash within a cycle means the leg need not run again.

    The resume key of a leg (`resume.py`, `leg/standing.py`): the topic file's bytes, the route, the
    researcher's prompts (`PROMPT_VERSION`), the word band, the budget and the search settings. The
    toolset (search providers other than Tavily alone, MCP servers) is part of it only when it is not
    the default, so adding the toolset changed no existing leg's hash. Existing reports carry this value:
    it must stay byte-identical for the same inputs (tests/test_leg_steps.py pins it).
    """
    payload: dict[str, Any] = {
        "topic": topic_sha256, "model": model, "provider": provider, "prompt": PROMPT_VERSION,
        "words": words.model_dump(), "budget": budget.model_dump(),
        "search": search.model_dump(mode="json", exclude={"providers"}),
    }
    providers = list(search.providers)
    if providers != ["tavily"]:
        payload["providers"] = providers
    if mcp:
        payload["mcp"] = dict(mcp)
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def leg_input_hash(leg: Leg, settings: Settings) -> str:
    """The leg's `input_hash` from its topic's meaning (`topics.content_hash`) and the settings in force."""
    return _leg_hash(leg, settings, leg.topic_file.content_sha256)


def leg_input_hashes(leg: Leg, settings: Settings) -> frozenset[str]:
    """Every `input_hash` that means "these inputs": the current one, and the one reports written before
    topics were hashed by meaning carry (the file's bytes), so upgrading pays for no leg again."""
    return frozenset({leg_input_hash(leg, settings), _leg_hash(leg, settings, leg.topic_file.raw_sha256)})


def _leg_hash(leg: Leg, settings: Settings, topic_sha256: str) -> str:
    words, budget, search = effective(leg.topic, settings)
    # `egress_proxy` counts only when off (the default, on, came later: it changed no existing leg's hash)
    mcp = {name: settings.mcp.servers[name].model_dump(
        mode="json", exclude={"egress_proxy"} if settings.mcp.servers[name].egress_proxy else None)
        for name in leg.topic.mcp if name in settings.mcp.servers}
    return input_hash(topic_sha256=topic_sha256, model=leg.route.model, provider=leg.route.provider,
                      words=words, budget=budget, search=search, mcp=mcp)


class _TraceWriter:
    """Appends redacted JSON lines to the leg's trace; starts a fresh file per run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")

    def __call__(self, event: TraceEvent) -> None:
        # a full or read-only disk: the trace is an artefact; the leg's outcome is what matters
        with contextlib.suppress(OSError):
            append_line(self.path, redact(event.to_json(at=timestamp())))


@dataclass(frozen=True)
class LegServices:
    """The model gateway and search providers a leg talks to instead of the configured ones.

    The model seam (`gateway.protocol`): rule tests run the leg's own code — the research loop, the
    citations, the judgement of the outcome, the all-or-nothing write — over an in-process scripted model
    and scripted search, while the wire is tested against the HTTP fakes. The keys are still checked
    first, so nothing else about the leg changes. The caller owns (and closes) what it passes.
    """

    gateway: ModelGateway
    search: Sequence[SearchProvider]


def run_leg(repo: Path, settings: Settings, leg: Leg, *, env: Mapping[str, str] | None = None, cycle: str,
            run_url: str | None = None, retry: RetryPolicy | None = None,
            progress: Callable[[LegProgress], None] | None = None,
            clock: Callable[[], float] | None = None, interrupt: threading.Event | None = None,
            services: LegServices | None = None) -> LegResult:
    """Run one leg and write its files. Raises only for bad input (missing keys); failures are results.

    `retry` is the gateway's retry policy (default: `gateway`'s settings); its `sleep` is the search
    providers' too (their policy is `search_service`'s); `clock` is the monotonic clock the time cap is
    measured on. Both exist so tests can drive back-off and time caps without waiting. `services`
    replaces the gateway and the search providers (`LegServices`, the model seam). `interrupt` is
    the run's Ctrl-C Event: once set, tool calls stop at once, the leg stops at its next step and its
    status says interrupted; MCP servers are stopped whatever happens. Ctrl-C in the calling thread
    itself (the `research` command) ends the leg the same way and raises `Interrupted` once the status
    file is written.

    The steps: the keys (`leg_credentials`), then `_LegRun`: the research (`research`, over the toolset
    of `toolset`), the outcome judged (`conclude`, with `quality_reasons` and `report_meta`) and the
    report written (`write_report`).
    """
    env = os.environ if env is None else env
    credentials = leg_credentials(env, settings, leg)
    words, budget, search_settings = effective(leg.topic, settings)
    result = LegResult(stem=leg.stem, topic=leg.topic.id, model=leg.route.model, family=leg.family,
                       status=LegState.FAILED, input_hash=leg_input_hash(leg, settings), cycle=cycle,
                       started_at=timestamp())
    trace = _TraceWriter(confined(repo, leg.trace_relpath(settings)))
    run = _LegRun(repo=repo, settings=settings, leg=leg, env=env, credentials=credentials, words=words,
                  budget=budget, search=search_settings, cycle=cycle, run_url=run_url, retry=retry,
                  interrupt=interrupt, result=result, trace=trace, services=services)
    spent: list[float] = []  # every call's cost as it happens: counted even if the researcher crashes

    def traced(event: TraceEvent) -> None:
        if isinstance(event, CallEvent):
            spent.append(event.record.cost_usd)
        trace(event)
        if progress is not None:
            progress(LegProgress(leg=leg.stem, event=event))

    try:
        outcome, tools = run.research(traced, clock or time.monotonic)
    except MissingKey:
        raise
    except KeyboardInterrupt:  # Ctrl-C outside the research loop (it handles its own): still recorded
        result.error, result.interrupted, result.finished_at = interrupted_reason(), True, timestamp()
        run.write_status()
        raise Interrupted(f"{leg.stem}: {interrupted_reason()}") from None
    except Exception as exc:  # a bug or an unexpected client failure: the leg fails, loudly, others go on
        result.error = redact(f"{type(exc).__name__}: {exc}")
        result.reasons = ["internal error; see the trace"]
        result.finished_at = timestamp()
        result.cost_usd = round(sum(spent), 6)
        result.calls = len(spent)
        trace(CrashEvent(error=result.error))
        run.write_status(quiet=True)
        return result
    return run.conclude(outcome, tools)


@dataclass(frozen=True)
class LegCredentials:
    """The checked keys a leg needs: its gateway's and each of its search providers'."""

    gateway: Credentials
    search: dict[str, Credentials]


def leg_credentials(env: Mapping[str, str], settings: Settings, leg: Leg) -> LegCredentials:
    """The leg's keys, checked before any network call (`MissingKey` else), and registered for redaction:
    keys passed in a mapping (not os.environ) are redacted too."""
    gateway, search = require_keys(env, settings, [leg])
    register_env(env)
    return LegCredentials(gateway=gateway, search=search)


@dataclass
class _LegRun:
    """One run of one leg: its inputs, resolved once, and the steps of `run_leg` over them. `result` is
    the status record the steps fill in; it starts as failed and is written whatever happens."""

    repo: Path
    settings: Settings
    leg: Leg
    env: Mapping[str, str]
    credentials: LegCredentials
    words: WordBand
    budget: Budget
    search: SearchSettings
    cycle: str
    run_url: str | None
    retry: RetryPolicy | None
    interrupt: threading.Event | None
    result: LegResult
    trace: _TraceWriter
    services: LegServices | None = None

    # --- the research --------------------------------------------------------------------------
    def research(self, trace: Trace, clock: Callable[[], float]) -> tuple[ResearchOutcome, SearchTools]:
        """The research loop over the leg's gateway and toolset, both closed when it ends (MCP servers
        stopped) whatever happens. `trace` receives the loop's events."""
        leg = self.leg
        spec = LegSpec(topic_id=leg.topic.id, title=leg.topic.title, scope=leg.topic.scope, model=leg.route.model,
                       provider=leg.route.provider, session_id=f"{self.cycle}:{leg.stem}", words=self.words,
                       budget=self.budget, today=self.result.started_at[:10])
        leg_deadline = time.monotonic() + self.budget.timeout_minutes * 60
        with self.gateway(leg_deadline) as gateway, contextlib.ExitStack() as stack:
            tools = self.toolset(stack, leg_deadline)
            outcome = Researcher(gateway, tools, spec, trace=trace, clock=clock, interrupt=self.interrupt).run()
        return outcome, tools

    def gateway(self, leg_deadline: float) -> contextlib.AbstractContextManager[ModelGateway]:
        """The leg's gateway, closed when the research ends: its own, bound to the leg's deadline and
        interrupt; or the injected one (`services`), which its owner closes."""
        if self.services is not None:
            return contextlib.nullcontext(self.services.gateway)
        creds = self.credentials.gateway
        return Gateway(api_key=creds.key, base_url=creds.base_url, settings=self.settings.gateway, retry=self.retry,
                       deadline=leg_deadline, interrupt=self.interrupt)

    def toolset(self, stack: contextlib.ExitStack, leg_deadline: float) -> SearchTools:
        """The researcher's tools: the topic's search providers (their connections closed by `stack`, unless
        injected: `services`' owner closes those) and, when it names any, its MCP servers (started here,
        stopped by `stack`)."""
        leg, settings = self.leg, self.settings
        service = settings.search_service
        destinations = DestinationPolicy.allowing(settings.destinations.allow_hosts)
        mcp = None
        if leg.topic.mcp:
            mcp = stack.enter_context(McpToolset({n: settings.mcp.servers[n] for n in leg.topic.mcp}, env=self.env,
                                                 interrupt=self.interrupt, destinations=destinations))
            mcp.open(leg_deadline=leg_deadline)
            self.trace(McpStartEvent(tools=sorted(mcp.tools), problems=dict(mcp.start_problems)))
        if self.services is not None:
            providers = list(self.services.search)
        else:
            providers = search_providers(self.search, self.credentials.search)
            for provider in providers:
                stack.callback(provider.close)
        return SearchTools(providers=providers, mcp=mcp,
                           settings=self.search, topic_hint=f"{leg.topic.title} {leg.topic.scope}"[:600],
                           retry=service.retry_policy(self.retry.sleep if self.retry is not None else time.sleep),
                           timeout_s=service.timeout_s,
                           leg_deadline=leg_deadline, interrupt=self.interrupt,
                           destinations=destinations, prices=settings.search_prices)

    # --- the outcome ---------------------------------------------------------------------------
    def conclude(self, outcome: ResearchOutcome, tools: SearchTools) -> LegResult:
        """Judge the outcome: the route and the money always; then no report (interrupted, no draft, no
        retrieved source cited) or the report with every reason it is less than complete, written."""
        result = self.result
        records = outcome.records
        verdict = route.leg_verdict(r.verdict for r in records)
        result.route = verdict
        result.route_verified = route.is_verified(verdict,
                                                  trust_self_reported=self.settings.gateway.trust_self_reported)
        result.calls = len(records)
        result.cost_usd = round(sum(r.cost_usd for r in records) + outcome.search_cost_usd, 6)
        if outcome.interrupted:  # no report from an interrupted leg, even with a draft: it did not finish
            result.error, result.interrupted, result.finished_at = interrupted_reason(), True, timestamp()
            result.reasons = ["interrupted"]
            self.write_status()
            return result

        if outcome.draft is None or not outcome.draft.strip():
            result.reasons = quality_reasons(outcome, tools.stats, tools.registry, self.words)
            stop = f"no report was produced: {outcome.reasons[-1]}" if outcome.reasons else "no report was produced"
            result.error = redact(outcome.failure or stop)
            result.finished_at = timestamp()
            self.write_status(quiet=True)
            return result

        final = finalize_citations(outcome.draft, tools.registry)
        reasons = quality_reasons(outcome, tools.stats, tools.registry, self.words, final)
        if not final.sources:
            result.reasons = reasons
            result.error = "the report cites no retrieved source; an unsupported report is not written"
            result.finished_at = timestamp()
            self.write_status(quiet=True)
            return result
        return self.write_report(self.report_meta(outcome, verdict, tools, final, reasons), final, records,
                                 tools.registry)

    def report_meta(self, outcome: ResearchOutcome, verdict: str, tools: SearchTools, final: FinalBody,
                    reasons: list[str]) -> ReportMeta:
        """The report's front matter: the route that served it, what it cost, its sources, why it is
        degraded (`reasons`), and the inputs it was written from."""
        leg, words, stats, records = self.leg, self.words, tools.stats, outcome.records
        return ReportMeta(
            topic=leg.topic.id, title=leg.topic.title, requested_model=leg.route.model, family=leg.family,
            served_models=sorted({r.served_model for r in records if r.served_model and not r.aborted}),
            served_providers=sorted({r.served_provider for r in records if r.served_provider and not r.aborted}),
            route=cast(RouteVerdict, verdict),  # one of route.VERDICTS; ReportMeta validates it
            route_verified=self.result.route_verified, calls=len(records),
            generation_ids=[r.generation_id for r in records if r.generation_id],
            status="degraded" if reasons else "ok", words=count_words(final.body),
            usage=_usage(records),
            sources=[SourceEntry(id=s.id, url=s.url, title=s.title) for s in final.sources],
            started_at=self.result.started_at, finished_at=timestamp(),
            requested_provider=leg.route.provider, rationale=leg.route.rationale, status_reasons=reasons,
            word_band={"min": words.min, "max": words.max}, citations_dropped=final.dropped_citations,
            links_removed=final.unlinked_urls,
            search={"searches": stats.searches, "extracts": stats.extracts, "mcp_calls": stats.mcp_calls,
                    "retrieved": len(tools.registry), "tool_errors": stats.errors,
                    "pages_read": sum(1 for s in tools.registry.all() if s.extracted),
                    "cost_usd": round(stats.cost_usd, 6),
                    "providers": list(self.search.providers), "mcp": list(leg.topic.mcp)},
            research=research_summary(outcome),
            prompt_version=PROMPT_VERSION, input_hash=self.result.input_hash, cycle=self.cycle,
            run_url=self.run_url,
        )

    # --- the write -----------------------------------------------------------------------------
    def write_report(self, meta: ReportMeta, final: FinalBody, records: list[CallRecord],
                     registry: SourceRegistry) -> LegResult:
        """Write the report, its call log, its evidence and the status as one unit (`legfiles.write_unit`);
        a failed write fails the leg and keeps the previous files."""
        leg, settings, result = self.leg, self.settings, self.result
        report_rel = leg.report_relpath(settings)
        calls_text = "".join(redact(r.to_json()) + "\n" for r in records)
        # never over what verify reads back; the evidence covers exactly the sources the written report cites
        capped, evidence = report_with_evidence(meta, final, registry, finish=redact)
        report_text = capped.text
        result.status = LegState(capped.meta.status)
        result.reasons = list(capped.meta.status_reasons)
        result.report = report_rel
        result.words = capped.meta.words
        result.sources = len(capped.sources)
        result.finished_at = meta.finished_at
        result.body_sha256 = body_sha256_of(report_text)
        try:
            write_unit(self.repo, settings.build_dir, leg.stem,
                       [FileWrite(leg.calls_relpath(settings), calls_text),
                        FileWrite(leg.evidence_relpath(settings), evidence.text), FileWrite(report_rel, report_text)],
                       status=FileWrite(leg.status_relpath(settings), redact(result.to_json())))
        except UnitNotWritten as exc:
            _failed_write(result, str(exc))
            self.trace(WriteFailedEvent(error=result.error))
            self.write_status(quiet=True)
        except UnitPending as exc:
            _failed_write(result, str(exc))
            self.trace(WritePendingEvent(error=result.error))
        return result

    def write_status(self, *, quiet: bool = False) -> None:
        write_status(self.repo, self.settings, self.leg, self.result, quiet=quiet)


def quality_reasons(outcome: ResearchOutcome, stats: SearchStats, registry: SourceRegistry, band: WordBand,
                    final: FinalBody | None = None) -> list[str]:
    """Every reason a leg's report is less than complete, in a fixed order (they become `status_reasons`;
    any reason makes the report degraded).

    The research loop's own (a cap reached, truncation, a draft outside the band); then the search
    statistics: service and MCP errors that reached the researcher, every search empty, no page read in
    full; the dossier cut to fit the writing call. With the finalised report (`final`): no cited source read
    in full (the report rests on snippets: never silently `ok`), the loop stopped early, citations dropped
    and links removed as never retrieved, fewer than `MIN_CITED_SOURCES` sources, words outside the band
    (said once: not when the loop already said it).
    """
    reasons = list(outcome.reasons)
    service_errors = {k: v for k, v in stats.error_kinds.items() if k not in MODEL_ERROR_KINDS}
    search_errors = {k: v for k, v in service_errors.items() if not k.startswith("mcp_")}
    mcp_errors = {k: v for k, v in service_errors.items() if k.startswith("mcp_")}
    if search_errors:
        kinds = ", ".join(f"{k}×{v}" for k, v in sorted(search_errors.items()))
        reasons.append(f"search service errors reached the researcher ({kinds})")
    if mcp_errors:
        kinds = ", ".join(f"{k}×{v}" for k, v in sorted(mcp_errors.items()))
        reasons.append(f"MCP tool errors reached the researcher ({kinds})")
    if stats.searches and stats.empty_searches == stats.searches:
        reasons.append(f"all {stats.searches} search(es) returned no results")
    every_read_failed = bool(stats.extracts) and not any(s.extracted for s in registry.all())
    if every_read_failed:
        reasons.append("no page could be read in full (every extraction failed); the report rests on search "
                       "snippets")
    if outcome.dossier is not None and outcome.dossier.left_out:
        reasons.append(f"the dossier was cut to fit the writing call (the route's context window or the dollars "
                       f"left): {outcome.dossier.left_out} of {outcome.dossier.left_out + outcome.dossier.passages} "
                       "passages shown to the researcher were not in front of the writer")
    if final is None:
        return reasons

    cited = [registry.by_url(s.url) for s in final.sources]
    known = [s for s in cited if s is not None]
    if known and len(known) == len(cited) and not every_read_failed and not any(s.extracted for s in known):
        reasons.append(f"the report rests on search snippets only: none of its {len(final.sources)} cited source(s) "
                       "was read in full")

    if outcome.failure:
        reasons.append(f"stopped early: {outcome.failure}")
    if final.dropped_citations:
        reasons.append(f"dropped {final.dropped_citations} citation(s) to sources never retrieved "
                       f"({', '.join(final.unknown_ids[:8])})")
    if final.unlinked_urls:
        reasons.append(f"removed {final.unlinked_urls} link(s) to pages never retrieved")
    if len(final.sources) < MIN_CITED_SOURCES:
        reasons.append(f"cites {len(final.sources)} retrieved source(s); at least {MIN_CITED_SOURCES} expected")
    words_count = count_words(final.body)
    if not band.min <= words_count <= band.max and not any("band" in r for r in reasons):
        reasons.append(f"{words_count} words, outside the {band.min}–{band.max} band")
    return reasons


def research_summary(outcome: ResearchOutcome) -> dict[str, Any]:
    """How the research went, for the front matter: the plan's size, the gap check and what it sent the model
    back for, whether searching stalled, and what the writing call was given (the dossier)."""
    summary: dict[str, Any] = {"plan_items": len(outcome.plan), "stalled": outcome.stalled,
                               "gap_check": "none" if outcome.coverage is None else
                               "answered" if outcome.coverage.understood else "unreadable",
                               "gaps_researched": len(outcome.gaps)}
    if outcome.dossier is not None:
        summary["dossier"] = {"sources": outcome.dossier.sources, "passages": outcome.dossier.passages,
                              "left_out": outcome.dossier.left_out}
    return summary


def _failed_write(result: LegResult, error: str) -> None:
    """The report could not be put in place: the leg failed, its money is still counted."""
    result.status = LegState.FAILED
    result.error = redact(error)
    result.report = None
    result.body_sha256 = None
    result.words = 0
    result.sources = 0


def _usage(records: list[CallRecord]) -> Usage:
    return Usage(prompt_tokens=sum(r.prompt_tokens for r in records),
                 completion_tokens=sum(r.completion_tokens for r in records),
                 cached_tokens=sum(r.cached_tokens for r in records),
                 cost_usd=round(sum(r.cost_usd for r in records), 6))
