"""The claims ledger, `framework/claims.json` (schema `research-dispatch/claims@3`).

The machine-readable record of a synthesis and the input of the next one's diff:

* `reports` — every extracted report with its file hash, re-checked route, the families that count for
  it, whether it counts towards support (and why not), and its extraction (cache key, extractor,
  prompt version, the gateway calls that produced it, and the statements dropped as not findings);
* `skipped` — report files the synthesis did not use: outside the plan (`ignored`) or `failed`;
* `claims` — every extracted claim (the extractor's fields, cleaned) with a stable key and its cluster,
  and what code checked (docs/ARCHITECTURE.md, "Evidence and checked claims" — FIXED): the report's `quote`, its
  `section`, its `position`, whether it is `anchored`, and one `citations` entry per cited source;
* `clusters` — claims that agree, with a stable key, status, counted support, excluded reports, the
  clusters the judge set against it, and contrary claims of excluded reports;
* `divergences` — each divergence with its sides (disjoint supporting reports), whether the top is a
  tie, its line, the reports that weigh more than one side, and excluded contrary claims;
* `batches` — each judge call: the judge model, whether it is an author's family, the label → report
  map of its anonymisation (for audit), the claim-id map, and its validated answer;
* `citation_checks` — per report, every citation of every claim: what code decided (`support`) and
  why, the passages shown (by hash), the citation judge's answer, and the calls (so each verdict can
  be audited, and replayed under its request key);
* `legs`, `limitations`, `incomplete` (what this synthesis did not process, e.g. at its time limit),
  `counts`, `settings`.

Everything is sorted and there is no timestamp except the cycle, so an unchanged re-run writes the
same bytes. Because each report's extraction and each batch's judgement are kept with the request key
that produced them, an unchanged report or batch can be replayed from the committed ledger when the
build cache is gone (e.g. on a fresh CI runner).

Versions: @3 (claims carry their quote, section, position, anchoring and checked citations) extends
@2. A previous @2 ledger is upgraded on reading — its claims become unchecked (no quote, not anchored,
no citations), so none of them would count — and is still used for the claim diff, the keys and
replays (an answer is replayed only under its request key, so an older prompt's answer never stands in
for a newer one). @2 (clusters are single positions, divergences link clusters, claims carry the
decision they answer) replaced @1 deliberately. A previous @1 ledger is still read for the claim diff
and for stable keys (its clusters and divergences), but not replayed: its answers came from older
prompts.
A previous ledger that is damaged (not JSON, wrong types, truncated) is reported with the field that
is wrong and then treated as absent — the claim diff says it compares against nothing — because it is
generated output and must not block a refresh.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from research_dispatch.synthesis.common.checked import CitationCheck, Position, Support
from research_dispatch.synthesis.count.classify import Cluster, Divergence, Side
from research_dispatch.synthesis.count.counting import Standing
from research_dispatch.synthesis.extract.position import PositionCheck

SCHEMA: Final = "research-dispatch/claims@3"
UPGRADABLE_SCHEMA: Final = "research-dispatch/claims@2"  # read as @3 with every claim unchecked
REPLAYABLE_SCHEMAS: Final = (SCHEMA, UPGRADABLE_SCHEMA)
UNIT_JOURNAL = ".synthesis"
"""The journal of the synthesis' files, written as one unit (`leg/files.write_unit`) by `synthesize` and by
`collect --synthesis`: a name no leg's stem can have (topic files starting with a dot are not read)."""
LEGACY_SCHEMAS = ("research-dispatch/claims@1",)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LedgerSource(_Model):
    id: int
    url: str
    title: str


class LedgerNotFinding(_Model):
    statement: str
    reason: str


class LedgerExtraction(_Model):
    status: Literal["ok", "failed", "timed_out"]
    key: str
    model: str
    prompt_version: str
    error: str | None = None
    truncated: bool = False
    dropped_citations: int = 0
    not_findings: list[LedgerNotFinding] = Field(default_factory=list)
    malformed: list[LedgerNotFinding] = Field(default_factory=list)  # claims of the answer that did not fit
    calls: list[dict[str, Any]] = Field(default_factory=list)


