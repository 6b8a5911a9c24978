"""The claims ledger, `framework/claims.json` (schema `research-dispatch/claims@1`).

The machine-readable record of a synthesis and the input of the next one's diff:

* `reports` — every report with its file hash, re-checked route, whether it counts towards support,
  and its extraction (cache key, extractor, prompt version, the gateway calls that produced it);
* `claims` — every extracted claim (the extractor's fields, cleaned) with a stable key and its cluster;
* `clusters` — aligned claims with a stable key, status, positions, counted support and excluded reports;
* `divergences` — each divergence with its positions and its "use X today, switch to Y when Z" line;
* `batches` — each judge call: the judge model, whether it is an author's family, the label → report
  map of its anonymisation (for audit), the claim-id map, and its validated answer;
* `legs`, `limitations`, `counts`, `settings`.

Everything is sorted and there is no timestamp except the cycle, so an unchanged re-run writes the
same bytes. Because each report's extraction and each batch's judgement are kept with the request key
that produced them, an unchanged report or batch can be replayed from the committed ledger when the
build cache is gone (e.g. on a fresh CI runner).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "research-dispatch/claims@1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LedgerSource(_Model):
    id: int
    url: str
    title: str


class LedgerExtraction(_Model):
    status: Literal["ok", "failed"]
    key: str
    model: str
    prompt_version: str
    error: str | None = None
    truncated: bool = False
    dropped_citations: int = 0
    calls: list[dict[str, Any]] = Field(default_factory=list)


class LedgerReport(_Model):
    stem: str
    path: str
    topic: str
    title: str
    requested_model: str
    family: str
    served_models: list[str]
    served_providers: list[str]
    route: str
    route_verified: bool
    route_problems: list[str]
    counted: bool
    status: str
    cycle: str | None
    sha256: str
    words: int
    sources: list[LedgerSource]
    extraction: LedgerExtraction
    claims: list[str]


class LedgerClaim(_Model):
    key: str
    report: str
    statement: str
    layer: str
    layer_key: str
    stance: str
    pick: str | None
    pick_key: str | None
    alternatives: list[str]
    condition: str | None
    sources: list[int]
    confidence: str
    cluster: str


class LedgerPosition(_Model):
    label: str
    pick: str | None
    condition: str | None
    claims: list[str]
    reports: list[str]
    families: list[str]
    excluded_reports: list[str]


class LedgerCluster(_Model):
    key: str
    base: str
    layer: str
    layer_key: str
    status: Literal["convergent", "same_family", "divergent", "single_source", "excluded"]
    flagged: bool
    pick: str | None
    pick_key: str | None
    summary: str
    members: list[str]
    positions: list[LedgerPosition]
    reports: list[str]
    families: list[str]
    excluded_reports: list[str]
    batches: list[int]
    unaligned: bool
    divergence: str | None


class LedgerDivergencePosition(_Model):
    cluster: str
    label: str
    pick: str | None
    condition: str | None
    claims: list[str]
    reports: list[str]
    families: list[str]


class LedgerDivergence(_Model):
    key: str
    layer: str
    kind: Literal["contradiction", "picks"]
    line: str
    positions: list[LedgerDivergencePosition]


class LedgerBatch(_Model):
    index: int
    key: str
    status: Literal["ok", "failed"]
    judge_model: str
    judge_is_author: bool
    labels: dict[str, str]
    ids: dict[str, str]
    anchors: list[str]
    error: str | None = None
    judgement: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = Field(default_factory=list)


class LedgerLeg(_Model):
    stem: str
    topic: str
    model: str
    state: str
    detail: str
    report: str


class Ledger(_Model):
    schema_: Literal["research-dispatch/claims@1"] = Field(SCHEMA, alias="schema")
    cycle: str
    framework: str
    settings: dict[str, Any]
    counts: dict[str, Any]
    reports: list[LedgerReport]
    claims: list[LedgerClaim]
    clusters: list[LedgerCluster]
    divergences: list[LedgerDivergence]
    batches: list[LedgerBatch]
    legs: list[LedgerLeg]
    limitations: list[str]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return dump(self.to_dict())


def dump(data: dict[str, Any]) -> str:
    """Canonical text: sorted keys, two-space indent, UTF-8, trailing newline."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def read_previous(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The previous ledger as a dict, or (None, warning) when it is missing, unreadable or not ours.

    The ledger is generated output, so a damaged one is reported and then treated as absent (the diff
    calls everything new) rather than blocking the refresh.
    """
    if not path.exists():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: previous ledger is unreadable ({type(exc).__name__}); diffing against nothing"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None, f"{path.name}: previous ledger has another schema; diffing against nothing"
    return data, None
