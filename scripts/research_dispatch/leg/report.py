"""Reports: citations finalised in code, FIXED front matter, rendering and parsing.

The researcher cites `[S<n>]` ids from its source registry. Here, deterministic code:
renumbers citations by first use (`[1]`, `[1, 3]`), drops and counts ids that were never retrieved,
drops numeric markers the model wrote itself (`[12]` would otherwise pass for one of ours), removes
every URL that was never retrieved wherever it stands (Markdown link, `<autolink>`, parentheses,
`www.` form, raw HTML), removes any reference list the model wrote, and renders `## References` from
the cited sources only. The front matter is the report's provenance record.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from research_dispatch.core import sanitize
from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import read_text_strict
from research_dispatch.core.records import first_error
from research_dispatch.core.strictyaml import load_yaml_text
from research_dispatch.leg.contract import CITATION as _CITATION
from research_dispatch.leg.contract import count_words as count_words  # the one word count (re-exported)
from research_dispatch.tools.sources import SourceRegistry

SCHEMA: Final = "research-dispatch/report@1"
MAX_REPORT_BYTES = 2 * 1024 * 1024
"""The one size limit of a report file: what `load_report` (verify, synthesize, resume, publish) and
`collect` read back, and what `cap_report` lets the leg write. One constant, so the product never writes
a report it then refuses to read."""
_REFERENCE_HEADING = re.compile(r"^#{1,6}\s*(references|sources|bibliography|works cited|citations)\s*:?\s*$",
                                re.IGNORECASE | re.MULTILINE)
_MD_LINK = re.compile(r"(!?)\[([^\]\n]{0,300})\]\(\s*(<?)((?:https?:)?//[^)\s>]+)(>?)(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?://|www\.)[^\s<>]+)>", re.IGNORECASE)
# Any URL GitHub would link, in any context (after parentheses, quotes, `=`, inside code too).
_ANY_URL = re.compile(r"(?<![\w.@/-])(?:https?://|www\.)[^\s<>\]\[)\"'`]+", re.IGNORECASE)
# A numeric citation marker the model wrote itself; ours are added only after this runs.
_RAW_NUMERIC = re.compile(r"(?<![\w\]\[^])\[\s*\d{1,4}(?:\s*[,;\u2013-]\s*\d{1,4})*\s*\](?![(\[:])")
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
_LINK_REMOVED = "(link removed: not a retrieved source)"
_RAW_TAG = re.compile(r"<\s*/?\s*(script|iframe|object|embed|style|form|input|img|svg|a|link|meta)\b[^>]*>",
                      re.IGNORECASE)


def split_references(markdown: str) -> str:
    """Drop a trailing reference list the model wrote; we render our own from cited sources."""
    headings = list(_REFERENCE_HEADING.finditer(markdown))
    if not headings:
        return markdown
    return markdown[: headings[-1].start()].rstrip()


@dataclass
class CitedSource:
    id: int
    url: str
    title: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "url": self.url}


@dataclass
class FinalBody:
    body: str
    sources: list[CitedSource]
    dropped_citations: int
    unknown_ids: list[str] = field(default_factory=list)
    unlinked_urls: int = 0


def _outside_code(text: str, replace: Any) -> str:
    """Apply `replace(str) -> str` to the parts of Markdown that are not code spans or fenced blocks."""
    out: list[str] = []
    position = 0
    for match in _CODE.finditer(text):
        out.append(replace(text[position:match.start()]))
        out.append(match.group(0))
        position = match.end()
    out.append(replace(text[position:]))
    return "".join(out)


def _is_retrieved(url: str, registry: SourceRegistry) -> bool:
    url = url.rstrip(".,;:!?*_~")
    if url.startswith("//"):
        url = "https:" + url
    source = registry.by_url(url if "://" in url else "https://" + url)
    return source is not None and source.shown


def finalize_citations(draft: str, registry: SourceRegistry) -> FinalBody:
    """Renumber `[S<n>]` by first use, drop unknown ids, unlink URLs that were never retrieved."""
    text = sanitize.for_report(split_references(draft.strip()))
    text = _RAW_TAG.sub("", text)
    mapping: dict[int, int] = {}
    cited: list[CitedSource] = []
    unknown: list[str] = []

    def raw_numeric(part: str) -> str:
        def drop(match: re.Match[str]) -> str:
            unknown.append(re.sub(r"\s+", "", match.group(0)))
            return ""

        return _RAW_NUMERIC.sub(drop, part)

    text = _outside_code(text, raw_numeric)

    def renumber(match: re.Match[str]) -> str:
        numbers: list[int] = []
        for label in re.split(r"\s*[,;]\s*", match.group(1)):
            digits = label.strip()[1:]
            source_id = int(digits) if len(digits) <= 9 else -1  # `[S<5000 digits>]` is no id (nor a crash)
            source = registry.get(source_id)
            if source is None or not source.shown:  # registered but never shown (a brief URL never read): no evidence
                unknown.append(label.strip().upper())
                continue
            if source_id not in mapping:
                mapping[source_id] = len(mapping) + 1
                cited.append(CitedSource(id=mapping[source_id], url=source.url, title=source.title))
            if mapping[source_id] not in numbers:
                numbers.append(mapping[source_id])
        if not numbers:
            return ""
        return "[" + ", ".join(str(n) for n in numbers) + "]"

    text = _CITATION.sub(renumber, text)
    unlinked = 0

    def unlink(match: re.Match[str]) -> str:
        nonlocal unlinked
        if _is_retrieved(match.group(4), registry):
            return match.group(0)
        unlinked += 1
        return match.group(2)

    text = _MD_LINK.sub(unlink, text)

    def autolink(match: re.Match[str]) -> str:
        nonlocal unlinked
        if _is_retrieved(match.group(1), registry):
            return match.group(0)
        unlinked += 1
        return _LINK_REMOVED

    text = _AUTOLINK.sub(autolink, text)

    def bare(match: re.Match[str]) -> str:
        nonlocal unlinked
        url = match.group(0).rstrip(".,;:!?*_~")
        tail = match.group(0)[len(url):]
        if _is_retrieved(url, registry):
            return match.group(0)
        unlinked += 1
        return _LINK_REMOVED + tail

    text = _ANY_URL.sub(bare, text)
    text = re.sub(r"[ \t]+([.,;:])", r"\1", text)
    text = re.sub(r"[ \t]{2,}", " ", text)
    return FinalBody(body=text.strip(), sources=cited, dropped_citations=len(unknown),
                     unknown_ids=sorted(set(unknown)), unlinked_urls=unlinked)


def render_references(sources: Iterable[CitedSource]) -> str:
    lines = ["## References", ""]
    for source in sources:
        title = sanitize.one_line(source.title, 300).replace("[", "(").replace("]", ")")
        lines.append(f"{source.id}. {title} — <{source.url}>")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Front matter


# Numbers read back from front matter: exact types (YAML `"0.5"` or `true` is not a number), finite
# (`.nan`, `.inf` are refused) and not negative — damage is exit 2 naming the field, never a NaN that
# travels into sums, budgets and the PR body.
Count = Annotated[int, Field(ge=0, strict=True)]
Dollars = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    cached_tokens: Count = 0
    cost_usd: Dollars = 0.0


class SourceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    url: str
    title: str


RouteVerdict = Literal["exact", "provider_fallback", "model_fallback", "cached", "unverified", "self_reported"]
"""The front matter's `route`: a leg's verdict (`route.VERDICTS`)."""


class ReportMeta(BaseModel):
    """Front matter. The FIXED keys come first; the rest are ours and may grow."""

    model_config = ConfigDict(extra="allow")

    schema_: Literal["research-dispatch/report@1"] = Field(default=SCHEMA, alias="schema")
    topic: str
    title: str
    requested_model: str
    family: str
    served_models: list[str]
    served_providers: list[str]
    route: RouteVerdict
    route_verified: bool
    calls: Count
    generation_ids: list[str]
    status: Literal["ok", "degraded", "failed"]
    words: Count
    usage: Usage
    sources: list[SourceEntry]
    started_at: str
    finished_at: str
    # ours (optional so older or hand-made reports still load)
    requested_provider: str | None = None
    rationale: str = ""
    status_reasons: list[str] = Field(default_factory=list)
    word_band: dict[str, int] | None = None
    citations_dropped: Count = 0
    links_removed: Count = 0
    search: dict[str, Any] | None = None  # calls by kind (searches, extracts, mcp_calls), pages read, cost, ...
    research: dict[str, Any] | None = None  # the plan's size, the gap check, the stall, the dossier written from
    prompt_version: str | None = None
    input_hash: str | None = None
    cycle: str | None = None
    run_url: str | None = None
    # sha256 of the body as written (everything after the front matter); a mismatch means a hand edit
    body_sha256: str | None = None
    # sha256 of the evidence file written with the report (`leg/evidence.py`); None: written before
    # evidence files existed
    evidence_sha256: str | None = None

    @property
    def cost_usd(self) -> float:
        """Everything the report cost: its model calls and its search spend (a malformed figure counts 0)."""
        search = (self.search or {}).get("cost_usd")
        spent = search if isinstance(search, (int, float)) and not isinstance(search, bool) \
            and math.isfinite(search) and search >= 0 else 0.0
        return round(self.usage.cost_usd + float(spent), 6)

    def ordered(self) -> dict[str, Any]:
        """Keys in a fixed order (FIXED keys first), nested mappings sorted: stable diffs."""
        data = self.model_dump(by_alias=True, exclude_none=True)
        order = ["schema", "topic", "title", "requested_model", "requested_provider", "family", "rationale",
                 "served_models", "served_providers", "route", "route_verified", "calls", "generation_ids",
                 "status", "status_reasons", "words", "word_band", "usage", "citations_dropped",
                 "links_removed", "search", "research", "sources", "prompt_version", "input_hash", "cycle", "run_url",
                 "body_sha256", "evidence_sha256", "started_at", "finished_at"]
        result = {key: data.pop(key) for key in order if key in data}
        result.update(dict(sorted(data.items())))
        return result


def _yaml_dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000, default_flow_style=None)


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def body_sha256_of(text: str) -> str | None:
    """sha256 of a report file's body as written (everything after the front matter), or None."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 4)
    return sha256_of(text[end + 5:]) if end >= 0 else None