class LedgerReport(_Model):
    stem: str
    path: str
    topic: str
    title: str
    requested_model: str
    family: str
    families: list[str]
    served_models: list[str]
    served_providers: list[str]
    route: str
    route_verified: bool
    route_problems: list[str]
    counted: bool
    exclusion: str | None
    status: str
    status_reasons: list[str]
    cycle: str | None
    sha256: str
    words: int
    sources: list[LedgerSource]
    extraction: LedgerExtraction
    claims: list[str]
    cost_usd: float = 0.0  # what the leg's research cost (front matter usage.cost_usd)


class LedgerSkipped(_Model):
    stem: str
    path: str
    kind: Literal["ignored", "failed"]
    reason: str


class LedgerCitation(_Model):
    """One `CitationCheck` as written to the ledger; the same rules hold (quote and hash only when verified,
    no url only when phantom), so a hand-edited or damaged ledger cannot carry a verdict code did not check."""

    url: str | None
    support: Support
    quote: str | None
    passage_sha256: str | None

    @model_validator(mode="after")
    def _consistent(self) -> LedgerCitation:
        self.check()
        return self

    def check(self) -> CitationCheck:
        return CitationCheck(url=self.url, support=self.support, quote=self.quote, passage_sha256=self.passage_sha256)

    @classmethod
    def of(cls, check: CitationCheck) -> LedgerCitation:
        return cls(url=check.url, support=check.support, quote=check.quote, passage_sha256=check.passage_sha256)


class LedgerClaim(_Model):
    key: str
    report: str
    statement: str
    layer: str
    layer_key: str
    stance: str
    decision: str | None
    decision_key: str | None
    pick: str | None
    pick_key: str | None
    alternatives: list[str]
    condition: str | None
    sources: list[int]
    confidence: str
    cluster: str
    quote: str
    section: str | None
    position: Position
    anchored: bool
    citations: list[LedgerCitation]
    standing: Standing = Standing.NOT_ANCHORED  # whether it counts, or why not (`counting`)
    units: list[str] = Field(default_factory=list)  # the report units its quote is (`read/units`: "U12")
    position_check: PositionCheck | None = None  # what checking its position against its sentence found


class LedgerCluster(_Model):
    key: str
    base: str
    layer: str
    layer_key: str
    decision: str | None
    status: Literal["convergent", "same_family", "divergent", "single_source", "unsupported", "excluded"]
    flagged: bool
    pick: str | None
    pick_key: str | None
    position: Position = Position.FOR
    condition: str | None
    label: str
    summary: str
    members: list[str]
    reports: list[str]
    families: list[str]
    excluded_reports: list[str]
    batches: list[str]
    unaligned: bool
    divergence: str | None
    contradicts: list[str]
    contrary_excluded: list[str]
    sources: list[str] = Field(default_factory=list)  # distinct urls of the counted claims' supported citations
    shared_source: bool = False  # convergent, but all those citations point to one url
    topics: list[str] = Field(default_factory=list)  # the topics of the reports that hold it
    asked: list[str] = Field(default_factory=list)  # the families with a counted report on those topics

    @classmethod
    def of(cls, cluster: Cluster, key_of: Mapping[int, str]) -> LedgerCluster:
        """A classified cluster as written: the clusters it contradicts named by their keys (`key_of`)."""
        return cls(
            key=cluster.key, base=cluster.base, layer=cluster.layer, layer_key=cluster.layer_key,
            decision=cluster.decision, status=cluster.status, flagged=cluster.flagged, pick=cluster.pick,
            pick_key=cluster.pick_key, position=cluster.position, condition=cluster.condition, label=cluster.label,
            summary=cluster.summary, members=cluster.members, reports=cluster.reports, families=cluster.families,
            excluded_reports=cluster.excluded_reports, batches=cluster.batches, unaligned=cluster.unaligned,
            divergence=cluster.divergence, contradicts=sorted(key_of[i] for i in cluster.contradicts),
            contrary_excluded=cluster.contrary_excluded, sources=cluster.sources, shared_source=cluster.shared_source,
            topics=cluster.topics, asked=cluster.asked)


