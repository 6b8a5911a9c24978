"""`check` without `--online`: what can be known to fail from the repository alone, every problem at once.

Why all at once and beside each other: a first hour goes wrong one mistake at a time when each run shows
only the first (a misspelt table hid the topic errors behind it). So the configuration is read for
every problem and its valid part (`settings.check_settings`), the topic files are checked with that part,
and the plan across them; problems (exit 2) and warnings (said, exit 0) are typed `Problem`s that
`check` prints one line each and `check --json` as `{file, field, message}`.

Problems: the configuration's and the topic files' own (with line and column), report paths that
coincide, caps no hosted job can hold, and a report family no judge of another family can check
(`plan.judge_problems`, named `synthesis.judge_models`). Warnings: a `[tool.*]` table whose name is
close to ours, a topic whose models are all one family, a judge list that is all report families, and
a model slug the bundled price list does not know, with a did-you-mean (a newer model may simply not be
listed yet). The judge checks need the configuration's own judges and families, so they wait until the
configuration has no problem.

`Checked` is one line of what `check --online` asked the services (`run/online.py`); it lives here, with the
offline report, so that `check` without `--online` loads no service client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from research_dispatch.config.estimate import unlisted_models
from research_dispatch.config.plan import Leg, family_warnings, judge_problems, judge_warnings, plan_problems
from research_dispatch.config.settings import Settings, check_settings
from research_dispatch.config.topics import TopicFile, check_topics
from research_dispatch.core.errors import Problem


class Status(str, Enum):
    OK = "ok"
    FAILED = "failed"
    WARNING = "warning"
    SKIPPED = "skipped"


ICONS = {Status.OK: "✓", Status.FAILED: "✗", Status.WARNING: "!", Status.SKIPPED: "-"}


@dataclass(frozen=True)
class Checked:
    """One thing `check --online` asked about, and what it found (one line of its report)."""

    subject: str  # "gateway", "search tavily", "model openai/gpt-5", "mcp aws-docs", "schedule"
    status: Status
    detail: str

    def line(self) -> str:
        return f"  {ICONS[self.status]} {self.subject}: {self.detail}"

    def document(self) -> dict[str, Any]:
        return {"subject": self.subject, "status": self.status.value, "detail": self.detail}


@dataclass
class OnlineReport:
    """Everything `check --online` found: the report lines, and the problems and warnings behind them."""

    checked: list[Checked] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def add(self, checked: Checked, problem: Problem | None = None, *, warning: bool = False) -> None:
        self.checked.append(checked)
        if problem is not None:
            (self.warnings if warning else self.problems).append(problem)


@dataclass(frozen=True)
class CheckReport:
    """What `check` found: the valid topics and their legs, and every problem and warning."""

    settings: Settings
    topics: list[TopicFile]
    legs: list[Leg]
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def check_repository(repo: Path) -> CheckReport:
    """Every offline problem and warning of the repository (the module docstring)."""
    configured = check_settings(repo)
    settings = configured.settings
    topics, topic_problems = check_topics(repo, settings)
    legs, across = plan_problems(topics, settings)
    problems = [*configured.problems, *(p for exc in [*topic_problems, *across] for p in exc.problems())]
    warnings = [*configured.warnings, *family_warnings(legs)]
    if not configured.problems:
        problems += [p for exc in judge_problems(legs, settings) for p in exc.problems()]
        warnings += judge_warnings(legs, settings)
    warnings += unlisted_models(settings, legs)
    return CheckReport(settings, topics, legs, problems, warnings)
