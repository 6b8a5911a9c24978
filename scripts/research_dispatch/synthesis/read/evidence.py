"""Read a report's evidence file for the citation check: untrusted, size-capped, damage named.

`research/<stem>.evidence.jsonl` (docs/ARCHITECTURE.md, "Evidence and checked claims — FIXED") holds one line per
passage the researcher was shown: `{"url", "title", "tool", "text", "sha256"}`. The synthesis reads it
from a branch, a CI artifact or a hand-edited checkout, so nothing in it is trusted:

* a file over `MAX_EVIDENCE_BYTES` (the leg's own cap, `leg/evidence.py`) is not read at all (a
  warning; every citation of that report is then `no_evidence`), so a runaway file cannot exhaust memory;
* a line that `leg.evidence.parse_line` refuses — not a JSON object of exactly those string fields, a
  `tool` the product does not write, a `sha256` that is not the hash of its `text` — is skipped with a
  warning naming the file, the line and the field: never a crash, and never a passage whose hash is not
  its text's (a verdict names a passage by that hash). (`collect` refuses such a file outright; the
  synthesis reads what is on the branch and goes on with the lines that are sound.)
* the text is data: it is only ranked, shown to the judge (sanitised for the model) and searched for
  the judge's quote.

A missing file is not an error (reports written before evidence was kept): the report's citations are
`no_evidence`, and the synthesis says so once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.leg.evidence import MAX_EVIDENCE_BYTES, EvidenceLine, parse_line
from research_dispatch.tools.search import normalise_url


@dataclass
class Evidence:
    """A report's passages by source (each an `EvidenceLine`: one passage of a source as the researcher was
    shown it); `present` is False when the report has no evidence file."""

    relpath: str
    present: bool
    passages: dict[str, list[EvidenceLine]] = field(default_factory=dict)  # normalised url -> passages
    warnings: list[str] = field(default_factory=list)

    def of(self, url: str) -> list[EvidenceLine]:
        """The passages stored for `url` (compared as the source registry compares urls), in file order."""
        return list(self.passages.get(normalise_url(url), ()))

    @classmethod
    def of_passages(cls, relpath: str, passages: Iterable[EvidenceLine]) -> Evidence:
        evidence = cls(relpath=relpath, present=True)
        for passage in passages:
            evidence.passages.setdefault(normalise_url(passage.url), []).append(passage)
        return evidence


def parse(text: str, relpath: str) -> Evidence:
    """The passages of an evidence file's text; damaged lines are skipped with a warning each."""
    passages: list[EvidenceLine] = []
    warnings: list[str] = []
    seen: set[tuple[str, str]] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = parse_line(line)
        except ValueError as exc:
            warnings.append(f"{relpath}: line {number}: damaged evidence line ({exc}); skipped")
            continue
        if (normalise_url(item.url), item.sha256) in seen:
            continue
        seen.add((normalise_url(item.url), item.sha256))
        passages.append(item)
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
