"""Replaying structured answers: the build cache first, the previous ledger second.

Keys are hashes of the exact request (model, prompt version, messages), so a hit is by construction
the answer to the same question: an unchanged report costs no extraction call, an unchanged batch no
judge call. Entries live in `build/synthesis-cache/{extract,judge}/<sha256>.json` (not committed); the
previous `framework/claims.json` holds the same answers with their request keys, which covers a fresh
checkout (CI) where `build/` is empty. A damaged entry is a miss, never an error: the cache only saves
money. Replayed answers are validated again exactly like fresh ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from research_dispatch.config import Settings
from research_dispatch.fsio import confined, write_atomic
from research_dispatch.synthesis.align import Judgement
from research_dispatch.synthesis.extract import Extraction

_KEY = re.compile(r"^[0-9a-f]{64}$")


class SynthesisCache:
    """Content-addressed answers of extraction and judge calls."""

    def __init__(self, repo: Path, settings: Settings, previous: dict[str, Any] | None) -> None:
        self.repo = repo
        self.root = f"{settings.build_dir}/synthesis-cache"
        self._ledger_extractions: dict[str, dict[str, Any]] = {}
        self._ledger_judgements: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        self._index_ledger(previous or {})

    def _index_ledger(self, ledger: dict[str, Any]) -> None:
        claims_by_report: dict[str, list[dict[str, Any]]] = {}
        for claim in ledger.get("claims") or []:
            if isinstance(claim, dict):
                claims_by_report.setdefault(str(claim.get("report")), []).append(claim)
        for report in ledger.get("reports") or []:
            extraction = report.get("extraction") if isinstance(report, dict) else None
            if not isinstance(extraction, dict) or extraction.get("status") != "ok":
                continue
            fields = ("statement", "layer", "stance", "pick", "alternatives", "condition", "sources", "confidence")
            claims = [{k: c.get(k) for k in fields} for c in claims_by_report.get(str(report.get("stem")), [])]
            self._ledger_extractions[str(extraction.get("key"))] = {
                "key": extraction.get("key"), "answer": {"claims": claims},
                "dropped_citations": extraction.get("dropped_citations") or 0, "calls": extraction.get("calls") or []}
        for batch in ledger.get("batches") or []:
            if isinstance(batch, dict) and batch.get("status") == "ok" and isinstance(batch.get("judgement"), dict):
                self._ledger_judgements[str(batch.get("key"))] = (batch["judgement"], list(batch.get("calls") or []))

    # -- files -------------------------------------------------------------------------------------
    def _path(self, kind: str, key: str) -> Path:
        return confined(self.repo, f"{self.root}/{kind}/{key}.json")

    def _read(self, kind: str, key: str) -> dict[str, Any] | None:
        if not _KEY.fullmatch(key):
            return None
        try:
            data = json.loads(self._path(kind, key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("key") == key else None

    def _write(self, kind: str, key: str, answer: dict[str, Any], calls: list[dict[str, Any]],
               **extra: Any) -> None:
        if not _KEY.fullmatch(key):
            return
        payload = {"key": key, "answer": answer, "calls": calls, **extra}
        write_atomic(self._path(kind, key), json.dumps(payload, sort_keys=True, ensure_ascii=False))

    # -- extraction --------------------------------------------------------------------------------
    def extraction(self, key: str) -> tuple[Extraction, int, list[dict[str, Any]]] | None:
        """(cleaned claims as an Extraction, citation numbers dropped when cleaning, the calls) or None."""
        for entry in (self._read("extract", key), self._ledger_extractions.get(key)):
            if entry is None:
                continue
            try:
                extraction = Extraction.model_validate(entry.get("answer"))
                dropped = int(entry.get("dropped_citations") or 0)
            except (ValidationError, TypeError, ValueError):
                continue
            return extraction, dropped, list(entry.get("calls") or [])
        return None

    def store_extraction(self, key: str, claims: list[dict[str, Any]], dropped: int,
                         calls: list[dict[str, Any]]) -> None:
        """Keep the *cleaned* claims, so a replay from here or from the ledger is the same."""
        self._write("extract", key, {"claims": claims}, calls, dropped_citations=dropped)

    # -- judgement ---------------------------------------------------------------------------------
    def judgement(self, key: str, ids: set[str]) -> tuple[Judgement, list[dict[str, Any]]] | None:
        candidates = []
        entry = self._read("judge", key)
        if entry is not None:
            candidates.append((entry.get("answer"), entry.get("calls") or []))
        if key in self._ledger_judgements:
            candidates.append(self._ledger_judgements[key])
        for answer, calls in candidates:
            try:
                return Judgement.model_validate(answer, context={"ids": ids}), list(calls)
            except ValidationError:
                continue
        return None

    def store_judgement(self, key: str, judgement: Judgement, calls: list[dict[str, Any]]) -> None:
        self._write("judge", key, judgement.model_dump(mode="json"), calls)
