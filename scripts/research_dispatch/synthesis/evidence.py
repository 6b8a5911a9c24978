"""Read a report's evidence file for the citation check: untrusted, size-capped, damage named.

`research/<stem>.evidence.jsonl` (DESIGN.md, "Evidence and checked claims" — FIXED) holds one line per
passage the researcher was shown: `{"url", "title", "tool", "text", "sha256"}`. The synthesis reads it
from a branch, a CI artifact or a hand-edited checkout, so nothing in it is trusted:

* a file over `MAX_EVIDENCE_BYTES` is not read at all (a warning; every citation of that report is
  then `no_evidence`), so a runaway file cannot exhaust memory;
* a line that is not a JSON object of exactly those string fields, whose `tool` is not one the product
  writes, or whose `sha256` is not the hash of its `text`, is skipped with a warning naming the file and
  the line — never a crash, and never a passage whose hash is not its text's (a verdict names a passage
  by that hash);
* the text is data: it is only ranked, shown to the judge (sanitised for the model) and searched for
  the judge's quote.

A missing file is not an error (reports written before evidence was kept): the report's citations are
`no_evidence`, and the synthesis says so once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from research_dispatch.tools.search import normalise_url

MAX_EVIDENCE_BYTES = 2 * 1024 * 1024  # the leg's own cap on what it writes (a report's size limit)
MAX_PASSAGE_CHARS = 200_000
TOOL_PATTERN = r"^(web_search|web_extract|mcp:[a-z0-9-]+__[A-Za-z0-9_.-]+)$"


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    url: str = Field(min_length=1, max_length=4000)
    title: str = Field(max_length=4000)
    tool: str = Field(pattern=TOOL_PATTERN)
    text: str = Field(min_length=1, max_length=MAX_PASSAGE_CHARS)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Passage:
    """One stored passage of a source, as the researcher was shown it."""

    url: str
    title: str
    tool: str
    text: str
    sha256: str


@dataclass
class Evidence:
    """A report's passages by source; `present` is False when the report has no evidence file."""

    relpath: str
    present: bool
    passages: dict[str, list[Passage]] = field(default_factory=dict)  # normalised url -> passages
    warnings: list[str] = field(default_factory=list)

    def of(self, url: str) -> list[Passage]:
        """The passages stored for `url` (compared as the source registry compares urls), in file order."""
        return list(self.passages.get(normalise_url(url), ()))

    @classmethod
    def of_passages(cls, relpath: str, passages: Iterable[Passage]) -> Evidence:
        evidence = cls(relpath=relpath, present=True)
        for passage in passages:
            evidence.passages.setdefault(normalise_url(passage.url), []).append(passage)
        return evidence


def _problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"field {'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"


def parse(text: str, relpath: str) -> Evidence:
    """The passages of an evidence file's text; damaged lines are skipped with a warning each."""
    passages: list[Passage] = []
    warnings: list[str] = []
    seen: set[tuple[str, str]] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = _Line.model_validate(json.loads(line))
        except ValueError as exc:  # JSONDecodeError and ValidationError are both ValueErrors
            reason = _problem(exc) if isinstance(exc, ValidationError) else f"not JSON ({type(exc).__name__})"
            warnings.append(f"{relpath}: line {number}: damaged evidence line ({reason}); skipped")
            continue
        if hashlib.sha256(item.text.encode("utf-8")).hexdigest() != item.sha256:
            warnings.append(f"{relpath}: line {number}: damaged evidence line (field sha256: not the hash of its "
                            "text); skipped")
            continue
        if (normalise_url(item.url), item.sha256) in seen:
            continue
        seen.add((normalise_url(item.url), item.sha256))
        passages.append(Passage(url=item.url, title=item.title, tool=item.tool, text=item.text, sha256=item.sha256))
    evidence = Evidence.of_passages(relpath, passages)
    evidence.warnings = warnings
    return evidence


def load(path: Path, relpath: str) -> Evidence:
    """A report's evidence file, read defensively (see the module docstring)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Evidence(relpath=relpath, present=False)
    except OSError as exc:
        return Evidence(relpath=relpath, present=False,
                        warnings=[f"{relpath}: evidence file unreadable ({type(exc).__name__}); its report's "
                                  "citations are checked as having no evidence"])
    if size > MAX_EVIDENCE_BYTES:
        return Evidence(relpath=relpath, present=False,
                        warnings=[f"{relpath}: evidence file is {size} bytes, over the {MAX_EVIDENCE_BYTES}-byte "
                                  "limit; not read, its report's citations are checked as having no evidence"])
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Evidence(relpath=relpath, present=False,
                        warnings=[f"{relpath}: evidence file unreadable ({type(exc).__name__}); its report's "
                                  "citations are checked as having no evidence"])
    return parse(text, relpath)
