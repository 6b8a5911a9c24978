"""A repository's standing notice: what `demo` says about every repository it builds.

Why a file: the demo's reports, synthesis and pull request are made by the real product from canned
text and fake prices, and must say so wherever they are read — also when a later command (`publish`
re-synthesizing, `synthesize` by hand in the demo directory) renders them again. The demo writes its
marker file (`.research-dispatch-demo`, also what makes the directory safe to delete) with the notice;
the synthesis document and the PR body read it from the repository they render, so no flag has to be
threaded through every stage and none can be forgotten. A repository without the marker has no notice —
unless its reports say they are canned (`repository_notice`): a `run` pointed at the fakes by hand
(`python -m research_dispatch.fake serve` and its base URLs, no demo marker) writes reports that carry the
fake gateway's banner, and its synthesis and PR body must say so too (issue 30.8).
"""

from __future__ import annotations

from pathlib import Path

from research_dispatch.core.sanitize import one_line

MARKER = ".research-dispatch-demo"
"""The demo's marker file at the top of a demo repository (git-ignored there)."""

CANNED_MARK = "> **Demo output, not research.**"
"""How a report the fake gateway wrote opens its banner (the fakes' `CANNED_BANNER`; the fakes import
nothing of the product, so tests/fake/test_canned_banner.py holds the two together)."""
CANNED_SCAN_BYTES = 16384
"""The banner follows the front matter and the title: it is within a report's first bytes."""

_HEADER = "created by `research-dispatch demo`; safe to delete\n"
_NOTICE = "notice: "
NOTICE_LIMIT = 400


def write_marker(directory: Path, notice: str) -> None:
    """Mark `directory` as a demo repository whose rendered documents carry `notice`."""
    (directory / MARKER).write_text(_HEADER + _NOTICE + one_line(notice, NOTICE_LIMIT) + "\n", encoding="utf-8")


def read_notice(repo: Path) -> str | None:
    """The notice of the repository at `repo`, or None when it is not a demo repository."""
    try:
        text = (repo / MARKER).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith(_NOTICE) and line[len(_NOTICE):].strip():
            return one_line(line[len(_NOTICE):], NOTICE_LIMIT)
    return None


def is_canned(text: str) -> bool:
    """Whether a report's text carries the fake gateway's banner (within its first bytes)."""
    return any(line.startswith(CANNED_MARK) for line in text[:CANNED_SCAN_BYTES].splitlines())


def canned_reports(reports_dir: Path) -> list[str]:
    """The reports in `reports_dir` that carry the fake gateway's banner (their stems, sorted)."""
    canned = []
    for path in sorted(reports_dir.glob("*.md")):
        try:
            with path.open("rb") as handle:
                head = handle.read(CANNED_SCAN_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        if is_canned(head):
            canned.append(path.stem)
    return canned


def canned_notice(canned: list[str]) -> str | None:
    """The notice for reports (their stems) that are canned text from the fakes; None when there are none."""
    if not canned:
        return None
    count = f"{len(canned)} report{'s' if len(canned) != 1 else ''}"
    shown = ", ".join(sorted(canned)[:5]) + (", …" if len(canned) > 5 else "")
    return (f"Demo output, not research: {count} here ({shown}) are canned text from research-dispatch's "
            "offline fake servers, with fake token counts and prices; no real model or search service wrote them.")


def repository_notice(repo: Path, reports_dir: str) -> str | None:
    """The notice a repository's synthesis carries: the demo's (`read_notice`), or, when reports in
    `reports_dir` are canned text from the fakes, one that says which — so that a run on the fakes never
    writes a synthesis that reads as research. Deterministic over the working tree: the synthesis is
    re-rendered with it to tell a hand edit (`synthesis.stale`). The PR body asks the same of the reports
    it publishes (`canned_notice`)."""
    return read_notice(repo) or canned_notice(canned_reports(repo / reports_dir))
