"""The one issue that says a refresh cannot start, where the lead looks (issue 30.1).

Why an issue: six months is long enough for a model to be withdrawn, a key to lapse or credits to run
out, and a scheduled run that fails in its plan job is a red run that notifies only whoever last edited
the cron. An issue, labelled like the refresh PRs, reaches the repository's watchers and says what to
change. There is ONE: found again by its hidden marker among the open issues with those labels, updated
(and commented, so watchers are notified) while runs keep failing, and closed with a comment by the
first run that starts. Nothing else is done on the lead's behalf: no re-enabling, no commit.

What it says comes from `check --online`'s problems (`{file, field, message}`: the file or secret to
change, the did-you-mean of a withdrawn model), each line sanitised as untrusted text (a gateway's
error message is the service's words), the body redacted and capped like a PR body.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from github import GithubException

from research_dispatch.config.settings import PRSettings
from research_dispatch.core.errors import Problem, PublishError
from research_dispatch.core.redact import redact
from research_dispatch.publish.prbody import cap, inline
from research_dispatch.publish.pulls import GitHubTarget, Retrier, describe, open_repository

MARKER = "<!-- research-dispatch:cannot-start:v1 -->"
TITLE = "The research refresh cannot start"
DRY_RUN_COMMAND = "gh workflow run research-refresh.yml -f dry-run=true"


class Outcome(str, Enum):
    OPENED = "opened"
    UPDATED = "updated"
    CLOSED = "closed"
    NOTHING = "nothing"  # a run started and no issue was open


@dataclass(frozen=True)
class Notice:
    """What `notify` did: the issue (number and URL, when there is one) and how."""

    outcome: Outcome
    number: int | None = None
    url: str | None = None

    def line(self) -> str:
        if self.outcome is Outcome.NOTHING:
            return "the refresh started; no cannot-start issue was open"
        return f"{self.outcome.value} issue #{self.number}: {TITLE.lower()} ({self.url})"


def _problem_line(problem: Problem) -> str:
    where = " · ".join(f"`{inline(part, 200)}`" for part in (problem.file, problem.field) if part)
    return f"- {where}{': ' if where else ''}{inline(problem.message, 600)}"


def render_body(problems: Sequence[Problem], run_url: str | None) -> str:
    """The issue's description: why the last run could not start, what to change, how to try again."""
    run = f"[The last run]({run_url})" if run_url else "The last run"
    lines = [MARKER, f"**{TITLE}.** {run} stopped in its plan job, before any leg was paid for, because:", ""]
    lines += [_problem_line(problem) for problem in problems] or ["- the plan job failed; its log says why"]
    lines += ["", "**What to change**: each line names the file and the field, or the secret (Settings → Secrets "
              "and variables → Actions), to change. A model the gateway no longer lists has been withdrawn: pick "
              "the suggested one, or another model of the same family, in the topic file. Then check again "
              "without spending anything:", "", f"    {DRY_RUN_COMMAND}", "",
              "This issue is updated while the refresh cannot start, and closed by the first run that starts. "
              "Nothing is changed on your behalf."]
    return cap(redact("\n".join(lines) + "\n"))


class BlockedIssue:
    """The one cannot-start issue of a repository, through the real PyGithub client."""

    def __init__(self, target: GitHubTarget, settings: PRSettings, retry: Retrier | None = None) -> None:
        self.settings = settings
        self.retry = retry or Retrier(settings)
        self.gh, self.repo = open_repository(target, settings, self.retry)

    def disconnect(self) -> None:
        """Close the client's connections (its owner does, when done; `close` closes the issue)."""
        self.gh.close()

    def find(self) -> Any | None:
        """The open issue carrying the marker among those with the refresh labels (pull requests are in
        GitHub's issue list too, and are skipped)."""
        labels = list(self.settings.labels)
        try:
            issues = self.retry("list open issues", lambda: list(self.repo.get_issues(state="open", labels=labels)))
        except GithubException as exc:
            raise PublishError(f"GitHub: could not list issues: {describe(exc)}") from None
        mine = [i for i in issues if i.pull_request is None and MARKER in (i.body or "")]
        return min(mine, key=lambda i: i.number) if mine else None

    def report(self, problems: Sequence[Problem], run_url: str | None) -> Notice:
        """Open the issue, or update it and comment (a comment notifies; an edited description does not)."""
        body = render_body(problems, run_url)
        found = self.find()
        try:
            if found is None:
                labels = list(self.settings.labels)
                issue = self.retry("open an issue", lambda: self.repo.create_issue(title=TITLE, body=body,
                                                                                   labels=labels))
                return Notice(Outcome.OPENED, issue.number, issue.html_url)
            self.retry("update the issue", lambda: found.edit(title=TITLE, body=body))
            run = f" ([run]({run_url}))" if run_url else ""
            self.retry("comment on the issue", lambda: found.create_comment(
                redact(f"Still cannot start{run}: {len(problems) or 1} problem(s); the description above says "
                       "what to change.")))
            return Notice(Outcome.UPDATED, found.number, found.html_url)
        except GithubException as exc:
            hint = " (the job needs `issues: write`)" if exc.status == 403 else ""
            raise PublishError(f"GitHub: could not open or update the cannot-start issue: {describe(exc)}{hint}") \
                from None

    def close(self, run_url: str | None) -> Notice:
        """A run started: close the open issue (if any) with a comment saying which run."""
        found = self.find()
        if found is None:
            return Notice(Outcome.NOTHING)
        run = f" ([run]({run_url}))" if run_url else ""
        try:
            self.retry("comment on the issue", lambda: found.create_comment(redact(
                f"A refresh started{run}: nothing stops it any more, so this issue is closed.")))
            self.retry("close the issue", lambda: found.edit(state="closed", state_reason="completed"))
        except GithubException as exc:
            raise PublishError(f"GitHub: could not close issue #{found.number}: {describe(exc)}") from None
        return Notice(Outcome.CLOSED, found.number, found.html_url)

