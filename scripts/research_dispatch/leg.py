"""Run one leg end to end: check keys, research, finalise citations, judge the route, write files.

Files written (atomically, at computed paths only):
* `research/<stem>.md` and `research/<stem>.calls.jsonl` — only when a report was produced, and as ONE
  unit (`legfiles.write_unit`): after any failure both are the old ones or both the new ones; a failed
  leg never replaces the last good report;
* `build/traces/<stem>.jsonl` — the full conversation and tool trace (an artefact, not committed);
* `build/legs/<stem>.json` — the leg's status, written after the report and call log (and even when the
  leg fails), so the synthesis, the run summary and the workflow can say which legs are missing. Its
  `cost_usd` counts every call the leg made, also when it failed after spending (a crash, an interrupt,
  a failed write): money is never hidden.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from research_dispatch import environment, route
from research_dispatch.config import Settings, effective
from research_dispatch.environment import Credentials
from research_dispatch.errors import MissingKey
from research_dispatch.fsio import append_line, confined, write_atomic
from research_dispatch.gateway import CallRecord, Gateway, RetryPolicy
from research_dispatch.legfiles import FileWrite, UnitNotWritten, UnitPending, write_unit
from research_dispatch.legstate import LegState
from research_dispatch.plan import Leg
from research_dispatch.redact import redact, register_env
from research_dispatch.report import (
    ReportMeta,
    SourceEntry,
    Usage,
    body_sha256_of,
    count_words,
    finalize_citations,
    render_report,
)
from research_dispatch.researcher import PROMPT_VERSION, LegSpec, Researcher, input_hash
from research_dispatch.search import MODEL_ERROR_KINDS, SearchTools

MIN_CITED_SOURCES = 3
EXIT_OK, EXIT_FAILED, EXIT_ROUTE = 0, 1, 3


@dataclass
class LegResult:
    """The status record of one leg (also written to build/legs/<stem>.json)."""

    stem: str
    topic: str
    model: str
    family: str
    status: LegState  # OK | DEGRADED | FAILED: how this attempt ended
    reasons: list[str] = field(default_factory=list)
    route: str = "unverified"
    route_verified: bool = False
    report: str | None = None
    calls: int = 0
    cost_usd: float = 0.0
    words: int = 0
    sources: int = 0
    input_hash: str = ""
    cycle: str = ""
    started_at: str = ""
    finished_at: str = ""
    error: str | None = None
    body_sha256: str | None = None  # the body_sha256 of the report this attempt wrote (None: it wrote none)

    @property
    def exit_code(self) -> int:
        if self.status == LegState.FAILED:
            return EXIT_FAILED
        return EXIT_OK if self.route_verified else EXIT_ROUTE

    def to_json(self) -> str:
        data = {**asdict(self), "status": self.status.value, "exit_code": self.exit_code}
        return json.dumps(data, sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LegResult:
        """Parse a status file; unknown keys (a newer writer) are ignored, a bad status is an error."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a status record is a JSON object")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = LegState(values.get("status"))
        if values["status"] not in (LegState.OK, LegState.DEGRADED, LegState.FAILED):
            raise ValueError(f"status {values['status']} is not an attempt's outcome")
        return cls(**values)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def require_keys(env: Mapping[str, str]) -> tuple[Credentials, Credentials]:
    """Gateway and search credentials, checked (`environment`), or a clear error before any network call."""
    return environment.require(env, environment.OPENROUTER), environment.require(env, environment.TAVILY)


def leg_input_hash(leg: Leg, settings: Settings) -> str:
    words, budget, search = effective(leg.topic, settings)
    return input_hash(topic_sha256=leg.topic_file.raw_sha256, model=leg.route.model, provider=leg.route.provider,
                      words=words, budget=budget, search=search)


