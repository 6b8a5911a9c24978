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

**Integrity** (DESIGN "Evidence and checked claims — FIXED", evidence integrity; `load_for_report`): the
report's front matter names the sha256 of the evidence file written with it (`evidence_sha256`). A file
whose sha256 differs (a line appended and its hash recomputed, a passage rewritten, the file swapped), a
symbolic link in its place (it could point at anything), or a file beside a report that names no
`evidence_sha256` (nothing binds it to the report) is *refused*: no evidence at all, every citation of
that report `no_evidence`, with a warning and a limitation line naming why — an edit to the evidence can
never turn a citation `supported` silently. Files are opened without blocking and checked to be regular
files first (`fsio.read_text_strict`): a FIFO or a directory in its place is refused by name, never a hang.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import confined, read_text_strict
from research_dispatch.leg.evidence import MAX_EVIDENCE_BYTES, EvidenceLine, parse_line, sha256_text
from research_dispatch.tools.sources import normalise_url

SYMLINK = "is a symbolic link, not the evidence file written with the report"
CHANGED = ("is not the evidence file written with the report: its sha256 differs from the report's "
           "evidence_sha256 (changed or replaced after the report was written)")
UNBOUND = ("lies beside a report that names no evidence_sha256, so nothing shows it is the evidence file "
           "written with that report")


@dataclass
class Evidence:
    """A report's passages by source (each an `EvidenceLine`: one passage of a source as the researcher was
    shown it); `present` is False when the report has no evidence file."""

    relpath: str
    present: bool
    passages: dict[str, list[EvidenceLine]] = field(default_factory=dict)  # normalised url -> passages
    warnings: list[str] = field(default_factory=list)
    refused: str | None = None  # why a file that is there is not used (integrity, not readability)

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


def _read(path: Path, relpath: str) -> str | Evidence:
    """The file's text, or the `Evidence` that says why there is none (missing, too big, unreadable)."""
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
        return read_text_strict(path, display=relpath, max_bytes=MAX_EVIDENCE_BYTES, allow_empty=True)
    except BadInput as exc:
        return Evidence(relpath=relpath, present=False,
                        warnings=[f"evidence file unreadable ({exc}); its report's citations are checked as having "
                                  "no evidence"])


def load(path: Path, relpath: str) -> Evidence:
    """A report's evidence file, read defensively (see the module docstring), its binding not checked."""
    text = _read(path, relpath)
    return text if isinstance(text, Evidence) else parse(text, relpath)


def load_for_report(repo: Path, relpath: str, evidence_sha256: str | None) -> Evidence:
    """The evidence file at `relpath` as the evidence of the report whose front matter says
    `evidence_sha256`: refused (no evidence, a warning naming why) when it is a symbolic link, when the
    report names no hash, or when its sha256 is not that hash (the module docstring, "Integrity")."""
    parent, name = relpath.rsplit("/", 1) if "/" in relpath else ("", relpath)
    path = confined(repo, parent or ".") / name  # the leaf is not resolved: a link is seen as a link
    if path.is_symlink():
        return _refused(relpath, SYMLINK)
    text = _read(path, relpath)
    if isinstance(text, Evidence):
        return text
    if evidence_sha256 is None:
        return _refused(relpath, UNBOUND)
    if sha256_text(text) != evidence_sha256:
        return _refused(relpath, CHANGED)
    return parse(text, relpath)


def _refused(relpath: str, why: str) -> Evidence:
    return Evidence(relpath=relpath, present=False, refused=why,
                    warnings=[f"{relpath} {why}; not used: its report's citations are checked as having no evidence"])
