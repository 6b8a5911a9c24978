"""The GitHub Actions runner contract: job summaries.

One place that knows how `$GITHUB_STEP_SUMMARY` behaves: a file we append Markdown to, limited to
1 MiB per step (GitHub drops the whole upload beyond that), and redacted like everything we print.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from research_dispatch.errors import BadInput
from research_dispatch.redact import redact

STEP_SUMMARY_LIMIT = 900 * 1024  # below GitHub's 1 MiB per step, leaving room for other writers


def append_step_summary(env: Mapping[str, str], markdown: str) -> Path:
    """Append Markdown to the step summary, truncated to stay within GitHub's limit."""
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        raise BadInput("GITHUB_STEP_SUMMARY is not set", path="environment", field="GITHUB_STEP_SUMMARY")
    path = Path(target)
    used = path.stat().st_size if path.exists() else 0
    text = redact(markdown).rstrip() + "\n\n"
    room = max(0, STEP_SUMMARY_LIMIT - used)
    encoded = text.encode("utf-8")
    if len(encoded) > room:
        note = "\n\n*[summary truncated to stay within GitHub's job-summary limit]*\n\n"
        text = encoded[: max(0, room - len(note.encode()))].decode("utf-8", errors="ignore") + note
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
    return path
