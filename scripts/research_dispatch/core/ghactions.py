"""The GitHub Actions runner contract: the runner's files (`$GITHUB_OUTPUT`, `$GITHUB_STEP_SUMMARY`) and
the URL of the workflow run (`run_url`).

One place that knows how they behave: files we append to; the job summary is Markdown limited to
1 MiB per step (GitHub drops the whole upload beyond that), and redacted like everything we print.

`require_runner_file` is called by every command that will write one of them, *before any work*: a
variable pointing somewhere unwritable is exit 2 naming the variable at the start, not an "internal
error" after the PR was already updated.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from research_dispatch.core.errors import BadInput
from research_dispatch.core.redact import redact

STEP_SUMMARY_LIMIT = 900 * 1024  # below GitHub's 1 MiB per step, leaving room for other writers
DEFAULT_SERVER_URL = "https://github.com"
_SAFE_RUN_URL = re.compile(r"^https?://[^\s<>\"'`|\\]{1,300}$")


def safe_run_url(url: str | None) -> str | None:
    """`url` when it is one plain http(s) URL safe to put in a trailer, a report or a PR body, else None."""
    return url if url and _SAFE_RUN_URL.fullmatch(url) else None


def run_url(env: Mapping[str, str]) -> str | None:
    """The URL of the workflow run this process belongs to (`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY`,
    `GITHUB_RUN_ID`), or None outside Actions. The one place it is built: a report's front matter
    (`run_url`), the commits' `Run-Link` trailer and the PR body all say the same URL."""
    server = (env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL).strip().rstrip("/")
    repository, run_id = env.get("GITHUB_REPOSITORY", "").strip(), env.get("GITHUB_RUN_ID", "").strip()
    if repository and run_id.isascii() and run_id.isdigit():
        return safe_run_url(f"{server}/{repository}/actions/runs/{run_id}")
    return None


def require_runner_file(env: Mapping[str, str], variable: str) -> Path:
    """The file `variable` names, checked appendable now (opened for append, created if missing,
    nothing written), or `BadInput` naming the variable. A FIFO or socket is refused: appending to
    one could block for ever."""
    target = env.get(variable, "")
    if not target.strip():
        raise BadInput("is not set (the Actions runner sets it; outside Actions leave the option out)",
                       path="environment", field=variable)
    path = Path(target)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise BadInput(f"cannot append to {target!r}: {exc.strerror or exc}", path="environment",
                       field=variable) from None
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise BadInput(f"{target!r} is a FIFO or socket, not a file", path="environment", field=variable)
    return path


def append_runner_file(env: Mapping[str, str], variable: str, text: str) -> Path:
    """Append `text` to the runner file `variable` names; an OS error is `BadInput` naming it."""
    path = require_runner_file(env, variable)
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise BadInput(f"cannot append to {str(path)!r}: {exc.strerror or exc}", path="environment",
                       field=variable) from None
    return path


def append_step_summary(env: Mapping[str, str], markdown: str) -> Path:
    """Append Markdown to the step summary, truncated to stay within GitHub's limit."""
    path = require_runner_file(env, "GITHUB_STEP_SUMMARY")
    used = 0
    with contextlib.suppress(OSError):
        used = path.stat().st_size
    text = redact(markdown).rstrip() + "\n\n"
    room = max(0, STEP_SUMMARY_LIMIT - used)
    encoded = text.encode("utf-8")
    if len(encoded) > room:
        note = "\n\n*[summary truncated to stay within GitHub's job-summary limit]*\n\n"
        text = encoded[: max(0, room - len(note.encode()))].decode("utf-8", errors="ignore") + note
    return append_runner_file(env, "GITHUB_STEP_SUMMARY", text)
