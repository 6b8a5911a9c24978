"""The route table: re-check each report's route from its call log (and optionally the gateway).

A report's front matter is a claim; the call log is the evidence. `verify` recomputes every call's
verdict from the logged facts, checks that the front matter agrees with the log (same generation ids,
same requested model, same verdict) and, with `--online`, asks the gateway's `/generation` record
whether the logged model and provider are what it has on file. A disagreement is never resolved in
the report's favour: the worse verdict wins, and the problem is listed.

Calls made through an `openai-compatible` gateway carry only the model the server said it was
(`self_reported`): nothing online can confirm them, so `--online` refuses such a gateway with one clear
line, and such a route counts as verified only when the configuration trusts it (`trust_self_reported`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_dispatch.config.plan import companions
from research_dispatch.core import sanitize
from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import read_text_strict
from research_dispatch.core.tables import Column, console_table
from research_dispatch.gateway import route
from research_dispatch.gateway.protocol import GenerationRecords
from research_dispatch.gateway.provenance import OPENAI_COMPATIBLE, CallRecord
from research_dispatch.leg.evidence import EvidenceCheck
from research_dispatch.leg.evidence import check_file as check_evidence_file
from research_dispatch.leg.report import Report


@dataclass
class RouteRow:
    stem: str
    relpath: str
    topic: str
    requested_model: str
    requested_provider: str | None
    served_models: list[str]
    served_providers: list[str]
    claimed_route: str
    route: str
    status: str
    words: int
    cost_usd: float
    calls: int
    problems: list[str] = field(default_factory=list)
    trust_self_reported: bool = False
    logged_models: list[str] | None = None  # distinct served models in the call log, in call order; None: no log
    evidence: EvidenceCheck | None = None  # the report's citations against its evidence file: warnings only

    @property
    def evidence_warnings(self) -> list[str]:
        """What cannot be checked of the report's citations. Never a route problem: a route is about
        models, and `verified` does not look at these."""
        return self.evidence.warnings if self.evidence is not None else []

    @property
    def verified(self) -> bool:
        return route.is_verified(self.route, trust_self_reported=self.trust_self_reported) and not self.problems


MAX_CALLS_BYTES = 8 * 1024 * 1024  # a call log: ~500 bytes a call; a leg makes tens, a synthesis hundreds


def parse_call_record(line: str) -> CallRecord:
    """One call-log line as a `CallRecord`, every field checked (`records.py`); `ValueError` names the
    field. The log is evidence read back from disk and from CI artifacts: a damaged line must be a
    clear error naming the line and the field, never an exception deep inside the route check. A line
    of an earlier version (without the fields added since) loads with their defaults."""
    return CallRecord.from_json(line)


def load_calls(path: Path, *, display: str | None = None) -> list[CallRecord]:
    """Every record of a call log; a damaged log is `BadInput` naming the file, the line and the field."""
    display = display or path.name
    records: list[CallRecord] = []
    try:
        if path.stat().st_size == 0:
            return records  # no evidence at all: the report's own checks say so (calls differ)
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", path=display) from None
    text = read_text_strict(path, display=display, max_bytes=MAX_CALLS_BYTES)
    return parse_calls(text, display=display)


def parse_calls(text: str, *, display: str) -> list[CallRecord]:
    """Call records from a call log's text (a working-tree file or a blob of the refresh branch)."""
    records: list[CallRecord] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(parse_call_record(line))
        except (ValueError, TypeError) as exc:
            raise BadInput(f"not a call record ({exc})", path=display, field=f"line {number}") from None
    return records


def recheck(record: CallRecord, requested_model: str) -> str:
    """A call's verdict from its logged facts, never better than the verdict logged at call time (an
    aborted attempt stays aborted: it served nothing, so it takes no part in the route)."""
    if record.requested_model != requested_model:
        return "unverified"
    if record.aborted:
        return route.ABORTED
    if record.gateway_kind == OPENAI_COMPATIBLE:
        facts = route.self_reported_verdict(requested_model=requested_model, served_model=record.served_model)
        return route.leg_verdict([facts, record.verdict])
    facts = route.call_verdict(
        requested_model=requested_model, pinned_provider=record.requested_provider,
        served_model=record.served_model, served_provider=record.served_provider,
        metadata_present=record.metadata_present, attempt=record.attempt,
        attempts_recorded=record.attempts_recorded, cached=record.cached, provider_display_names=None)
    return route.leg_verdict([facts, record.verdict])


def online_verdict(data: dict[str, Any], requested_model: str, record: CallRecord) -> tuple[str, list[str]]:
    """The verdict the gateway's generation record supports, and any disagreement with the log."""
    problems: list[str] = []
    served = data.get("model")
    provider = data.get("provider_name")
    responses = data.get("provider_responses") or []
    if data.get("response_cache_source_id"):
        verdict = "cached"
    elif served and not route.same_model(requested_model, str(served)):
        verdict = "model_fallback"
    elif record.requested_provider and isinstance(responses, list) and len(responses) > 1:
        verdict = "provider_fallback"  # without a pin, several attempts are OpenRouter's load balancing
    elif not served or not provider:
        verdict = "unverified"
    else:
        verdict = record.verdict
    if served and record.served_model and str(served) != record.served_model:
        problems.append(f"{record.generation_id}: gateway says model {served}, log says {record.served_model}")
    if provider and record.served_provider and str(provider) != record.served_provider:
        problems.append(f"{record.generation_id}: gateway says provider {provider}, log says {record.served_provider}")
    return verdict, problems


