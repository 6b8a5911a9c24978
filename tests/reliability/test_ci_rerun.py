"""The issue's first story in GitHub Actions: research-refresh.yml run twice, the second time for one topic.

Runs the workflow's own steps (tests/workflows/runner_harness.py: every `run:` step with bash in a fresh
checkout per job, artifacts between jobs, the fake GitHub in front of a bare origin). The second dispatch
re-runs only the topic that failed: its synthesize and publish jobs start from fresh checkouts that hold
none of the first run's reports, so only the refresh branch remembers them.
"""

from __future__ import annotations

import json

import pytest

from tests.workflows.conftest import CYCLE, WORKFLOWS, world_factory  # noqa: F401  (the fixture)
from tests.workflows.expressions import Scope, render_str
from tests.workflows.runner_harness import load_workflow

pytestmark = pytest.mark.e2e

reliability = pytest.mark.reliability
BRANCH = f"research-refresh/{CYCLE}"
STEMS = ["01-composer-2.5", "02-diloco-family", "03-monarch-torchforge-openenv", "04-verl-trl",
         "05-trace-replay-distillation"]


def branch_reports(world) -> dict[str, str]:
    names = world.origin_git("ls-tree", "--name-only", f"{BRANCH}:research").split()
    return {n[:-3]: world.origin_git("show", f"{BRANCH}:research/{n}") for n in names if n.endswith(".md")}


@reliability(area="refresh", case="research-refresh.yml with one leg failing, then dispatched again with "
                                  "topics=<that leg> (fresh checkouts in every job)",
             expect="the second run keeps the first run's four reports on the branch and adds the fifth; its "
                    "synthesis lists exactly the five; one PR, draft + partial after the first run, ready after the "
                    "second")
def test_a_ci_rerun_of_one_topic_keeps_every_other_report(world_factory) -> None:  # noqa: F811
    world = world_factory(gateway_scenario={"rules": [{"match": {"session": "*:04-verl-trl"}, "status": 402}]})
    first = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})
    assert first.job("publish").result == "success"
    after_first = branch_reports(world)
    assert sorted(after_first) == [s for s in STEMS if s != "04-verl-trl"]
    (pr,) = world.github.pulls
    assert pr["draft"] is True and "partial" in {label["name"] for label in pr["labels"]}

    world.gateway.set_scenario({})
    world.machine.work = world.root / "runner-second-run"  # a new run: new job workspaces and artifacts
    world.machine.run_id = "4243"
    second = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE, "topics": "verl-trl"})
    assert {job: r.result for job, r in second.jobs.items()} == {
        "plan": "success", "notify": "success", "research": "success", "synthesize": "success", "publish": "success"}
    after_second = branch_reports(world)
    assert sorted(after_second) == STEMS
    assert {s: after_second[s] for s in after_first} == after_first, "a report of the first run was lost"
    ledger = json.loads(world.origin_git("show", f"{BRANCH}:framework/claims.json"))
    assert sorted(r["path"] for r in ledger["reports"]) == [f"research/{s}.md" for s in STEMS]
    (pr,) = world.github.pulls
    assert pr["draft"] is False and "partial" not in {label["name"] for label in pr["labels"]}
    assert pr["title"].startswith(f"docs(research): refresh {CYCLE} — 5 reports, synthesis")


@reliability(area="refresh", case="Actions \"Re-run failed jobs\" after one leg failed (upload-artifact v7 in the same "
                                  "run)",
             expect="attempt 2 runs only the failed leg, its synthesize and publish jobs; every upload of an "
                    "existing artifact name succeeds (overwrite: true); the same PR ends ready with five reports and a "
                    "synthesis of exactly the five")