def render_report(meta: ReportMeta, body: str, sources: list[CitedSource], *,
                  clean: Callable[[str], str] | None = None) -> str:
    """The report file: front matter, body, references. `body_sha256` is computed here, from the body
    exactly as written (after `clean`, e.g. redaction, so a clean-up never looks like a hand edit)."""
    clean = clean or (lambda text: text)
    parts = ["", body.strip(), ""]
    if sources:
        parts += [render_references(sources), ""]
    written_body = clean("\n".join(parts))
    meta = meta.model_copy(update={"body_sha256": sha256_of(written_body)})
    return clean("---\n" + _yaml_dump(meta.ordered()).rstrip() + "\n---\n") + written_body


# --------------------------------------------------------------------------------------------------
# Size cap


_BOUNDARIES = (("section", re.compile(r"^#{1,2}[ \t]", re.MULTILINE)),
               ("subsection", re.compile(r"^#{3,6}[ \t]", re.MULTILINE)),
               ("paragraph", re.compile(r"\n[ \t]*\n(?=\S)")),
               ("line", re.compile(r"\n(?=\S)")),
               ("word", re.compile(r"\s(?=\S)")))


@dataclass(frozen=True)
class CappedReport:
    """The report as it will be written: `text` is at most the limit in bytes."""

    text: str
    meta: ReportMeta
    body: str
    sources: list[CitedSource]
    truncated: bool
    original_bytes: int


