"""A repository's standing notice: what `demo` says about every repository it builds.

Why a file: the demo's reports, synthesis and pull request are made by the real product from canned
text and fake prices, and must say so wherever they are read — also when a later command (`publish`
re-synthesizing, `synthesize` by hand in the demo directory) renders them again. The demo writes its
marker file (`.research-dispatch-demo`, also what makes the directory safe to delete) with the notice;
the synthesis document and the PR body read it from the repository they render, so no flag has to be
threaded through every stage and none can be forgotten. A repository without the marker has no notice.
"""

from __future__ import annotations

from pathlib import Path

from research_dispatch.core.sanitize import one_line

MARKER = ".research-dispatch-demo"
"""The demo's marker file at the top of a demo repository (git-ignored there)."""

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
