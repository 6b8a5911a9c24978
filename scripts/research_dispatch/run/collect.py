"""Move leg outputs between CI jobs without trusting them.

A research job processes untrusted web text and model output, so what it uploads is untrusted too.
`export_leg` copies a leg's files into a folder (the artifact); `collect` brings artifacts back into a
repository, but only at the paths computed from the plan, only for planned legs, and only after each
file parses as what it claims to be (report front matter matching its leg, call records, evidence lines
whose hashes match their text, a status record). Anything else in the folder is ignored and reported.
Symlinks are never followed; a FIFO, a device or a directory at a leg's path is refused by name (files are
opened without blocking and checked to be regular files: `fsio.read_text_strict`), never a hang.

**A leg's unit, all or none.** A report, its call log and its evidence file travel together
(`leg/files.py`): they are imported together — as one unit on disk, through the same journal — or not at
all, and only when they agree: the call log records exactly the calls the report's front matter names
(its `generation_ids` and `calls`), and the evidence file is the one whose sha256 the report names
(`evidence_sha256`; a report written before evidence files existed names none and comes without one). So
an artifact cannot slip an edited evidence file (or call log) in beside an older report already in the
repository: a unit that is incomplete or does not agree is refused, file by file, saying why, and the
repository keeps what it had. The leg's status file describes the unit and is refused with it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import BadInput, DispatchError
from research_dispatch.core.fsio import confined, read_text_strict, write_atomic
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.evidence import MAX_EVIDENCE_BYTES, parse_evidence, sha256_text
from research_dispatch.leg.files import FileWrite, write_unit
from research_dispatch.leg.report import MAX_REPORT_BYTES, parse_report_text
from research_dispatch.leg.status import MAX_STATUS_BYTES, LegResult
from research_dispatch.leg.verify import MAX_CALLS_BYTES, parse_call_record
from research_dispatch.synthesis.write.ledger import UNIT_JOURNAL, Ledger
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
    try:
        return read_text_strict(path, display=path.name, max_bytes=limit, allow_empty=True)
    except BadInput as exc:
        raise ValueError(str(exc).removeprefix(f"{path.name}: ")) from None


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
    """Import the synthesis outputs (document, ledger, call log, methodology table) at their paths, as one
    unit like the synthesis writes them: all of them, or none when one is refused or the document, the
    ledger or the call log is missing (a document beside another run's ledger would pass for a hand edit)."""
    texts: dict[str, str] = {}
    for rel in settings.synthesis_relpaths():
        source = incoming / rel
        if not source.exists() and not source.is_symlink():
            result.missing.append(rel)
            continue
        try:
            texts[rel] = _read(source, MAX_REPORT_BYTES * 4, incoming)
            _validate_synthesis(rel, texts[rel], repo, settings)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            texts.pop(rel, None)
            result.rejected.append(f"{rel}: {exc}")
    core = (settings.document_relpath, settings.ledger_relpath, settings.synthesis_calls_relpath)
    refused = [rel for rel in settings.synthesis_relpaths() if rel not in texts and rel not in result.missing]
    absent = [rel for rel in core if rel in result.missing]
    if texts and not refused and len(absent) == len(core):
        # no synthesis at all (its job failed before writing one): the reports still publish, and the PR says
        # the synthesis is missing; a methodology table alone is not imported, and that is no refusal
        result.ignored += [f"{rel}: not imported: the synthesis is not in the artifact (no document, ledger or "
                           "call log)" for rel in texts]
        return
    if texts and (refused or absent):
        why = f"{refused[0]} is refused" if refused else f"{absent[0]} is not in the artifact"
        result.rejected += [f"{rel}: not imported: {why} (the synthesis' files are imported together or not at all)"
                            for rel in texts]
        return
    if texts:
        try:
            write_unit(repo, settings.build_dir, UNIT_JOURNAL, [FileWrite(rel, text) for rel, text in texts.items()],
                       what="the imported synthesis")
        except DispatchError as exc:
            result.rejected.append(str(exc))
            return
        result.imported += list(texts)


_LIMITS = {"report": MAX_REPORT_BYTES, "calls": MAX_CALLS_BYTES, "evidence": MAX_EVIDENCE_BYTES,
           "status": MAX_STATUS_BYTES, "trace": MAX_TRACE_BYTES}
UNIT_KINDS = ("calls", "evidence", "report")
"""The kinds written as one unit, in `leg/files.write_unit` order (companions first, the report last)."""


def _disagreement(texts: dict[str, str]) -> str | None:
    """Why a leg's report, call log and evidence file (all valid on their own) are not one unit, or None."""
    if "report" not in texts:
        return "there is no report beside it in the artifact (a report, its call log and its evidence file are " \
               "imported together or not at all)"
    report = parse_report_text(texts["report"], display="report")
    meta = report.meta
    if "calls" not in texts:
        return "the report's call log is not in the artifact"
    records = [_call_line(line, number) for number, line in enumerate(texts["calls"].splitlines(), start=1)
               if line.strip()]
    if [r.generation_id for r in records if r.generation_id] != list(meta.generation_ids) or \
            len(records) != meta.calls:
        return "the call log does not record the calls the report names (generation_ids, calls)"
    if meta.evidence_sha256 is None:
        return "an evidence file comes with a report that names no evidence_sha256" if "evidence" in texts else None
    if "evidence" not in texts:
        return "the report's evidence file is not in the artifact"
    if sha256_text(texts["evidence"]) != meta.evidence_sha256:
        return "the evidence file is not the one written with the report (its sha256 is not evidence_sha256)"
    return None


def _collect_leg(repo: Path, settings: Settings, incoming: Path, leg: Leg, result: CollectResult) -> None:
    """One leg: each file read and validated on its own, then the unit checked and imported as one."""
    texts: dict[str, str] = {}
    refused: dict[str, str] = {}
    for kind, rel in zip(LEG_KINDS, leg_files(leg, settings), strict=True):
        source = incoming / rel
        if not source.exists() and not source.is_symlink():
            continue
        try:
            texts[kind] = _read(source, _LIMITS[kind], incoming)
            _validate(kind, texts[kind], leg, rel)
        except (ValueError, TypeError, UnicodeDecodeError, BadInput) as exc:
            texts.pop(kind, None)
            refused[kind] = f"{rel}: {exc}"
    result.rejected += refused.values()
    rels = dict(zip(LEG_KINDS, leg_files(leg, settings), strict=True))
    unit = [kind for kind in UNIT_KINDS if kind in texts]
    broken = next((rels[kind] for kind in UNIT_KINDS if kind in refused), None)
    why = (f"{broken} is refused (a report, its call log and its evidence file are imported together or not at all)"
           if broken is not None else _disagreement(texts) if unit else None)
    if why is not None:
        result.rejected += [f"{rels[kind]}: not imported: {why}" for kind in unit]
        if "status" in texts and ("report" in texts or "report" in refused):
            result.rejected.append(f"{rels['status']}: not imported: it describes the refused report")
            del texts["status"]
        unit = []
    elif unit:
        try:
            write_unit(repo, settings.build_dir, leg.stem, [FileWrite(rels[kind], texts[kind]) for kind in unit])
        except DispatchError as exc:
            result.rejected.append(f"{leg.stem}: {exc}")
            return
        result.imported += [rels[kind] for kind in unit]
    for kind in ("status", "trace"):
        if kind in texts:
            write_atomic(confined(repo, rels[kind]), texts[kind])
            result.imported.append(rels[kind])
    if "report" not in unit:
        result.missing.append(leg.stem)


def collect(repo: Path, settings: Settings, incoming: Path, legs: list[Leg], *,
            synthesis: bool = False) -> CollectResult:
    """Import planned legs' files from `incoming` into their computed paths (each leg's report, call log and
    evidence file as one unit: the module docstring)."""
    if not incoming.is_dir():
        raise BadInput("not a directory", path=str(incoming))
    result = CollectResult()
    expected: set[Path] = set()
    for leg in legs:
        expected |= {incoming / rel for rel in leg_files(leg, settings)}
        _collect_leg(repo, settings, incoming, leg, result)
    if synthesis:
        collect_synthesis(repo, settings, incoming, result)
        expected |= {incoming / rel for rel in settings.synthesis_relpaths()}
    for path in sorted(incoming.rglob("*")):
        if (path.is_file() or path.is_symlink()) and path not in expected:
            result.ignored.append(path.relative_to(incoming).as_posix())
    return result
