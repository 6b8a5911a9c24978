"""The schedule workflow as GitHub sees it: its `state` and the repository's last activity.

Why ask GitHub: the 60-day pause is GitHub's decision, recorded only there (`GET /repos/{o}/{r}/actions/
workflows/{file}` → `state`: `active`, `disabled_inactivity`, `disabled_manually`, `disabled_fork` or
`deleted`), and the clock that leads to it restarts with activity on the default branch, whose last
commit is the best date the API gives for it. `check --online` reads both when it has a token and a
repository, and says the state, the next cycle and the command that re-enables a paused schedule
(`config/schedule.py` computes the dates). Reading needs `actions: read` (and `contents: read`); a token
without it is said, never a failure of `check`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass
from typing import Any

from github import GithubException, UnknownObjectException

from research_dispatch.config.schedule import SCHEDULE_WORKFLOW
from research_dispatch.config.settings import PRSettings
from research_dispatch.core.errors import DispatchError
from research_dispatch.publish.pulls import GitHubTarget, Retrier, describe, open_repository

ACTIVE = "active"


@dataclass(frozen=True)
class ScheduleReading:
    """What GitHub says of the schedule workflow. `state` is None when it could not be read (`problem`
    says why) or the default branch has no such workflow (`found` is False)."""

    state: str | None
    found: bool
    default_branch: str
    last_activity: dt.date | None
    problem: str | None = None

    @property
    def paused(self) -> bool:
        return self.state is not None and self.state != ACTIVE


def read_schedule(target: GitHubTarget, settings: PRSettings, retry: Retrier | None = None) -> ScheduleReading:
    """The schedule workflow's state and the default branch's last commit date (the module docstring)."""
    retry = retry or Retrier(settings)
    try:
        gh, repo = open_repository(target, settings, retry)
    except DispatchError as exc:
        return ScheduleReading(None, False, "", None, problem=str(exc))
    with contextlib.closing(gh):
        return _reading(repo, retry)


def _reading(repo: Any, retry: Retrier) -> ScheduleReading:
    branch = str(repo.default_branch)
    last = _last_activity(repo, branch, retry)
    try:
        workflow = retry("read the schedule workflow", lambda: repo.get_workflow(SCHEDULE_WORKFLOW))
    except UnknownObjectException:
        return ScheduleReading(None, False, branch, last)
    except GithubException as exc:
        hint = " (the token needs `actions: read`)" if exc.status == 403 else ""
        return ScheduleReading(None, False, branch, last, problem=f"GitHub did not say its state: {describe(exc)}"
                               f"{hint}")
    except DispatchError as exc:
        return ScheduleReading(None, False, branch, last, problem=str(exc))
    return ScheduleReading(str(workflow.state), True, branch, last)


def _last_activity(repo: Any, branch: str, retry: Retrier) -> dt.date | None:
    """The date of the default branch's last commit (GitHub's inactivity clock restarts with activity)."""
    try:
        commit = retry("read the default branch", lambda: repo.get_branch(branch).commit)
        moment = commit.commit.committer.date
    except (GithubException, DispatchError, AttributeError):
        return None
    return moment.date() if isinstance(moment, dt.datetime) else None