def test_rerun_failed_jobs_after_a_failed_leg_ends_in_one_pr(world_factory) -> None:  # noqa: F811
    world = world_factory(gateway_scenario={"rules": [{"match": {"session": "*:04-verl-trl"}, "status": 402}]})
    first = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})
    assert first.job("research").result == "failure" and first.job("publish").result == "success"
    (pr,) = world.github.pulls
    assert pr["draft"] is True

    world.gateway.set_scenario({})
    calls_before = len(world.gateway.completions)
    second = world.rerun_failed(first)
    assert second.attempt == 2
    assert {job: r.result for job, r in second.jobs.items()} == {
        "plan": "success", "notify": "success", "research": "success", "synthesize": "success", "publish": "success"}
    assert second.jobs["plan"] is first.jobs["plan"]  # not run again
    rerun = [inst for inst in second.job("research").instances if inst not in first.job("research").instances]
    assert [inst.matrix["leg"] for inst in rerun] == ["04-verl-trl"]
    sessions = {c["session"].split(":", 1)[1] for c in world.gateway.completions[calls_before:]
                if c.get("session") and ":synthesis:" not in c["session"]}
    assert sessions == {"04-verl-trl"}, sessions  # only the failed leg was paid for again
    upload = rerun[0].step("Upload the leg's report, call log, evidence, status and trace")
    assert upload.outcome == "success", upload.stderr
    assert sorted(branch_reports(world)) == STEMS
    ledger = json.loads(world.origin_git("show", f"{BRANCH}:framework/claims.json"))
    assert sorted(r["path"] for r in ledger["reports"]) == [f"research/{s}.md" for s in STEMS]
    (pr,) = world.github.pulls
    assert pr["draft"] is False and "partial" not in {label["name"] for label in pr["labels"]}


@reliability(area="refresh", case="Actions: the synthesize job fails (the gateway answers 503 to every synthesis call)",
             expect="the publish job still runs (needs.synthesize.result == 'failure'), with write credentials only "
                    "there: the five reports are pushed, no synthesis on the branch, the PR is a draft labelled "
                    "partial, '(partial: synthesis missing)', saying the synthesize job failed")
def test_a_failed_synthesize_job_still_publishes_the_reports(world_factory) -> None:  # noqa: F811
    world = world_factory(gateway_scenario={"rules": [{"match": {"session": "*:synthesis:*"}, "status": 503}]})
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})
    assert {job: r.result for job, r in run.jobs.items()} == {
        "plan": "success", "notify": "success", "research": "success", "synthesize": "failure", "publish": "success"}
    assert run.job("synthesize").instance.step("Upload the synthesis").outcome == "success"
    assert sorted(branch_reports(world)) == STEMS
    files = world.origin_git("ls-tree", "-r", "--name-only", BRANCH).split()
    assert not [f for f in files if f.startswith("framework/")], files
    (pr,) = world.github.pulls
    assert pr["draft"] is True and "partial" in {label["name"] for label in pr["labels"]}
    assert "(partial: synthesis missing)" in pr["title"] and "synthesize job of this run failed" in pr["body"]


@reliability(area="refresh", case="a scheduled run (empty cycle input) and a dispatch naming the same cycle",
             expect="both runs fall in one concurrency group (research-refresh), never cancelled in progress")
def test_a_schedule_and_a_dispatch_of_one_cycle_share_a_concurrency_group() -> None:
    concurrency = load_workflow(WORKFLOWS / "research-refresh.yml")["concurrency"]
    groups = {render_str(concurrency["group"], Scope({"github": {"event_name": event}, "inputs": {"cycle": cycle},
                                                      "vars": {}}))
              for event, cycle in (("schedule", ""), ("workflow_dispatch", CYCLE), ("workflow_call", ""))}
    assert groups == {"research-refresh"} and concurrency["cancel-in-progress"] is False


@reliability(area="publish", case="Actions dispatch when the cycle's PR was closed without merging",
             expect="the plan job fails (exit 2 naming --cycle and the PR, with what to do) with its read-only token; "
                    "no research job runs, no model call is made, nothing is pushed")
def test_the_plan_job_refuses_a_cycle_whose_pr_was_closed(world_factory) -> None:  # noqa: F811
    world = world_factory()
    world.origin_git("branch", BRANCH, "main")
    world.github.seed_pull(head=BRANCH, title="closed by a reviewer", state="closed")
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})
    assert run.job("plan").result == "failure"
    assert {run.job(name).result for name in ("research", "synthesize", "publish")} == {"skipped"}
    plan = run.job("plan").instance.step("plan")
    assert plan.exit_code == 2 and "--cycle" in plan.stderr and "closed without merging" in plan.stderr
    assert world.gateway.completions == []
    world.machine.work = world.root / "runner-dry-run"  # a new run: new job workspaces and artifacts
    dry = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE, "dry-run": True,
                                                                   "topics": "verl-trl"})
    assert dry.job("plan").result == "success"  # a dry run publishes nothing: it may run