class LedgerSide(_Model):
    cluster: str
    label: str
    pick: str | None
    condition: str | None
    claims: list[str]
    reports: list[str]
    families: list[str]
    position: Position = Position.FOR
    sources: list[str] = Field(default_factory=list)
    condition_reports: list[str] = Field(default_factory=list)  # the reports whose own claims state `condition`

    @classmethod
    def of(cls, side: Side, key_of: Mapping[int, str]) -> LedgerSide:
        return cls(cluster=key_of[side.cluster], label=side.label, pick=side.pick, condition=side.condition,
                   claims=side.claims, reports=side.reports, families=side.families, position=side.position,
                   sources=side.sources, condition_reports=side.condition_reports)


class LedgerDivergence(_Model):
    key: str
    layer: str
    decision: str | None
    kind: Literal["alternatives", "contradiction"]
    tie: bool
    line: str
    positions: list[LedgerSide]
    ambivalent_reports: list[str]
    weighed: list[str]
    excluded_claims: list[str]
    topics: list[str] = Field(default_factory=list)  # the topics of the reports that hold its sides
    asked: list[str] = Field(default_factory=list)  # the families with a counted report on those topics

    @classmethod
    def of(cls, divergence: Divergence, key_of: Mapping[int, str]) -> LedgerDivergence:
        """A divergence as written: its sides and the clusters weighed named by their keys (`key_of`)."""
        return cls(key=divergence.key, layer=divergence.layer, decision=divergence.decision, kind=divergence.kind,
                   tie=divergence.tie, line=divergence.line,
                   positions=[LedgerSide.of(side, key_of) for side in divergence.sides],
                   ambivalent_reports=divergence.ambivalent_reports,
                   weighed=sorted(key_of[i] for i in divergence.weighed_clusters),
                   excluded_claims=divergence.excluded_claims, topics=divergence.topics, asked=divergence.asked)


class LedgerBatch(_Model):
    id: str
    key: str
    status: Literal["ok", "failed", "timed_out"]
    judge_model: str
    judge_is_author: bool
    labels: dict[str, str]
    ids: dict[str, str]
    anchors: list[str]
    error: str | None = None
    judgement: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = Field(default_factory=list)


class LedgerCheckItem(_Model):
    """One citation of one claim as the citation check saw it (`synthesis/check/citations.py`)."""

    claim: str
    number: int
    url: str | None
    support: Support
    reason: str
    key: str | None  # the cache key of the judge's answer; None when decided without a judge
    judge_model: str | None
    passages: list[str]  # sha256 of the stored passages shown to the judge
    answer: dict[str, Any] | None  # the judge's answer: {"verdict", "passage" (sha256), "sentences", "quote",
    #                                "recheck" (the second question's answer: true, the verdict stood)}
    calls: list[int]  # indices into the report's `calls`


class LedgerCheck(_Model):
    report: str
    judge_model: str | None
    evidence: str  # the evidence file's path
    evidence_present: bool
    status: Literal["ok", "failed", "timed_out"]
    error: str | None = None
    items: list[LedgerCheckItem]
    calls: list[dict[str, Any]] = Field(default_factory=list)


class LedgerLeg(_Model):
    stem: str
    topic: str
    model: str
    state: str
    detail: str
    report: str


class Ledger(_Model):
    schema_: Literal["research-dispatch/claims@3"] = Field(SCHEMA, alias="schema")
    cycle: str
    framework: str
    settings: dict[str, Any]
    counts: dict[str, Any]
    reports: list[LedgerReport]
    skipped: list[LedgerSkipped]
    claims: list[LedgerClaim]
    clusters: list[LedgerCluster]
    divergences: list[LedgerDivergence]
    batches: list[LedgerBatch]
    citation_checks: list[LedgerCheck]
    legs: list[LedgerLeg]
    limitations: list[str]
    incomplete: list[str]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return dump(self.to_dict())


