"""The `check` command: the repository's own problems (`config/check.py`), and with `--online` what the
services say (`run/online.py`), said for people, for scripts and for the workflow.

* on a terminal: every problem as an `error:` line and every warning as a `warning:` line on stderr
  (the house's one line naming the file and the field), the online report on stdout, one line per key,
  model, server and the schedule (like `gh auth status`), and `ok: …` when nothing is wrong;
* `--json`: one `research-dispatch/check@2` document (`run/documents.py`);
* `--github-summary`: the same report as Markdown in the job summary (the dry run's plan job shows it);
* `--github-output`: the document as the step output `check`, which the workflow's notify job turns into
  the one cannot-start issue (`run/notify.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_dispatch.config.check import ICONS, Checked, CheckReport, OnlineReport, check_repository
from research_dispatch.config.plan import Leg, write_github_output
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import ExitCode, Problem
from research_dispatch.core.ghactions import append_step_summary, require_runner_file
from research_dispatch.core.sanitize import for_pr_body
from research_dispatch.run.documents import check_document

OUTPUT_LIMIT = 60_000
"""Characters of the `check` step output at most (an environment variable of the notify job must stay far
below the kernel's 128 KiB a string): problems past it are counted, not listed."""


@dataclass
class CheckOutcome:
    """`check` as a whole: the offline report, and what the services said when `--online`."""

    report: CheckReport
    online: bool
    checked: list[Checked] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.BAD_INPUT if self.problems else ExitCode.OK

    def document(self) -> dict[str, Any]:
        return check_document(topics=len(self.report.topics), legs=len(self.report.legs), online=self.online,
                              problems=self.problems, warnings=self.warnings, checked=self.checked)

    def summary_line(self) -> str:
        warned = f", {len(self.warnings)} warning(s)" if self.warnings else ""
        online = ", checked online" if self.online else ""
        return f"ok: {len(self.report.topics)} topic(s), {len(self.report.legs)} leg(s){online}{warned}"

    def markdown(self) -> str:
        """The report for a job summary: what was checked, then the problems and warnings."""
        head = "## Check" + (" (online)" if self.online else "")
        lines = [head, ""]
        if self.checked:
            lines += ["| | checked | found |", "|---|---|---|"]
            lines += [f"| {ICONS[c.status]} | {c.subject} | {for_pr_body(c.detail).replace('|', '/')} |"
                      for c in self.checked]
            lines.append("")
        for label, items in (("Problems", self.problems), ("Warnings", self.warnings)):
            if items:
                lines += [f"**{label}**", "", *(f"- {for_pr_body(p.line())}" for p in items), ""]
        if not self.problems:
            lines.append(self.summary_line())
        return "\n".join(lines) + "\n"


OnlineCheck = Callable[[Path, Settings, Sequence[Leg], Mapping[str, str]], OnlineReport]
"""`run.online.online_report`, handed in by the CLI only with `--online` (so that `check` alone loads no
gateway, search or MCP client)."""


def run_check(repo: Path, *, online: OnlineCheck | None, env: Mapping[str, str]) -> CheckOutcome:
    report = check_repository(repo)
    outcome = CheckOutcome(report, online is not None, problems=list(report.problems),
                           warnings=list(report.warnings))
    if online is not None:  # the valid topics' legs are checked too, so one run lists every problem
        found = online(repo, report.settings, report.legs, env)
        outcome.checked, outcome.problems, outcome.warnings = (
            found.checked, outcome.problems + found.problems, outcome.warnings + found.warnings)
    return outcome


def output_document(outcome: CheckOutcome) -> str:
    """The document as one compact line for `$GITHUB_OUTPUT`, at most `OUTPUT_LIMIT` characters."""
    document = outcome.document()
    text = json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    while len(text) > OUTPUT_LIMIT and document["problems"]:
        document["checked"], document["warnings"] = [], []
        kept = document["problems"][: max(1, len(document["problems"]) // 2)]
        dropped = len(outcome.problems) - len(kept) + 1
        document["problems"] = [*kept[:-1], Problem(None, None, f"… and {dropped} more problem(s); `check` in "
                                                    "the run's log lists them all").document()]
        text = json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text


def check_command(repo: Path, *, online: OnlineCheck | None, as_json: bool, github_summary: bool, github_output: bool,
                  env: Mapping[str, str], say: Callable[[str], None], err: Callable[[str], None],
                  print_document: Callable[[dict[str, Any]], None]) -> ExitCode:
    output = require_runner_file(env, "GITHUB_OUTPUT") if github_output else None
    if github_summary:
        require_runner_file(env, "GITHUB_STEP_SUMMARY")
    outcome = run_check(repo, online=online, env=env)
    for problem in outcome.problems:
        err(f"error: {problem.line()}")
    for warning in outcome.warnings:
        err(f"warning: {warning.line()}")
    if as_json:
        print_document(outcome.document())
    else:
        if outcome.checked:
            say("checked online:")
            for checked in outcome.checked:
                say(checked.line())
        if not outcome.problems:
            say(outcome.summary_line())
    if github_summary:
        append_step_summary(env, outcome.markdown())
    if output is not None:
        write_github_output(output, {"check": output_document(outcome)})
    return outcome.exit_code