def cap_report(meta: ReportMeta, body: str, sources: list[CitedSource], *, limit: int = MAX_REPORT_BYTES,
               finish: Callable[[str], str] = lambda text: text) -> CappedReport:
    """Render the report, and if it is over `limit` bytes cut the body to fit, marked degraded.

    A model that repeats itself can write megabytes; a report over `MAX_REPORT_BYTES` would be refused
    by `verify` and the synthesis, and fail the whole refresh after the money was spent. So the body is
    cut at the last boundary that fits: whole `#`/`##` sections if any fit, else subsections, else
    paragraphs, else lines (else words). A note at the end says what was cut; the front matter says
    `status: degraded` with the reason, `words` of what remains, and only the sources still cited
    (citations are numbered by first use, so the kept sources are exactly 1..k and keep their numbers).
    `finish` is applied to the rendered text before measuring (the caller's redaction), so the bytes
    measured are the bytes written. Pure: same input, same output.
    """
    text = render_report(meta, body, sources, clean=finish)
    size = len(text.encode("utf-8"))
    if size <= limit:
        return CappedReport(text, meta, body, sources, False, size)

    def attempt(cut: int, unit: str = "section") -> CappedReport:
        kept = body[:cut].rstrip()
        if kept.count("```") % 2:  # cut inside a fenced block: close it, so the note is not code
            kept += "\n```"
        removed = count_words(body[cut:])
        note = (f"*[Report truncated: the model wrote {size:,} bytes, over the {limit:,}-byte limit of a "
                f"report; the last {removed:,} words were removed at a {unit} boundary.]*")
        new_body = f"{kept}\n\n{note}"
        cited = {int(n) for group in re.findall(r"\[(\d+(?:, \d+)*)\]", kept) for n in group.split(", ")}
        kept_sources = [source for source in sources if source.id in cited]
        reason = (f"report truncated to fit the {limit:,}-byte limit ({size:,} bytes written by the model; "
                  f"{removed:,} words removed)")
        new_meta = meta.model_copy(update={
            "status": "degraded", "status_reasons": [*meta.status_reasons, reason],
            "words": count_words(kept),
            "sources": [SourceEntry(id=s.id, url=s.url, title=s.title) for s in kept_sources]})
        return CappedReport(render_report(new_meta, new_body, kept_sources, clean=finish), new_meta, new_body,
                            kept_sources, True, size)

    def fits(candidate: CappedReport) -> bool:
        return len(candidate.text.encode("utf-8")) <= limit

    for unit, boundary in _BOUNDARIES:
        cuts = sorted({m.start() for m in boundary.finditer(body) if m.start() > 0})
        best = _largest_fitting(cuts, functools.partial(attempt, unit=unit), fits)
        if best is not None:
            return best
    return attempt(0)  # not even one word fits: front matter and the note only


