"""Move leg outputs between CI jobs without trusting them.

A research job processes untrusted web text and model output, so what it uploads is untrusted too.
`export_leg` copies a leg's files into a folder (the artifact); `collect` brings artifacts back into a
repository, but only at the paths computed from the plan, only for planned legs, and only after each
file parses as what it claims to be (report front matter matching its leg, call records, evidence lines
whose hashes match their text, a status record). Anything else in the folder is ignored and reported.
Symlinks are never followed.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.evidence import MAX_EVIDENCE_BYTES, parse_evidence
from research_dispatch.leg.report import MAX_REPORT_BYTES, parse_report_text
from research_dispatch.leg.status import MAX_STATUS_BYTES, LegResult
from research_dispatch.leg.verify import MAX_CALLS_BYTES, parse_call_record
from research_dispatch.synthesis.write.ledger import Ledger
from research_dispatch.synthesis.write.methodology import END, START

MAX_TRACE_BYTES = 64 * 1024 * 1024


LEG_KINDS = ("report", "calls", "evidence", "status", "trace")


def leg_files(leg: Leg, settings: Settings) -> list[str]:
    """Repository-relative paths a leg may produce, one per kind of `LEG_KINDS`."""
    return [leg.report_relpath(settings), leg.calls_relpath(settings), leg.evidence_relpath(settings),
            leg.status_relpath(settings), leg.trace_relpath(settings)]


def export_leg(repo: Path, settings: Settings, leg: Leg, destination: Path) -> list[str]:
    """Copy the files a leg produced into destination/, keeping repository-relative paths."""
    copied = []
    for rel in leg_files(leg, settings):
        source = repo / rel
        if source.is_file() and not source.is_symlink():
            target = destination / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            copied.append(rel)
    return copied


@dataclass
class CollectResult:
    imported: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def _read(path: Path, limit: int, root: Path) -> str:
    if path.is_symlink() or root.resolve() not in path.resolve().parents:
        raise ValueError("is a symlink or resolves outside the incoming folder")
    size = path.stat().st_size
    if size > limit:
        raise ValueError(f"{size} bytes exceeds the {limit}-byte limit")
    return path.read_bytes().decode("utf-8")


def _validate(kind: str, text: str, leg: Leg, display: str) -> None:
    if kind == "report":
        report = parse_report_text(text, display=display)
        if report.meta.topic != leg.topic.id or report.meta.requested_model != leg.route.model:
            raise ValueError(f"front matter names {report.meta.topic}/{report.meta.requested_model}, "
                             f"expected {leg.topic.id}/{leg.route.model}")
    elif kind == "calls":
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                record = _call_line(line, number)
                if record.requested_model != leg.route.model:
                    raise ValueError(f"line {number} requested {record.requested_model}")
    elif kind == "evidence":
        parse_evidence(text)  # every line, strictly: a damaged one is refused, naming it
    elif kind == "status":
        status = LegResult.from_json(text)
        if status.stem != leg.stem or status.model != leg.route.model:
            raise ValueError("status record is for another leg")
    elif kind == "trace":
        for line in text.splitlines()[:5]:
            json.loads(line)


def _call_line(line: str, number: int) -> CallRecord:
    try:
        return parse_call_record(line)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"line {number} is not a call record ({exc})") from None


def _outside_table(text: str) -> str:
    """The methodology prose: everything but the generated dispatch table."""
    start, end = text.find(START), text.find(END)
    return text if start < 0 or end < start else text[:start] + text[end + len(END):]


def _validate_synthesis(rel: str, text: str, repo: Path, settings: Settings) -> None:
    if "\x00" in text:
        raise ValueError("contains NUL bytes")
    if rel == settings.ledger_relpath:
        Ledger.model_validate(json.loads(text))
    elif rel == settings.synthesis_calls_relpath:
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                _call_line(line, number)
    elif rel == settings.methodology_path:
        current = repo / rel
        if current.is_file() and _outside_table(current.read_text(encoding="utf-8")) != _outside_table(text):
            raise ValueError("changes the methodology prose; only the dispatch table may be regenerated")


def collect_synthesis(repo: Path, settings: Settings, incoming: Path, result: CollectResult) -> None:
    """Import the synthesis outputs (document, ledger, call log, methodology table) at their paths."""
    for rel in settings.synthesis_relpaths():
        source = incoming / rel
        if not source.exists() and not source.is_symlink():
            result.missing.append(rel)
            continue
        try:
            text = _read(source, MAX_REPORT_BYTES * 4, incoming)
            _validate_synthesis(rel, text, repo, settings)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            result.rejected.append(f"{rel}: {exc}")
            continue
        write_atomic(confined(repo, rel), text)
        result.imported.append(rel)


def collect(repo: Path, settings: Settings, incoming: Path, legs: list[Leg], *,
            synthesis: bool = False) -> CollectResult:
    """Import planned legs' files from `incoming` into their computed paths."""
    if not incoming.is_dir():
        raise BadInput("not a directory", path=str(incoming))
    result = CollectResult()
    expected: set[Path] = set()
    for leg in legs:
        kinds = zip(LEG_KINDS, leg_files(leg, settings), strict=True)
        found_report = False
        for kind, rel in kinds:
            source = incoming / rel
            expected.add(source)
            if not source.exists() and not source.is_symlink():
                continue
            limit = {"report": MAX_REPORT_BYTES, "calls": MAX_CALLS_BYTES, "evidence": MAX_EVIDENCE_BYTES,
                     "status": MAX_STATUS_BYTES, "trace": MAX_TRACE_BYTES}[kind]
            try:
                text = _read(source, limit, incoming)
                _validate(kind, text, leg, rel)
            except (ValueError, TypeError, UnicodeDecodeError, BadInput) as exc:
                result.rejected.append(f"{rel}: {exc}")
                continue
            write_atomic(confined(repo, rel), text)
            result.imported.append(rel)
            found_report = found_report or kind == "report"
        if not found_report:
            result.missing.append(leg.stem)
    if synthesis:
        collect_synthesis(repo, settings, incoming, result)
        expected |= {incoming / rel for rel in settings.synthesis_relpaths()}
    for path in sorted(incoming.rglob("*")):
        if (path.is_file() or path.is_symlink()) and path not in expected:
            result.ignored.append(path.relative_to(incoming).as_posix())
    return result