class _TraceWriter:
    """Appends redacted JSON lines to the leg's trace; starts a fresh file per run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")

    def __call__(self, event: dict[str, Any]) -> None:
        # a full or read-only disk: the trace is an artefact; the leg's outcome is what matters
        with contextlib.suppress(OSError):
            append_line(self.path, redact(json.dumps({"at": _now(), **event}, sort_keys=True, default=str)))


def run_leg(repo: Path, settings: Settings, leg: Leg, *, env: Mapping[str, str] | None = None, cycle: str,
            run_url: str | None = None, retry: RetryPolicy | None = None,
            progress: Callable[[dict[str, Any]], None] | None = None,
            clock: Callable[[], float] | None = None) -> LegResult:
    """Run one leg and write its files. Raises only for bad input (missing keys); failures are results.

    `retry` (its `sleep` too) applies to both services; `clock` is the monotonic clock the time cap is
    measured on. Both exist so tests can drive back-off and time caps without waiting.
    """
    env = os.environ if env is None else env
    gateway_creds, search_creds = require_keys(env)
    register_env(env)  # keys passed in a mapping (not os.environ) are redacted too
    words, budget, search_settings = effective(leg.topic, settings)
    started = _now()
    result = LegResult(stem=leg.stem, topic=leg.topic.id, model=leg.route.model, family=leg.family,
                       status=LegState.FAILED, input_hash=leg_input_hash(leg, settings), cycle=cycle,
                       started_at=started)
    trace_path = confined(repo, leg.trace_relpath(settings))
    trace = _TraceWriter(trace_path)
    spent: list[float] = []  # every call's cost as it happens: counted even if the researcher crashes

    def traced(event: dict[str, Any]) -> None:
        if event.get("event") == "call" and isinstance(event.get("record"), dict):
            spent.append(float(event["record"].get("cost_usd") or 0.0))
        trace(event)
        if progress is not None:
            progress({"leg": leg.stem, **event})

    spec = LegSpec(topic_id=leg.topic.id, title=leg.topic.title, scope=leg.topic.scope, model=leg.route.model,
                   provider=leg.route.provider, session_id=f"{cycle}:{leg.stem}", words=words, budget=budget)
    try:
        with Gateway(api_key=gateway_creds.key, base_url=gateway_creds.base_url,
                     settings=settings.gateway, retry=retry) as gateway:
            service = settings.search_service
            tools = SearchTools(api_key=search_creds.key, base_url=search_creds.base_url,
                                settings=search_settings, topic_hint=f"{leg.topic.title} {leg.topic.scope}"[:600],
                                retries=service.max_retries, timeout_s=service.timeout_s,
                                backoff_base_s=service.backoff_base_s, backoff_max_s=service.backoff_max_s,
                                sleep=retry.sleep if retry is not None else time.sleep)
            outcome = Researcher(gateway, tools, spec, trace=traced, clock=clock or time.monotonic).run()
    except MissingKey:
        raise
    except Exception as exc:  # a bug or an unexpected client failure: the leg fails, loudly, others go on
        result.error = redact(f"{type(exc).__name__}: {exc}")
        result.reasons = ["internal error; see the trace"]
        result.finished_at = _now()
        result.cost_usd = round(sum(spent), 6)
        result.calls = len(spent)
        trace({"event": "crash", "error": result.error})
        _write_status(repo, settings, leg, result, quiet=True)
        return result

    records = outcome.records
    verdict = route.leg_verdict(r.verdict for r in records)
    result.route = verdict
    result.route_verified = route.is_verified(verdict)
    result.calls = len(records)
    result.cost_usd = round(sum(r.cost_usd for r in records), 6)
    reasons = list(outcome.reasons)
    stats = tools.stats
    service_errors = {k: v for k, v in stats.error_kinds.items() if k not in MODEL_ERROR_KINDS}
    if service_errors:
        kinds = ", ".join(f"{k}×{v}" for k, v in sorted(service_errors.items()))
        reasons.append(f"search service errors reached the researcher ({kinds})")
    if stats.searches and stats.empty_searches == stats.searches:
        reasons.append(f"all {stats.searches} search(es) returned no results")
    if stats.extracts and not any(s.extracted for s in tools.registry.all()):
        reasons.append("no page could be read in full (every extraction failed); the report rests on search "
                       "snippets")

    if outcome.draft is None or not outcome.draft.strip():
        result.reasons = reasons
        stop = f"no report was produced: {outcome.reasons[-1]}" if outcome.reasons else "no report was produced"
        result.error = redact(outcome.failure or stop)
        result.finished_at = _now()
        _write_status(repo, settings, leg, result, quiet=True)
        return result

    final = finalize_citations(outcome.draft, tools.registry)
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
    if not words.min <= words_count <= words.max and not any("band" in r for r in reasons):
        reasons.append(f"{words_count} words, outside the {words.min}–{words.max} band")
    if not final.sources:
        result.reasons = reasons
        result.error = "the report cites no retrieved source; an unsupported report is not written"
        result.finished_at = _now()
        _write_status(repo, settings, leg, result, quiet=True)
        return result

    status = LegState.DEGRADED if reasons else LegState.OK
    finished = _now()
    meta = ReportMeta(
        topic=leg.topic.id, title=leg.topic.title, requested_model=leg.route.model, family=leg.family,
        served_models=sorted({r.served_model for r in records if r.served_model}),
        served_providers=sorted({r.served_provider for r in records if r.served_provider}),
        route=verdict, route_verified=result.route_verified, calls=len(records),
        generation_ids=[r.generation_id for r in records if r.generation_id],
        status=status.value, words=words_count,
        usage=_usage(records),
        sources=[SourceEntry(id=s.id, url=s.url, title=s.title) for s in final.sources],
        started_at=started, finished_at=finished,
        requested_provider=leg.route.provider, rationale=leg.route.rationale, status_reasons=reasons,
        word_band={"min": words.min, "max": words.max}, citations_dropped=final.dropped_citations,
        links_removed=final.unlinked_urls,
        search={"searches": stats.searches, "extracts": stats.extracts, "retrieved": len(tools.registry),
                "tool_errors": stats.errors},
        prompt_version=PROMPT_VERSION, input_hash=result.input_hash, cycle=cycle, run_url=run_url,
    )
    report_rel = leg.report_relpath(settings)
    calls_text = "".join(redact(r.to_json()) + "\n" for r in records)
    report_text = render_report(meta, final.body, final.sources, clean=redact)
    result.status = status
    result.reasons = reasons
    result.report = report_rel
    result.words = words_count
    result.sources = len(final.sources)
    result.finished_at = finished
    result.body_sha256 = body_sha256_of(report_text)
    try:
        write_unit(repo, settings.build_dir, leg.stem,
                   [FileWrite(leg.calls_relpath(settings), calls_text), FileWrite(report_rel, report_text)],
                   status=FileWrite(leg.status_relpath(settings), redact(result.to_json())))
    except UnitNotWritten as exc:
        _failed_write(result, str(exc))
        trace({"event": "write_failed", "error": result.error})
        _write_status(repo, settings, leg, result, quiet=True)
    except UnitPending as exc:
        _failed_write(result, str(exc))
        trace({"event": "write_pending", "error": result.error})
    return result


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


def _write_status(repo: Path, settings: Settings, leg: Leg, result: LegResult, *, quiet: bool = False) -> None:
    """Write the status file. `quiet`: a full or read-only disk may refuse it too; the result still
    reaches the caller (and the run summary), the previous status file stays."""
    try:
        write_atomic(confined(repo, leg.status_relpath(settings)), redact(result.to_json()))
    except OSError:
        if not quiet:
            raise


def read_status(repo: Path, settings: Settings, leg: Leg) -> LegResult | None:
    path = repo / leg.status_relpath(settings)
    try:
        return LegResult.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None
