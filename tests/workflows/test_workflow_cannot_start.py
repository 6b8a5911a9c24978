"""A refresh that cannot start says so where the lead looks (issue 30.1), through the workflow files themselves.

Six months is long enough for a model to be withdrawn. The emulator runs research-refresh.yml (and the
schedule wrapper) against a gateway that no longer lists the model of one topic: the plan job's
`check --online` refuses before any leg is paid for, and the notify job opens ONE issue, labelled like the
refresh PRs, that names the topic file, the field and the did-you-mean; a second failing run updates it
(and comments, so its watchers hear of it); the first run that starts closes it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.workflows.conftest import CYCLE, World, assert_no_canary, git

pytestmark = pytest.mark.e2e

WITHDRAWN = "google/gemini-3.1-pro-preview"
SUGGESTED = "google/gemini-3-flash"
TOPIC = "topics/01-composer-2.5.yaml"
NOTIFY_STEP = "Open, update or close the cannot-start issue"


def change_model(world: World, old: str, new: str) -> None:
    """What the lead does after reading the issue: edit the topic file and push to main."""
    work = world.root / "lead"
    if not work.exists():
        git(world.root, "clone", "-q", str(world.origin), str(work))
    git(work, "pull", "-q", "origin", "main")
    path = work / TOPIC
    path.write_text(path.read_text(encoding="utf-8").replace(f"model: {old}", f"model: {new}"), encoding="utf-8")
    git(work, "commit", "-q", "-am", f"Route composer-2.5 to {new}: {old} is no longer listed")
    git(work, "push", "-q", "origin", "HEAD:main")


def fresh_runner(world: World, name: str) -> None:
    world.machine.work = world.root / name  # a new run: new job workspaces and artifacts
    shutil.rmtree(world.machine.work, ignore_errors=True)


def test_a_withdrawn_model_opens_one_issue_a_second_failure_updates_it_and_a_run_that_starts_closes_it(
        world_factory) -> None:
    world = world_factory(gateway_scenario={"retired": [WITHDRAWN]})

    # 1. A dispatched run: the plan job's check refuses, nothing is paid for, one issue is opened
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})
    assert run.job("plan").result == "failure" and run.job("notify").result == "success"
    assert {run.job(name).result for name in ("research", "synthesize", "publish")} == {"skipped"}
    check = run.job("plan").instance.step("check")
    assert check.exit_code == 2
    assert (f"error: {TOPIC}: models[0].model: {WITHDRAWN} is not a model the gateway lists; did you mean "
            f"{SUGGESTED}") in check.stderr
    assert world.gateway.completions == [] and world.tavily.calls == []
    (issue,) = world.github.issues
    assert issue["state"] == "open" and issue["title"] == "The research refresh cannot start"
    assert [label["name"] for label in issue["labels"]] == ["research-refresh", "automated"]  # as the PRs
    assert f"`{TOPIC}` · `models[0].model`: {WITHDRAWN} is not a model the gateway lists; did you mean " \
           f"{SUGGESTED}" in issue["body"]
    assert "gh workflow run research-refresh.yml -f dry-run=true" in issue["body"]
    assert "/actions/runs/4242" in issue["body"]  # the run that could not start
    opened = run.job("notify").instance.step(NOTIFY_STEP).stdout
    assert f"opened issue #{issue['number']}" in opened
    assert world.github.pulls == []

    # 2. The scheduled run a month later fails the same way: the same issue, updated and commented
    fresh_runner(world, "runner-scheduled")
    world.machine.run_id = "4243"
    run = world.run("research-refresh-schedule.yml", "schedule")
    assert run.job("refresh/plan").result == "failure" and run.job("refresh/notify").result == "success"
    (issue,) = world.github.issues
    assert issue["state"] == "open" and "/actions/runs/4243" in issue["body"]
    (comment,) = world.github.comments[issue["number"]]
    assert comment["body"].startswith("Still cannot start") and "/actions/runs/4243" in comment["body"]
    assert world.gateway.completions == []

    # 3. The lead follows the did-you-mean; the next scheduled run starts, and closes the issue
    change_model(world, WITHDRAWN, SUGGESTED)
    fresh_runner(world, "runner-fixed")
    world.machine.run_id = "4244"
    run = world.run("research-refresh-schedule.yml", "schedule")
    assert run.job("refresh/plan").result == "success" and run.job("refresh/publish").result == "success"
    (issue,) = world.github.issues
    assert (issue["state"], issue["state_reason"]) == ("closed", "completed")
    closing = world.github.comments[issue["number"]][-1]["body"]
    assert closing.startswith("A refresh started") and "/actions/runs/4244" in closing
    assert f"closed issue #{issue['number']}" in run.job("refresh/notify").instance.step(NOTIFY_STEP).stdout
    assert len(world.github.pulls) == 1
    assert_no_canary(run, world)


def test_a_refused_search_key_is_said_in_the_issue_without_the_key(world_factory, tmp_path: Path) -> None:
    """"A key refused": the Tavily key is checked through its free GET /usage; the issue names the secret to
    change, never its value."""
    world = world_factory(secrets={"OPENROUTER_API_KEY": "sk-or-canary-7d1f0c9e5b3a4e21",
                                   "TAVILY_API_KEY": "tvly-canary-0a9b8c7d6e5f4a3b"})
    world.tavily.valid_keys = frozenset({"tvly-some-other-key"})
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE, "dry-run": True})
    assert run.job("plan").result == "failure"
    (issue,) = world.github.issues
    assert "`environment` · `TAVILY_API_KEY`: Tavily refused the key (HTTP 401)" in issue["body"]
    assert world.tavily.calls == []
    assert_no_canary(run, world)
