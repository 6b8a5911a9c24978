"""Replaying structured answers: the build cache first, the previous ledger second.

Keys are hashes of the exact request (model, prompt version, messages), so a hit is by construction
the answer to the same question: an unchanged report costs no extraction call, an unchanged batch no
judge call, an unchanged citation (claim quote, passages shown, citation judge) no check call.
Entries live in `build/synthesis-cache/{extract,judge,cite}/<sha256>.json` (not committed); the
previous `framework/claims.json` holds the same answers with their request keys, which covers a fresh
checkout (CI) where `build/` is empty. Replayed answers are validated again exactly like fresh ones
(a replayed citation verdict is decided again by code against the passage).

**An answer replays only with the call that produced it.** When an answer is kept, the hash of its
request key and its answer (`answer_sha256`) is written onto the call records it came from
(`ANSWERS_FIELD`, in place, so the ledger written from the same records carries it too). A replayed
answer must be named so by one of its own call records; an answer edited in `framework/claims.json` (a
judge's verdict rewritten to flip a citation to `supported`) no longer is, and it is asked again — a
warning names where, never a silent replay with no call behind it. A cache entry or ledger written before
this rule has no such hashes at all: its answers are asked again once, said in one warning.

A damaged entry (not JSON, wrong types, truncated, answers that no longer validate, calls that are not
call records) is a miss, never an error: the cache only saves money. It is reported once as a warning
naming the file and the field, and the answer is asked for again. So is an entry that is not a regular
file (a FIFO would block the read for ever, a directory is not an entry) or is larger than
`MAX_ENTRY_BYTES` (never read whole). A cache entry that cannot be *written* (a full disk, a read-only
build directory) is a warning too, never the end of `synthesize` after the calls it paid for: the
answer is in the ledger the synthesis writes, and the next run replays it from there.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import confined, read_text_strict, write_atomic
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.synthesis.align.judge import Judgement
from research_dispatch.synthesis.check.citations import Verdicted
from research_dispatch.synthesis.extract.claims import Extraction, Malformed, NotAFinding
from research_dispatch.synthesis.write.ledger import REPLAYABLE_SCHEMAS, SCHEMA

_KEY = re.compile(r"^[0-9a-f]{64}$")
ANSWERS_FIELD = "answers_sha256"
"""The key, on a call record kept with an answer (cache entry, ledger), of the sorted hashes of the answers
that call produced (`answer_sha256`)."""
MAX_ENTRY_BYTES = 16 * 1024 * 1024
"""The largest cache entry read: an answer and its call records are tens of kilobytes; anything near this
is damage, refused without reading it."""
_EXTRACTED_FIELDS = ("statement", "layer", "stance", "decision", "pick", "alternatives", "condition", "position",
                     "units", "quote", "section", "sources", "confidence", "position_check")


class _NotFinding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    statement: str
    reason: str


class _JudgeEntry(BaseModel):
    """A build-cache (or ledger) entry: the request's key, the answer (validated separately, by its own
    model) and the calls it came from. Judgements and citation checks are stored as exactly this."""

    model_config = ConfigDict(extra="ignore")

    key: str
    answer: dict[str, Any]
    calls: list[dict[str, Any]] = Field(default_factory=list)


class _ExtractEntry(_JudgeEntry):
    """An extraction entry also keeps what cleaning dropped, so a replay is the same."""

    dropped_citations: int = Field(0, ge=0)
    not_findings: list[_NotFinding] = Field(default_factory=list)
    malformed: list[_NotFinding] = Field(default_factory=list)


_Entry = TypeVar("_Entry", bound=_JudgeEntry)
_Answer = TypeVar("_Answer")


@dataclass
class CachedExtraction:
    extraction: Extraction
    dropped_citations: int
    not_findings: list[NotAFinding]
    calls: list[dict[str, Any]]
    malformed: list[Malformed]


def _problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"field {'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"


def _valid_calls(calls: list[dict[str, Any]]) -> None:
    """Every replayed call must still be a call record: the call log is written from them."""
    for number, call in enumerate(calls):
        try:
            CallRecord.from_dict(call)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"field calls.{number}: not a call record ({type(exc).__name__})") from None


def answer_sha256(key: str, answer: dict[str, Any]) -> str:
    """The hash that binds an answer to its request: the key and the answer as kept, canonical JSON."""
    text = json.dumps({"answer": answer, "key": key}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _bind(calls: list[dict[str, Any]], key: str, answer: dict[str, Any]) -> None:
    """Write the answer's hash onto each call record it came from (in place: see the module docstring)."""
    digest = answer_sha256(key, answer)
    for call in calls:
        known = call.get(ANSWERS_FIELD)
        call[ANSWERS_FIELD] = sorted({*(known if isinstance(known, list) else []), digest})


def _produced(calls: list[dict[str, Any]], key: str, answer: dict[str, Any]) -> bool:
    """Does one of these call records say it produced this answer to this request?"""
    digest = answer_sha256(key, answer)
    return any(isinstance(call.get(ANSWERS_FIELD), list) and digest in call[ANSWERS_FIELD] for call in calls)