def verify_report(report: Report, *, gateway: GenerationRecords | None = None,
                  trust_self_reported: bool = False) -> RouteRow:
    """The route row of one report. `trust_self_reported` is the configuration's
    `[tool.research-dispatch.gateway] trust_self_reported` (a `self_reported` route counts as verified)."""
    files = companions(report.path.as_posix())
    displayed = companions(report.relpath)
    calls_path = Path(files.calls)
    records = load_calls(calls_path, display=displayed.calls) if calls_path.exists() else None
    row = verify_records(report, records, gateway=gateway, trust_self_reported=trust_self_reported)
    row.evidence = check_evidence_file(report, Path(files.evidence), relpath=displayed.evidence)
    return row


def verify_records(report: Report, records: list[CallRecord] | None, *, gateway: GenerationRecords | None = None,
                   trust_self_reported: bool = False) -> RouteRow:
    """The route row of a report given its call records (None: there is no call log)."""
    meta = report.meta
    row = RouteRow(stem=report.stem, relpath=report.relpath, topic=meta.topic, requested_model=meta.requested_model,
                   requested_provider=meta.requested_provider, served_models=list(meta.served_models),
                   served_providers=list(meta.served_providers), claimed_route=meta.route, route=meta.route,
                   status=meta.status, words=meta.words, cost_usd=meta.usage.cost_usd, calls=meta.calls,
                   trust_self_reported=trust_self_reported)
    if records is None:
        row.route = "unverified"
        row.problems.append("no call log next to the report")
        return row
    row.logged_models = list(dict.fromkeys(r.served_model for r in records if r.served_model))
    verdicts = [recheck(r, meta.requested_model) for r in records]
    logged_ids = [r.generation_id for r in records if r.generation_id]
    if logged_ids != list(meta.generation_ids):
        row.problems.append("front matter generation_ids differ from the call log")
    if len(records) != meta.calls:
        row.problems.append(f"front matter says {meta.calls} calls, the log has {len(records)}")
    if gateway is not None:
        for record in records:
            if record.aborted:
                continue  # its cost was looked up when it was given up; it served nothing to verify
            if record.gateway_kind == OPENAI_COMPATIBLE:
                verdicts.append("unverified")
                row.problems.append(f"{record.generation_id or 'a call'}: made through an openai-compatible "
                                    "gateway, which keeps no /generation record; it cannot be re-checked online")
                continue
            if not record.generation_id:
                verdicts.append("unverified")
                continue
            data = gateway.generation(record.generation_id)
            verdict, problems = online_verdict(data, meta.requested_model, record)
            verdicts.append(verdict)
            row.problems.extend(problems)
    computed = route.leg_verdict(verdicts)
    if computed != meta.route:
        row.problems.append(f"front matter says route {meta.route}, the evidence says {computed}")
    row.route = route.leg_verdict([computed, meta.route])
    return row


def evidence_lines(rows: Iterable[RouteRow]) -> list[str]:
    """One line per evidence warning of each report (`warning: <report>: ...`), sanitised: the URLs
    come from search results."""
    return [f"warning: {row.relpath}: {sanitize.one_line(warning, 600)}"
            for row in rows for warning in row.evidence_warnings]


def markdown_evidence(rows: Iterable[RouteRow]) -> str:
    """The evidence warnings for a job summary, under the route table ("" when there are none)."""
    listed = [(row.relpath, warning) for row in rows for warning in row.evidence_warnings]
    if not listed:
        return ""
    items = "\n".join(f"- `{sanitize.one_line(rel, 200)}`: {sanitize.for_pr_body(sanitize.one_line(w, 600))}"
                      for rel, w in listed)
    return ("**Evidence** — citations that cannot be checked against what the researcher was shown (a warning, "
            "not a route problem):\n\n" + items)


def table_rows(rows: Iterable[RouteRow]) -> list[list[str]]:
    out = []
    for row in rows:
        served = ", ".join(row.served_models) or "—"
        providers = ", ".join(row.served_providers) or "—"
        verdict = row.route + ("" if row.verified else " ⚠")
        out.append([row.topic, row.requested_model, served, providers, verdict, str(row.words),
                    f"${row.cost_usd:.4f}", row.status])
    return out


HEADERS = ["topic", "requested model", "served model", "provider", "route", "words", "cost", "status"]


def markdown_table(rows: Iterable[RouteRow]) -> str:
    def cell(text: str) -> str:
        return sanitize.one_line(text, 120).replace("|", "\\|")

    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for values in table_rows(rows):
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    return "\n".join(lines)


TEXT_COLUMNS = (Column("topic", ident=True), Column("requested", cut_last=True), Column("served", cut_last=True),
                Column("provider"), Column("route", keep=True), Column("words", right=True), Column("cost", right=True),
                Column("status"))


def text_table(rows: Iterable[RouteRow]) -> str:
    """The route table for a log (`plain_table`: every name whole) or, when stdout is a terminal, drawn
    to its width (on a narrow one the topic id shortened first, then provider and model names cut with an
    ellipsis; the route never; a served model that is the requested one reads "(same)", so the requested
    model keeps its room)."""
    body = table_rows(rows)
    terminal = [[*values[:2], "(same)" if values[2] == values[1] else values[2], *values[3:]] for values in body]
    return console_table(TEXT_COLUMNS, HEADERS, body, terminal_rows=terminal)
