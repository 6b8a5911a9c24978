"""`notify`: the workflow's last word on whether the refresh could start, as the one cannot-start issue.

The workflow's plan job runs `check --online --github-output`; its notify job (with `issues: write` and
no other key) hands that document and the plan job's result here:

* the plan job succeeded: the refresh started, so an open cannot-start issue is closed with a comment;
* it failed: the issue is opened, or updated and commented, with `check`'s problems (each names the file
  or secret to change, a withdrawn model with its did-you-mean); when the check itself passed, or never
  ran, the issue says the plan job failed and points at its log;
* it was cancelled or skipped: nothing is said (no run was refused).

The labels and the API retry budget are the configuration's (`[tool.research-dispatch.pr]`), read as
`check` reads it: a configuration that has problems — perhaps the very reason the run could not start —
still names the labels it can.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from research_dispatch.config.settings import check_settings
from research_dispatch.core.errors import ExitCode, Problem
from research_dispatch.core.ghactions import run_url
from research_dispatch.publish.blocked import BlockedIssue
from research_dispatch.publish.pulls import require_target
from research_dispatch.run.documents import read_check_document

RESULTS = ("success", "failure", "cancelled", "skipped")
PLAN_FAILED = Problem(None, None, "the plan job failed before any leg ran, and its check found nothing to change: its "
                      "log says why")


def notify_command(repo: Path, *, check: str, plan_result: str, env: Mapping[str, str],
                   echo: Callable[[str], None]) -> ExitCode:
    if plan_result in ("cancelled", "skipped"):
        echo(f"the plan job was {plan_result}: nothing to say")
        return ExitCode.OK
    target = require_target(env)
    problems: list[Problem] = []
    if check.strip():
        _, problems = read_check_document(check)
    link = run_url(env)
    issue = BlockedIssue(target, check_settings(repo).settings.pr)
    try:
        if plan_result == "success":
            echo(issue.close(link).line())
        else:
            echo(issue.report(problems or [PLAN_FAILED], link).line())
    finally:
        issue.disconnect()
    return ExitCode.OK
