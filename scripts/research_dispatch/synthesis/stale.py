"""Does the synthesis on disk describe a given set of reports, and was its document edited by hand?

The synthesis on the refresh branch must be computed from exactly the reports on the branch: every
report it cites is in the same commit. The claims ledger (`framework/claims.json`) lists every report
the synthesis read, with the sha256 of the whole file (`reports[].path`, `reports[].sha256`), so the
match is checked in code against the report set a commit is about to hold (`matches`). Reports whose
front matter says `status: failed` are never counted by the synthesis and may be absent from it.

A synthesis *document* edited by hand is one that differs from what its own ledger renders to. It is
not overwritten when nothing it depends on changed — the same report set (`document_edited` +
`matches`); when the reports did change, it is regenerated and the edit is saved to `build/edited/`
first (`save_edit`), so nothing is lost.

This module only reads the synthesis' files; it never imports the synthesis pipeline's internals
beyond the ledger model and the renderer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.core.notice import repository_notice
from research_dispatch.core.redact import redact
from research_dispatch.leg.report import sha256_of
from research_dispatch.synthesis.write.ledger import Ledger
from research_dispatch.synthesis.write.render import render_document


@dataclass
class Match:
    """How the ledger on disk compares with a report set."""

    present: bool  # there is a readable ledger
    matches: bool
    extra: list[str] = field(default_factory=list)  # read by the synthesis, not in the set (or another version)
    missing: list[str] = field(default_factory=list)  # in the set, not read by the synthesis

    def reason(self) -> str:
        if not self.present:
            return "there is no readable claims ledger"
        parts = []
        if self.extra:
            parts.append("it read " + ", ".join(self.extra[:5]) + (" …" if len(self.extra) > 5 else "")
                         + " (not in this commit, or another version)")
        if self.missing:
            parts.append("it did not read " + ", ".join(self.missing[:5]) + (" …" if len(self.missing) > 5 else ""))
        return "; ".join(parts) or "it matches"


def ledger_reports(repo: Path, settings: Settings) -> dict[str, str] | None:
    """{report path: sha256} the synthesis on disk read, or None when there is no readable ledger."""
    try:
        return ledger_text_reports((repo / settings.ledger_relpath).read_text(encoding="utf-8"))
    except OSError:
        return None


def ledger_text_reports(text: str | None) -> dict[str, str] | None:
    """{report path: sha256} a ledger's text lists (a file, or a blob of a commit), None if unreadable."""
    try:
        reports = json.loads(text or "")["reports"]
        return {str(r["path"]): str(r["sha256"]) for r in reports}
    except (ValueError, KeyError, TypeError):
        return None


def counted_by_synthesis(text: str) -> bool:
    """Would the synthesis read this report at all? Not when its front matter says `status: failed`."""
    head = text.split("\n---\n", 1)[0]
    return "\nstatus: failed\n" not in head + "\n"


def matches(repo: Path, settings: Settings, reports: Mapping[str, str]) -> Match:
    """Compare the ledger on disk with `reports` ({path: file text}): the reports a commit will hold."""
    return compare(ledger_reports(repo, settings), reports)


def compare(read: Mapping[str, str] | None, reports: Mapping[str, str]) -> Match:
    """Compare what a ledger read ({path: sha256}, None: no readable ledger) with `reports`."""
    if read is None:
        return Match(present=False, matches=False)
    expected = {path: sha256_of(text) for path, text in reports.items()}
    extra = sorted(path for path, sha in read.items() if expected.get(path) != sha)
    missing = sorted(path for path, text in reports.items() if path not in read and counted_by_synthesis(text))
    return Match(present=True, matches=not extra and not missing, extra=extra, missing=missing)


def document_edited(repo: Path, settings: Settings) -> bool:
    """The synthesis document differs from what its ledger renders to: someone edited it by hand.

    False when that cannot be told (no document, no ledger, a ledger this version cannot read)."""
    document = repo / settings.document_relpath
    try:
        text = document.read_text(encoding="utf-8")
        data = json.loads((repo / settings.ledger_relpath).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    try:

        notice = repository_notice(repo, settings.research_dir)
        rendered = redact(render_document(Ledger.model_validate(data), settings, notice))
    except (ImportError, ValidationError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return rendered != text


def save_edit(repo: Path, settings: Settings) -> str:
    """Copy the hand-edited synthesis document to `build/edited/` before it is regenerated."""
    source = repo / settings.document_relpath
    target = f"{settings.build_dir}/edited/{Path(settings.document_relpath).name}"
    write_atomic(confined(repo, target), source.read_bytes())
    return target


def worktree_reports(repo: Path, settings: Settings, relpaths: list[str]) -> dict[str, str]:
    """{path: text} of those report paths that exist in the working tree."""
    out: dict[str, str] = {}
    for rel in relpaths:
        path = repo / rel
        if path.is_file() and not path.is_symlink():
            try:
                out[rel] = path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    return out


def keep_edited_document(repo: Path, settings: Settings, planned: list[Leg]) -> tuple[bool, str]:
    """Before synthesizing: (keep the document as it is?, what to say).

    An edited document is kept when the reports it was computed from are exactly the reports now in
    the working tree; otherwise it is regenerated after its edit is saved to `build/edited/`."""
    if not document_edited(repo, settings):
        return False, ""
    if planned:
        relpaths = [leg.report_relpath(settings) for leg in planned]
    else:
        directory = repo / settings.research_dir
        relpaths = [f"{settings.research_dir}/{p.name}" for p in sorted(directory.glob("*.md"))] \
            if directory.is_dir() else []
    match = matches(repo, settings, worktree_reports(repo, settings, relpaths))
    document = settings.document_relpath
    if match.matches:
        return True, f"{document} was edited by hand and nothing it depends on changed: kept as it is, not regenerated"
    saved = save_edit(repo, settings)
    return False, (f"{document} was edited by hand, but its reports changed ({match.reason()}): it is regenerated; "
                   f"the edit is saved in {saved}")