def dump(data: dict[str, Any]) -> str:
    """Canonical text: sorted keys, two-space indent, UTF-8, trailing newline."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _LegacyCluster(_Loose):
    key: str
    base: str = ""
    layer: str = ""
    status: str = ""
    flagged: bool = False
    pick: str | None = None
    summary: str = ""
    members: list[str] = Field(default_factory=list)
    reports: list[str] = Field(default_factory=list)
    families: list[str] = Field(default_factory=list)


class _LegacyPosition(_Loose):
    cluster: str = ""
    label: str = ""
    reports: list[str] = Field(default_factory=list)


class _LegacyDivergence(_Loose):
    key: str
    layer: str = ""
    positions: list[_LegacyPosition] = Field(default_factory=list)


class _LegacyLedger(_Loose):
    """What the diff and the keys read from an older ledger; its answers are not replayed."""

    clusters: list[_LegacyCluster] = Field(default_factory=list)
    divergences: list[_LegacyDivergence] = Field(default_factory=list)


def _first_problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"field {where}: {err['msg']}"


# What @3 added to a claim, as an unchecked claim has it: an upgraded @2 claim is never counted.
_UNCHECKED_CLAIM: Final[dict[str, Any]] = {"quote": "", "section": None, "position": Position.FOR.value,
                                           "anchored": False, "citations": []}


def _v2_batch_id(index: Any) -> Any:
    return f"batch-{index}" if isinstance(index, int) and not isinstance(index, bool) else index


def _upgrade_from_v2(data: dict[str, Any]) -> dict[str, Any]:
    """A @2 ledger in the @3 shape: the fields @3 added get their unchecked values (no citation was
    checked), and @2's numbered judge batches are named `batch-<n>` (@3 names a batch by its claims); a
    field @2 already had, of whatever type, is left for validation to judge."""
    claims = data.get("claims")
    if isinstance(claims, list):
        claims = [{**_UNCHECKED_CLAIM, **claim} if isinstance(claim, dict) else claim for claim in claims]
    clusters = data.get("clusters")
    if isinstance(clusters, list):
        clusters = [{**c, "batches": [_v2_batch_id(b) for b in c["batches"]]}
                    if isinstance(c, dict) and isinstance(c.get("batches"), list) else c for c in clusters]
    batches = data.get("batches")
    if isinstance(batches, list):
        batches = [{**{k: v for k, v in b.items() if k != "index"}, "id": _v2_batch_id(b["index"])}
                   if isinstance(b, dict) and "index" in b and "id" not in b else b for b in batches]
    return {"citation_checks": [], **data, "schema": SCHEMA, "claims": claims, "clusters": clusters,
            "batches": batches}


def read_previous(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The previous ledger as a dict, or (None, warning) when it is missing, damaged or not ours.

    A current-schema ledger must validate completely (its answers may be replayed); a @2 ledger is
    upgraded first (its claims unchecked) and then must validate the same way, keeping its own schema
    name so readers can tell; an @1 ledger is kept only for the diff and the keys (its clusters and
    divergences must have the right shape, and everything else is dropped). Whatever is wrong is named
    — the file and the field — and the synthesis goes on as if there were no previous ledger.
    """
    if not path.exists():
        return None, None
    name = f"{path.parent.name}/{path.name}"
    tail = "; the claim diff compares against nothing and no answers are replayed from it"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{name}: previous ledger is unreadable ({type(exc).__name__}: {exc}){tail}"
    schema = data.get("schema") if isinstance(data, dict) else None
    try:
        if schema == SCHEMA:
            Ledger.model_validate(data)
            return data, None
        if schema == UPGRADABLE_SCHEMA:
            upgraded = Ledger.model_validate(_upgrade_from_v2(data)).to_dict()
            return {**upgraded, "schema": UPGRADABLE_SCHEMA}, None
        if schema in LEGACY_SCHEMAS:
            legacy = _LegacyLedger.model_validate(data)
            return {"schema": schema, **legacy.model_dump(mode="json")}, None
    except ValidationError as exc:
        return None, f"{name}: previous ledger is damaged ({_first_problem(exc)}){tail}"
    shown = repr(schema)[:80] if schema is not None else "none"
    return None, f"{name}: previous ledger has schema {shown}, not {SCHEMA}{tail}"