def _largest_fitting(cuts: list[int], attempt: Callable[[int], CappedReport],
                     fits: Callable[[CappedReport], bool]) -> CappedReport | None:
    """The attempt at the largest cut that fits (sizes grow with the cut: binary search), or None."""
    low, high, best = 0, len(cuts) - 1, None
    while low <= high:
        middle = (low + high) // 2
        candidate = attempt(cuts[middle])
        if fits(candidate):
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best


@dataclass
class Report:
    path: Path
    relpath: str
    meta: ReportMeta
    body: str
    text: str
    written_body_sha256: str = ""  # sha256 of everything after the front matter, as found on disk

    @property
    def stem(self) -> str:
        return self.path.name[: -len(".md")]

    @property
    def edited(self) -> bool:
        """The body no longer matches the `body_sha256` it was written with: someone edited it by hand.
        A report without `body_sha256` (written before the key existed) cannot tell and counts as unedited."""
        return self.meta.body_sha256 is not None and self.meta.body_sha256 != self.written_body_sha256

    def require_no_conflict(self) -> None:
        """An unfinished merge (`<<<<<<<` … `>>>>>>>` in the file) is never a report anyone meant: every
        reader that would pass it on — the synthesis, the publisher, even with `--allow-edited` — refuses
        it alike, exit 2 naming the file and the line."""
        line = conflict_marker_line(self.text)
        if line is not None:
            raise BadInput(f"line {line} holds a git conflict marker ('<<<<<<<'): an unfinished merge, never "
                           "synthesized or published; resolve the conflict (or restore the report) first",
                           path=self.relpath)


_CONFLICT_START = re.compile(r"^<{7}(?: |$)", re.MULTILINE)
_CONFLICT_END = re.compile(r"^>{7}(?: |$)", re.MULTILINE)


def conflict_marker_line(text: str) -> int | None:
    """The line of the first `<<<<<<<` conflict marker that a later `>>>>>>>` closes, or None. A lone
    `=======` is a Markdown heading underline, so only the two outer markers count."""
    start = _CONFLICT_START.search(text)
    if start is None or _CONFLICT_END.search(text, start.end()) is None:
        return None
    return text.count("\n", 0, start.start()) + 1


def parse_report_text(text: str, *, display: str, path: Path | None = None) -> Report:
    if not text.startswith("---\n"):
        raise BadInput("no YAML front matter (the file must start with '---')", path=display)
    end = text.find("\n---\n", 4)
    if end < 0:
        raise BadInput("front matter is not closed with '---'", path=display)
    data = load_yaml_text(text[4:end], path=display)
    if not isinstance(data, dict):
        raise BadInput("front matter must be a mapping", path=display)
    try:
        meta = ReportMeta.model_validate(data)
    except ValidationError as exc:
        field_name, message = first_error(exc)
        raise BadInput(message, path=display, field=field_name.replace("schema_", "schema")) from None
    return Report(path=path or Path(display), relpath=display, meta=meta, body=text[end + 5:].strip(), text=text,
                  written_body_sha256=sha256_of(text[end + 5:]))


def load_report(path: Path, *, repo: Path) -> Report:
    try:
        display = path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        display = path.as_posix()
    text = read_text_strict(path, display=display, max_bytes=MAX_REPORT_BYTES)
    return parse_report_text(text, display=display, path=path.resolve())


def body_without_references(body: str) -> str:
    return split_references(body)
