"""A leg's evidence: every passage the researcher was shown for each source its report cites.

Why a file of its own: a citation can only be checked against what the model actually read. The
report names its sources; the pages behind them change or vanish, and a page the model read is not
what it was shown (a search snippet, the few passages `tools/chunks.py` picked). So every text a tool
put in front of the model is recorded at the place it was wrapped (`tools/search.py`, `Source.show`),
and the leg writes those of its cited sources to `research/<stem>.evidence.jsonl` — in the same
all-or-nothing unit as the report and its call log (`leg/files.py`), so after any failure all three are
the old ones or all three the new ones. The synthesis checks each claim's citations against it.

The line — FIXED (DESIGN "Evidence and checked claims"): `{"sha256", "text", "title", "tool", "url"}`,
keys sorted, one line per distinct passage of a source, lines sorted by (url, sha256). `url` is the
source's URL exactly as the report's `sources` list has it; `tool` is `web_search`, `web_extract` or
`mcp:<server>__<tool>`; `sha256` is the hex sha256 of `text` in UTF-8. A text shown twice (a re-read, or
the same words from another tool) is one line, under the tool that showed it first.

Decisions, and why:

* **Only cited sources.** The FIXED rule asks for "at least every source the report cites". Passages of
  sources the report does not cite are not kept: no claim can point at them, while every search shows up
  to `max_results` snippets and a reading turn several pages, most of which a real report never cites —
  committed bytes and every refresh's diff for nothing — and the full trace (`build/traces/`, an
  artefact) keeps them anyway. (In the demo the fake cites every source it retrieved, so there it
  makes no difference: 104 passages, 11.6–12.6 KB per report, beside 19.5–20.7 KB reports.)
* **ASCII JSON.** `json.dumps` escapes non-ASCII, so a page's U+2028 or U+0085 can never split a line
  for a reader that uses `str.splitlines` (the bytes are deterministic either way).
* **The text as the model saw it**: sanitised for the model (`sanitize.for_model`: no control, bidi or
  zero-width characters, wrapper tags neutralised), then redacted — the same text the tool result
  carried. It is untrusted data: nothing reads it but the citation check, nothing interprets it.
* **A size cap of 2 MiB** (`MAX_EVIDENCE_BYTES`), the report's own: at the default budget a leg is shown
  at most a few hundred kilobytes (40 steps, at most 6,000 characters of passages per extract), so a
  real leg is never cut, while a runaway one (an MCP server returning megabytes, a huge step budget)
  cannot write a file every reader must then refuse. A cut drops whole lines, deterministically:
  passages are taken round-robin over the cited sources (each source's first passage, in citation
  order, then each one's second, ...) while they fit, so as many cited sources as possible keep
  evidence; the report says so in `status_reasons` (and is therefore `degraded`).
* **Bound to its report.** The report's front matter carries `evidence_sha256`, the sha256 of the
  evidence file as written. `verify` and the leg state tell an older report (no key: written before
  evidence was kept; still readable) from a lost or hand-changed evidence file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from research_dispatch.config.plan import companions
from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import read_text_strict
from research_dispatch.core.records import first_error
from research_dispatch.core.redact import redact
from research_dispatch.leg.dossier import round_robin
from research_dispatch.leg.report import CappedReport, CitedSource, FinalBody, Report, ReportMeta, cap_report
from research_dispatch.tools.sources import SourceRegistry

MAX_EVIDENCE_BYTES = 2 * 1024 * 1024
"""The one size limit of an evidence file: what the leg writes and what every reader (the leg state,
`collect`, `verify`, the synthesis) accepts."""
TOOL_PATTERN = r"^(web_search|web_extract|mcp:[a-z0-9-]+__[A-Za-z0-9_.-]+)$"
_SHA256 = r"^[0-9a-f]{64}$"
_PLACEHOLDER_SHA = "0" * 64  # same length as a real one: the report's size, hence its cut, is the same


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EvidenceLine(BaseModel):
    """One line of an evidence file (FIXED shape). Validated when read back: the file comes from disk,
    a CI artifact or a branch, and its text is untrusted."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    url: str = Field(min_length=1, max_length=4000)
    title: str = Field(max_length=4000)
    tool: str = Field(pattern=TOOL_PATTERN)
    text: str = Field(min_length=1)
    sha256: str = Field(pattern=_SHA256)

    @field_validator("sha256")
    @classmethod
    def _hash_matches(cls, value: str, info: ValidationInfo) -> str:
        text = info.data.get("text")  # absent when `text` itself was refused: that error is the one reported
        if isinstance(text, str) and value != sha256_text(text):
            raise ValueError("not the sha256 of text")
        return value

    @classmethod
    def of(cls, url: str, title: str, tool: str, text: str) -> EvidenceLine:
        return cls(url=url, title=title, tool=tool, text=text, sha256=sha256_text(text))

    @property
    def key(self) -> tuple[str, str]:
        """The file's sort order and identity of a passage: (url, sha256)."""
        return self.url, self.sha256

    def to_json(self) -> str:
        return json.dumps(self.model_dump(), sort_keys=True)