class SynthesisCache:
    """Content-addressed answers of extraction and judge calls."""

    def __init__(self, repo: Path, settings: Settings, previous: dict[str, Any] | None) -> None:
        self.repo = repo
        self.root = f"{settings.build_dir}/synthesis-cache"
        self.warnings: list[str] = []
        self._unwritable = False
        self._unbound = False
        self._ledger_extractions: dict[str, dict[str, Any]] = {}
        self._ledger_judgements: dict[str, dict[str, Any]] = {}
        self._ledger_citations: dict[str, dict[str, Any]] = {}
        # the same answers by (report stem, key): what the previous ledger recorded for that very report
        self._own_extractions: dict[tuple[str, str], dict[str, Any]] = {}
        self._own_citations: dict[tuple[str, str], dict[str, Any]] = {}
        if previous is not None and previous.get("schema") in REPLAYABLE_SCHEMAS:  # validated by read_previous
            self._index_ledger(previous, extractions=previous["schema"] == SCHEMA)

    def _index_ledger(self, ledger: dict[str, Any], *, extractions: bool) -> None:
        """Index the ledger's answers by request key. An upgraded @2 ledger gives judgements only: its
        extractions answered an older prompt and carry no quotes (their keys could not match anyway)."""
        claims_by_report: dict[str, list[dict[str, Any]]] = {}
        for claim in ledger["claims"]:
            claims_by_report.setdefault(claim["report"], []).append(claim)
        for report in ledger["reports"] if extractions else []:
            extraction = report["extraction"]
            if extraction["status"] != "ok":
                continue
            claims = [{k: c.get(k) for k in _EXTRACTED_FIELDS if k in c}
                      for c in claims_by_report.get(report["stem"], [])]
            entry = {"key": extraction["key"], "answer": {"claims": claims},
                     "dropped_citations": extraction["dropped_citations"], "not_findings": extraction["not_findings"],
                     "malformed": extraction.get("malformed", []), "calls": extraction["calls"]}
            self._ledger_extractions[extraction["key"]] = entry
            self._own_extractions[(report["stem"], extraction["key"])] = entry
        for batch in ledger["batches"]:
            if batch["status"] == "ok" and isinstance(batch.get("judgement"), dict):
                self._ledger_judgements[batch["key"]] = {"key": batch["key"], "answer": batch["judgement"],
                                                         "calls": batch["calls"]}
        for check in ledger["citation_checks"]:
            for item in check["items"]:
                if item["key"] and item["answer"] is not None:
                    calls = [check["calls"][i] for i in item["calls"] if 0 <= i < len(check["calls"])]
                    entry = {"key": item["key"], "answer": item["answer"], "calls": calls}
                    self._ledger_citations[item["key"]] = entry
                    self._own_citations[(check["report"], item["key"])] = entry

    # -- files -------------------------------------------------------------------------------------
    def _rel(self, kind: str, key: str) -> str:
        return f"{self.root}/{kind}/{key}.json"

    def _read(self, kind: str, key: str) -> Any:
        if not _KEY.fullmatch(key):
            return None
        path = confined(self.repo, self._rel(kind, key))
        if not path.exists():
            return None
        try:
            return json.loads(read_text_strict(path, display=self._rel(kind, key), max_bytes=MAX_ENTRY_BYTES))
        except BadInput as exc:
            self._damaged(kind, key, str(exc).removeprefix(f"{self._rel(kind, key)}: "))
            return None
        except ValueError as exc:
            self._damaged(kind, key, f"unreadable ({type(exc).__name__})")
            return None

    def _damaged(self, kind: str, key: str, problem: str, *, where: str | None = None) -> None:
        self.warnings.append(f"{where or self._rel(kind, key)}: damaged synthesis cache entry ({problem}); "
                             "ignored, the answer is asked for again")

    def _older(self, where: str | None) -> None:
        """An answer kept before answers were bound to their calls: asked again, said once (not per entry)."""
        if not self._unbound:
            self._unbound = True
            self.warnings.append(f"{where or self.root}: answers kept before they were bound to their calls "
                                 "(answers_sha256) are asked again once; their new answers replay from then on")

    def _write(self, kind: str, key: str, payload: dict[str, Any]) -> None:
        """Keep an answer; a write the disk refuses is a warning (the module docstring), never an error."""
        if not _KEY.fullmatch(key):
            return
        try:
            write_atomic(confined(self.repo, self._rel(kind, key)),
                         json.dumps({"key": key, **payload}, sort_keys=True, ensure_ascii=False))
        except OSError as exc:
            if not self._unwritable:  # said once: a full disk refuses every later entry too
                self._unwritable = True
                self.warnings.append(f"{self._rel(kind, key)}: could not write the synthesis cache "
                                     f"({exc.strerror or type(exc).__name__}); answers not cached are kept in the "
                                     "claims ledger, and the next run replays them from there")

    def _replayed(self, kind: str, key: str, ledger: dict[str, dict[str, Any]], entry_type: type[_Entry],
                  answer_of: Callable[[_Entry], _Answer],
                  own: dict[str, Any] | None = None) -> tuple[_Entry, _Answer] | None:
        """The first usable entry for `key` — the committed ledger's for this very report (`own`), the
        build cache's, then the committed ledger's for any report — and its validated answer; a damaged
        one is a warning naming where it is, and the next source is tried.

        Why the report's own entry first: two reports may ask one question (the same request key: two
        legs that wrote alike), each answered by its own call. The build cache keeps one answer per key,
        so replaying from it would give both reports the same call, and an unchanged re-run would rewrite
        the ledger and the call log (and the cost the PR shows) though no call was made."""
        ledger_name = "framework/claims.json"
        anyone = ledger.get(key)
        for raw, where in ((own, ledger_name), (self._read(kind, key), None),
                           (None if anyone is own else anyone, ledger_name)):
            if raw is None:
                continue
            try:
                entry = entry_type.model_validate(raw)
                if entry.key != key:
                    raise ValueError("field key: another request's answer")
                answer = answer_of(entry)
                _valid_calls(entry.calls)
                if not _produced(entry.calls, key, entry.answer):
                    if any(ANSWERS_FIELD in call for call in entry.calls):
                        raise ValueError("field answer: no call record of this entry produced this answer (edited "
                                         "after it was kept)")
                    self._older(where)
                    continue
            except ValidationError as exc:
                self._damaged(kind, key, _problem(exc), where=where)
                continue
            except ValueError as exc:
                self._damaged(kind, key, str(exc), where=where)
                continue
            return entry, answer
        return None

    # -- extraction --------------------------------------------------------------------------------
    def extraction(self, key: str, report: str = "") -> CachedExtraction | None:
        """The cleaned claims as an Extraction, what cleaning dropped, and the calls; or None. `report`:
        the stem asking, whose own entry in the previous ledger comes first (`_replayed`)."""
        found = self._replayed("extract", key, self._ledger_extractions, _ExtractEntry,
                               lambda entry: Extraction.model_validate(entry.answer),
                               self._own_extractions.get((report, key)))
        if found is None:
            return None
        entry, extraction = found
        return CachedExtraction(extraction=extraction, dropped_citations=entry.dropped_citations,
                                not_findings=[NotAFinding(n.statement, n.reason) for n in entry.not_findings],
                                calls=list(entry.calls),
                                malformed=[Malformed(m.statement, m.reason) for m in entry.malformed])

    def store_extraction(self, key: str, claims: list[dict[str, Any]], dropped: int, not_findings: list[NotAFinding],
                         calls: list[dict[str, Any]], malformed: list[Malformed]) -> None:
        """Keep the *cleaned* claims (and the claims dropped as malformed), so a replay from here or from the
        ledger is the same."""
        _bind(calls, key, {"claims": claims})
        self._write("extract", key, {"answer": {"claims": claims}, "calls": calls, "dropped_citations": dropped,
                                     "not_findings": [{"statement": n.statement, "reason": n.reason}
                                                      for n in not_findings],
                                     "malformed": [{"statement": m.statement, "reason": m.reason}
                                                   for m in malformed]})

    # -- judgement ---------------------------------------------------------------------------------
    def judgement(self, key: str, ids: set[str]) -> tuple[Judgement, list[dict[str, Any]]] | None:
        found = self._replayed("judge", key, self._ledger_judgements, _JudgeEntry,
                               lambda entry: Judgement.model_validate(entry.answer, context={"ids": ids}))
        return None if found is None else (found[1], list(found[0].calls))

    def store_judgement(self, key: str, judgement: Judgement, calls: list[dict[str, Any]]) -> None:
        answer = judgement.model_dump(mode="json")
        _bind(calls, key, answer)
        self._write("judge", key, {"answer": answer, "calls": calls})

    # -- citation checks ---------------------------------------------------------------------------
    def citation(self, key: str, report: str = "") -> tuple[Verdicted, list[dict[str, Any]]] | None:
        """A citation judge's answer (call-independent form) and the calls it came from; or None.
        `report`: the stem asking, whose own entry in the previous ledger comes first (`_replayed`)."""
        found = self._replayed("cite", key, self._ledger_citations, _JudgeEntry,
                               lambda entry: Verdicted.from_dict(entry.answer),
                               self._own_citations.get((report, key)))
        return None if found is None else (found[1], list(found[0].calls))

    def store_citations(self, answers: list[tuple[str, Verdicted, list[dict[str, Any]]]]) -> None:
        """Keep each citation judge's answer (call-independent form, by its request key) with the calls it
        came from. One call answers several citations, so every answer is bound to its calls before any
        entry is written: each entry then holds its calls as the ledger does, and a replay writes the same
        bytes."""
        kept = [(key, answer.to_dict(), calls) for key, answer, calls in answers]
        for key, answer, calls in kept:
            _bind(calls, key, answer)
        for key, answer, calls in kept:
            self._write("cite", key, {"answer": answer, "calls": calls})
