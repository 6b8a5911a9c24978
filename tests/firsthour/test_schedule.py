"""Told in time, where the lead looks (issue 30.1): the schedule's next cycle and the date GitHub pauses it
without activity, in `init`'s next steps and in `check --online` (which reads the workflow's state from the
fake GitHub, as strict as the real one); and `notify`, which opens, updates and closes the one issue that
says a refresh cannot start. The PR body's 📅 line is checked in tests/cli/test_publish.py, the workflow's
use of `notify` in tests/workflows/test_workflow_cannot_start.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.config.schedule import SEARCH_YEARS, next_run, parse_cron, pause_date
from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.github import FakeGitHub
from research_dispatch_fakes.tavily import FakeTavily
from tests.clirun import CliRun, run_cli
from tests.conftest import ROOT
from tests.profiles import examples

TOKEN = "ghs_schedule_test_token"
UTC = dt.timezone.utc
COMMITTED = "2026-11-30T12:00:00+00:00"
SCHEDULE_FILE = ".github/workflows/research-refresh-schedule.yml"


# -- the dates ------------------------------------------------------------------------------------------


def test_the_six_monthly_cron_runs_on_the_first_of_january_and_july() -> None:
    cron = "17 6 1 1,7 *"
    assert next_run([cron], dt.datetime(2026, 11, 30, 12, tzinfo=UTC)) == dt.datetime(2027, 1, 1, 6, 17, tzinfo=UTC)
    assert next_run([cron], dt.datetime(2027, 1, 1, 6, 17, tzinfo=UTC)) == dt.datetime(2027, 7, 1, 6, 17, tzinfo=UTC)
    assert pause_date(dt.date(2026, 11, 30)) == dt.date(2027, 1, 29)


def test_posix_day_fields_or_together_when_both_are_restricted() -> None:
    """`0 0 13 * 5`: every 13th and every Friday (POSIX cron), not only a Friday the 13th."""
    assert next_run(["0 0 13 * 5"], dt.datetime(2026, 11, 30, tzinfo=UTC)) == dt.datetime(2026, 12, 4, tzinfo=UTC)
    assert next_run(["0 0 13 * 5"], dt.datetime(2026, 12, 11, 1, tzinfo=UTC)) == dt.datetime(2026, 12, 13, tzinfo=UTC)
    assert next_run(["0 12 * * mon"], dt.datetime(2026, 11, 30, 13, tzinfo=UTC)) == \
        dt.datetime(2026, 12, 7, 12, tzinfo=UTC)
    assert next_run(["not a cron"], dt.datetime(2026, 11, 30, tzinfo=UTC)) is None


CRONS = st.tuples(st.sampled_from(["0", "17", "*/15", "5,35"]), st.sampled_from(["0", "6", "*/6", "9-17"]),
                  st.sampled_from(["*", "1", "1,15", "31"]), st.sampled_from(["*", "1,7", "2", "12"]),
                  st.sampled_from(["*", "0", "1-5"])).map(" ".join)


@given(CRONS, st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2030, 12, 31)))
@settings(max_examples=examples(60), deadline=None)
def test_the_next_run_matches_the_cron_and_no_earlier_day_does(cron: str, after: dt.datetime) -> None:
    after = after.replace(tzinfo=UTC)
    found = next_run([cron], after)
    parsed = parse_cron(cron)
    if found is None:  # a cron that never fires (`0 0 31 2 *`): no day of the years searched runs
        assert not any(parsed.runs_on(after.date() + dt.timedelta(days=n)) for n in range(366 * SEARCH_YEARS))
        return
    assert found > after
    assert parsed.runs_on(found.date()) and found.hour in parsed.hours and found.minute in parsed.minutes
    day = after.date() + dt.timedelta(days=1)
    while day < found.date():  # no day in between runs at all
        assert not parsed.runs_on(day), (cron, after, found, day)
        day += dt.timedelta(days=1)


# -- init ----------------------------------------------------------------------------------------------


def test_init_says_when_the_schedule_pauses_and_the_command_that_re_enables_it(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    result = run_cli("init", "--repo", str(tmp_path), "--ref", "a" * 40)
    assert result.code == 0, result.output
    today = dt.datetime.now(UTC).date()
    text = " ".join(result.output.split())
    assert "The schedule (research-refresh-schedule.yml) runs the first cycle " in text
    assert (f"GitHub pauses a public repository's schedule after 60 days without activity: if nothing is pushed "
            f"after today, on {today + dt.timedelta(days=60):%Y-%m-%d}") in text
    assert "       gh workflow enable research-refresh-schedule.yml" in result.output
    assert "gh workflow run research-refresh.yml -f dry-run=true" in result.output
    assert "free: the plan, every key and model checked, the cost estimate" in text


# -- check --online: the schedule's state through the fake GitHub --------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Mia",
                "GIT_AUTHOR_EMAIL": "mia@example.invalid", "GIT_COMMITTER_NAME": "Mia",
                "GIT_COMMITTER_EMAIL": "mia@example.invalid", "GIT_AUTHOR_DATE": COMMITTED,
                "GIT_COMMITTER_DATE": COMMITTED})
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture
def review(tmp_path: Path) -> Path:
    """A repository as init leaves it (one topic of two families, a judge of a third), with the workflows,
    committed on 2026-11-30 and pushed to a bare origin."""
    repo = tmp_path / "review"
    (repo / "topics").mkdir(parents=True)
    shutil.copytree(ROOT / ".github" / "workflows", repo / ".github" / "workflows")
    (repo / "topics" / "01-rag.yaml").write_text(
        "id: rag\ntitle: RAG\nscope: Survey RAG evaluation.\nmodels:\n  - model: openai/gpt-5\n"
        "  - model: anthropic/claude-sonnet-4.6\n", encoding="utf-8")
    (repo / "pyproject.toml").write_text('[tool.research-dispatch.synthesis]\njudge_models = '
                                         '["google/gemini-3.1-pro-preview"]\n', encoding="utf-8")
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Set up the review")
    _git(tmp_path, "clone", "-q", "--bare", str(repo), str(tmp_path / "origin.git"))
    return repo


@pytest.fixture
def services(review: Path) -> Iterator[tuple[FakeGitHub, dict[str, str]]]:
    with FakeGateway() as gateway, FakeTavily() as tavily, \
            FakeGitHub(git_dir=review.parent / "origin.git", token=TOKEN, read_tokens=("ghs_read",)) as github:
        yield github, {"OPENROUTER_API_KEY": "sk-or-schedule-test", "OPENROUTER_BASE_URL": gateway.base_url,
                       "TAVILY_API_KEY": "tvly-schedule-test", "TAVILY_BASE_URL": tavily.base_url,
                       "GITHUB_TOKEN": "ghs_read", "GITHUB_REPOSITORY": github.full_name,
                       "GITHUB_API_URL": github.base_url}


def schedule_line(result: CliRun) -> str:
    return next(line for line in result.stdout.splitlines() if line.startswith(("  ✓ schedule", "  ! schedule",
                                                                               "  ✗ schedule", "  - schedule")))


def expected_next_cycle(now: dt.datetime) -> str:
    """06:17 UTC on 1 January or 1 July, whichever comes first after `now` (worked out by hand here)."""
    year = now.year
    if now < dt.datetime(year, 1, 1, 6, 17, tzinfo=UTC):
        when = dt.datetime(year, 1, 1, 6, 17, tzinfo=UTC)
    elif now < dt.datetime(year, 7, 1, 6, 17, tzinfo=UTC):
        when = dt.datetime(year, 7, 1, 6, 17, tzinfo=UTC)
    else:
        when = dt.datetime(year + 1, 1, 1, 6, 17, tzinfo=UTC)
    return f"{when.year}-H{1 if when.month == 1 else 2}, on {when:%Y-%m-%d} 06:17 UTC"


@pytest.mark.slow
def test_check_online_reports_an_active_schedule_its_next_cycle_and_its_pause_date(
        review: Path, services: tuple[FakeGitHub, dict[str, str]]) -> None:
    _, env = services
    result = run_cli("check", "--online", "--repo", str(review), env=env)
    assert result.code == 0, result.output
    line = schedule_line(result)
    assert line.startswith("  ✓ schedule: research-refresh-schedule.yml is active; next cycle ")
    assert expected_next_cycle(dt.datetime.now(UTC)) in line
    assert "the last commit on main was on 2026-11-30, so without activity GitHub pauses it on 2027-01-29" in line


@pytest.mark.slow
@pytest.mark.parametrize("state", ["disabled_inactivity", "disabled_manually"])
def test_a_paused_schedule_is_a_warning_with_the_command_that_re_enables_it(
        review: Path, services: tuple[FakeGitHub, dict[str, str]], state: str) -> None:
    github, env = services
    github.set_workflow_state("research-refresh-schedule.yml", state)
    result = run_cli("check", "--online", "--repo", str(review), env=env)
    assert result.code == 0, result.output  # not bad input: manual dispatch still works
    assert schedule_line(result).startswith(f"  ! schedule: research-refresh-schedule.yml is {state}; next cycle ")
    assert (f"warning: {SCHEDULE_FILE}: state: GitHub has paused it ({state}): the next cycle will not run until it "
            "is re-enabled: `gh workflow enable research-refresh-schedule.yml`") in result.stderr


@pytest.mark.slow
def test_without_actions_read_or_a_token_the_schedule_is_said_not_checked(
        review: Path, services: tuple[FakeGitHub, dict[str, str]]) -> None:
    github, env = services
    github.configure(actions_read=False)
    result = run_cli("check", "--online", "--repo", str(review), env=env)
    assert result.code == 0, result.output
    assert "  ! schedule: research-refresh-schedule.yml: GitHub did not say its state: HTTP 403" in result.stdout
    assert "(the token needs `actions: read`)" in result.stdout
    bare = {k: v for k, v in env.items() if not k.startswith("GITHUB_")}
    result = run_cli("check", "--online", "--repo", str(review), env={**bare, "GITHUB_TOKEN": ""})
    assert "  - schedule: not asked: set GITHUB_TOKEN and GITHUB_REPOSITORY" in result.stdout


# -- notify: the one cannot-start issue ----------------------------------------------------------------------


def check_document(*problems: tuple[str | None, str | None, str]) -> str:
    return json.dumps({"schema": "research-dispatch/check@2", "ok": not problems, "topics": 1, "legs": 2,
                       "online": True, "problems": [{"file": f, "field": d, "message": m} for f, d, m in problems],
                       "warnings": [], "checked": []})


def notify(review: Path, github: FakeGitHub, check: str, result: str, run_id: str = "7") -> CliRun:
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": github.full_name, "GITHUB_API_URL": github.base_url,
           "GITHUB_RUN_ID": run_id, "RESEARCH_DISPATCH_CHECK": check}
    return run_cli("notify", "--plan-result", result, "--repo", str(review), env=env)


@pytest.mark.slow
def test_notify_opens_one_issue_updates_it_and_closes_it_when_a_run_starts(review: Path) -> None:
    withdrawn = ("topics/01-rag.yaml", "models[0].model", "openai/gpt-4.5-preview is not a model the gateway "
                 "lists; did you mean openai/gpt-5?")
    with FakeGitHub(git_dir=review.parent / "origin.git", token=TOKEN) as github:
        github.seed_pull(head="research-refresh/2026-H2", title="the previous refresh",
                         labels=["research-refresh", "automated"])
        first = notify(review, github, check_document(withdrawn), "failure", run_id="7")
        assert first.code == 0, first.output
        (issue,) = github.issues
        assert first.stdout.strip().startswith(f"opened issue #{issue['number']}: the research refresh cannot start")
        assert "- `topics/01-rag.yaml` · `models[0].model`: openai/gpt-4.5-preview is not a model the gateway lists; " \
               "did you mean openai/gpt-5?" in issue["body"]
        assert [label["name"] for label in issue["labels"]] == ["research-refresh", "automated"]

        second = notify(review, github, check_document(withdrawn, ("environment", "TAVILY_API_KEY",
                                                                  "Tavily refused the key (HTTP 401)")),
                        "failure", run_id="8")
        assert second.stdout.startswith(f"updated issue #{issue['number']}")
        (issue,) = github.issues  # still one
        assert "`environment` · `TAVILY_API_KEY`: Tavily refused the key (HTTP 401)" in issue["body"]
        assert "/actions/runs/8" in issue["body"]
        (comment,) = github.comments[issue["number"]]
        assert comment["body"].startswith("Still cannot start") and "2 problem(s)" in comment["body"]

        third = notify(review, github, check_document(), "success", run_id="9")
        assert third.stdout.startswith(f"closed issue #{issue['number']}")
        (issue,) = github.issues
        assert issue["state"] == "closed" and issue["state_reason"] == "completed"
        assert github.comments[issue["number"]][-1]["body"].startswith("A refresh started")
        assert github.pulls[0]["state"] == "open"  # the PR in the same issue list was left alone

        again = notify(review, github, check_document(), "success")
        assert again.stdout.strip() == "the refresh started; no cannot-start issue was open"
        assert notify(review, github, "", "cancelled").stdout.strip() == "the plan job was cancelled: nothing to say"


@pytest.mark.slow
def test_notify_says_a_plan_that_failed_before_its_check_and_refuses_a_document_that_is_not_one(
        review: Path) -> None:
    with FakeGitHub(git_dir=review.parent / "origin.git", token=TOKEN) as github:
        assert notify(review, github, "", "failure").code == 0
        (issue,) = github.issues
        assert "the plan job failed before any leg ran" in issue["body"]
        bad = notify(review, github, '{"problems": "all of them"}', "failure")
        assert bad.code == 2
        assert bad.stderr.startswith("error: --check: is not a research-dispatch/check@2 document")