def parse_line(line: str) -> EvidenceLine:
    """One evidence line; `ValueError` names the field that is wrong."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    try:
        return EvidenceLine.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise ValueError(f"{field}: {message}") from None


def _numbered(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the non-blank lines. Split on newlines only: `json.dumps` escapes every
    other line break, so a line is exactly what the writer wrote."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line


def parse_evidence(text: str) -> list[EvidenceLine]:
    """Every line of an evidence file, strictly: a damaged line is a `ValueError` naming the line and
    the field (what `collect` refuses to import)."""
    lines: list[EvidenceLine] = []
    for number, line in _numbered(text):
        try:
            lines.append(parse_line(line))
        except ValueError as exc:
            raise ValueError(f"line {number}: not an evidence line ({exc})") from None
    return lines


# --------------------------------------------------------------------------------------------------
# Writing


@dataclass(frozen=True)
class Evidence:
    """The evidence file of one report, as it will be written."""

    lines: tuple[EvidenceLine, ...]
    dropped: int = 0  # passages left out by the size cap
    limit: int = MAX_EVIDENCE_BYTES

    @property
    def text(self) -> str:
        return "".join(line.to_json() + "\n" for line in self.lines)

    @property
    def sha256(self) -> str:
        return sha256_text(self.text)

    @property
    def cut_reason(self) -> str | None:
        """The `status_reasons` entry when the cap cut passages, else None."""
        if not self.dropped:
            return None
        total = len(self.lines) + self.dropped
        return (f"evidence cut to fit the {self.limit:,}-byte limit: {self.dropped} of {total} passages shown to the "
                "researcher are not kept, so some citations cannot be checked")


def gather(sources: Sequence[CitedSource], registry: SourceRegistry, *, limit: int = MAX_EVIDENCE_BYTES) -> Evidence:
    """The evidence lines of the cited `sources`: every passage each was shown with, redacted, within
    `limit` bytes (see the module docstring for the cut)."""
    per_source: list[list[EvidenceLine]] = []
    for cited in sources:
        source = registry.by_url(cited.url)
        if source is None:
            continue
        seen: set[str] = set()
        passages: list[EvidenceLine] = []
        for passage in source.shown_passages:
            text = redact(passage.text)
            line = EvidenceLine.of(cited.url, cited.title, passage.tool, text)
            if line.sha256 not in seen:
                seen.add(line.sha256)
                passages.append(line)
        per_source.append(passages)
    ranked = [per_source[index][rank] for index, rank in round_robin(per_source)]
    kept: list[EvidenceLine] = []
    used = 0
    for line in ranked:
        size = len(line.to_json()) + 1  # ASCII: characters are bytes
        if used + size <= limit:
            kept.append(line)
            used += size
    return Evidence(lines=tuple(sorted(kept, key=lambda line: line.key)), dropped=len(ranked) - len(kept),
                    limit=limit)


def report_with_evidence(meta: ReportMeta, final: FinalBody, registry: SourceRegistry, *,
                         finish: Callable[[str], str], limit: int = MAX_EVIDENCE_BYTES,
                         report_limit: int | None = None) -> tuple[CappedReport, Evidence]:
    """The report as it will be written (`cap_report`) and its evidence, consistent with each other:
    the evidence covers exactly the sources the written report cites (a report cut to its size limit
    cites fewer), a cut of the evidence is a reason in the report's front matter, and the front matter
    names the evidence file's sha256.

    The report is rendered with a placeholder hash of the same length first, so the sources it keeps
    are known before the evidence is gathered, and the final render (with the real hash) is the same
    size and makes the same cut. Pure: same input, same output."""
    caps = {} if report_limit is None else {"limit": report_limit}

    def render(with_meta: ReportMeta, sha: str) -> CappedReport:
        return cap_report(with_meta.model_copy(update={"evidence_sha256": sha}), final.body, final.sources,
                          finish=finish, **caps)

    capped = render(meta, _PLACEHOLDER_SHA)
    evidence = gather(capped.sources, registry, limit=limit)
    if evidence.cut_reason is not None:
        meta = meta.model_copy(update={"status": "degraded",
                                       "status_reasons": [*meta.status_reasons, evidence.cut_reason]})
        capped = render(meta, _PLACEHOLDER_SHA)
        evidence = gather(capped.sources, registry, limit=limit)  # the same sources, or fewer: it still fits
    written = render(meta, evidence.sha256)
    if [s.url for s in written.sources] != [s.url for s in capped.sources]:  # cannot happen: same size, same cut
        raise AssertionError("the report's cut changed with its evidence hash")
    return written, evidence


# --------------------------------------------------------------------------------------------------
# Checking


@dataclass(frozen=True)
class EvidenceCheck:
    """What a report's evidence file says about its citations (warnings only: a route is about models,
    and a report without evidence is still a report; the synthesis counts what it can check)."""

    relpath: str
    present: bool
    bound: bool  # the report names its evidence file's sha256 (written since evidence files exist)
    matches: bool  # the file is the one written with the report (True when it cannot tell)
    damaged: tuple[str, ...] = ()  # "line N: why" of lines that do not parse
    uncovered: tuple[CitedSource, ...] = ()  # cited sources with no passage in the file
    lines: int = 0

    @property
    def warnings(self) -> list[str]:
        out: list[str] = []
        if not self.present:
            out.append(f"{self.relpath} is missing" if self.bound else
                       f"no evidence file ({self.relpath}): the report predates evidence files, so its "
                       "citations cannot be checked")
            return out
        if not self.matches:
            out.append(f"{self.relpath} is not the evidence file written with the report (it was changed or "
                       "replaced; its evidence_sha256 differs)")
        if self.damaged:
            shown = "; ".join(self.damaged[:3]) + (f"; … {len(self.damaged) - 3} more" if len(self.damaged) > 3 else "")
            out.append(f"{self.relpath}: {len(self.damaged)} damaged line(s) ignored ({shown})")
        if self.uncovered:
            listed = ", ".join(f"[{s.id}] {s.url}" for s in self.uncovered[:8])
            more = f", … {len(self.uncovered) - 8} more" if len(self.uncovered) > 8 else ""
            out.append(f"{len(self.uncovered)} cited source(s) without evidence: {listed}{more}")
        return out


def check_file(report: Report, path: Path, *, relpath: str | None = None) -> EvidenceCheck:
    """`check` of the evidence file at `path` (beside the report): read strictly, capped; a file that
    cannot be read (a link, too big, not UTF-8) is said as damaged, never a crash."""
    relpath = relpath or companions(report.relpath).evidence
    if not path.exists() and not path.is_symlink():
        return check(report, None, relpath=relpath)
    try:
        if path.is_symlink():
            raise BadInput("is a symbolic link", path=relpath)
        text = read_text_strict(path, display=relpath, max_bytes=MAX_EVIDENCE_BYTES)
    except BadInput as exc:
        cited = tuple(CitedSource(id=s.id, url=s.url, title=s.title) for s in report.meta.sources)
        return EvidenceCheck(relpath=relpath, present=True, bound=report.meta.evidence_sha256 is not None,
                             matches=False, damaged=(f"unreadable: {exc}",), uncovered=cited)
    return check(report, text, relpath=relpath)


def check(report: Report, text: str | None, *, relpath: str | None = None) -> EvidenceCheck:
    """Check a report's evidence file text (None: there is none). Never raises for bad content: a
    damaged line is a warning naming it (the rest still counts)."""
    relpath = relpath or companions(report.relpath).evidence
    bound = report.meta.evidence_sha256 is not None
    if text is None:
        return EvidenceCheck(relpath=relpath, present=False, bound=bound, matches=not bound)
    damaged: list[str] = []
    urls: set[str] = set()
    count = 0
    for number, line in _numbered(text):
        try:
            urls.add(parse_line(line).url)
            count += 1
        except ValueError as exc:
            damaged.append(f"line {number}: {exc}")
    uncovered = tuple(CitedSource(id=s.id, url=s.url, title=s.title) for s in report.meta.sources
                      if s.url not in urls)
    matches = not bound or report.meta.evidence_sha256 == sha256_text(text)
    return EvidenceCheck(relpath=relpath, present=True, bound=bound, matches=matches, damaged=tuple(damaged),
                         uncovered=uncovered, lines=count)
