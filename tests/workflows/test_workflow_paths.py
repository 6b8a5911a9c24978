"""The other ways a refresh runs: a failed leg, the six-monthly schedule, and the GitHub App token."""

from __future__ import annotations

import json

import pytest

from research_dispatch.config.plan import current_cycle
from tests.workflows.conftest import APP_PRIVATE_KEY, APP_TOKEN, CYCLE, SECRETS, assert_no_canary

pytestmark = pytest.mark.e2e

FAILED = "03-monarch-torchforge-openenv"
UNVERIFIED = "04-verl-trl"


def test_a_failed_leg_and_an_unverified_route_still_get_synthesis_and_a_draft_pr(world_factory) -> None:
    """One leg's gateway answers 402 (the leg fails, exit 1); another is served by a different model than
    requested (route model_fallback, exit 3). Both jobs are red by design; synthesis and publish go on."""
    world = world_factory(gateway_scenario={"rules": [
        {"match": {"session": f"{CYCLE}:{FAILED}"}, "status": 402},
        {"match": {"session": f"{CYCLE}:{UNVERIFIED}"}, "serve_model": "anthropic/claude-haiku-4.5"}]})
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})

    research = run.job("research")
    assert research.result == "failure" and run.conclusion == "failure"
    by_leg = {inst.matrix["leg"]: inst for inst in research.instances}
    assert by_leg.pop(FAILED).step("Research").exit_code == 1
    assert by_leg.pop(UNVERIFIED).step("Research").exit_code == 3
    assert {inst.result for inst in by_leg.values()} == {"success"}  # fail-fast: false
    # the failed leg still uploaded its status (and trace), but has no report
    leg = run.artifacts / f"leg-{FAILED}"
    status = json.loads((leg / "build" / "legs" / f"{FAILED}.json").read_text(encoding="utf-8"))
    assert status["status"] == "failed" and not (leg / "research" / f"{FAILED}.md").exists()

    synth = run.job("synthesize")
    assert synth.result == "success"
    assert f"missing: {FAILED}" in synth.instance.step("Import leg files at their computed paths").stdout
    assert synth.instance.step("Route table (exit 3 means some route is not verified; the PR will be a draft)"
                               ).exit_code == 3
    assert synth.summary.count("| exact |") == 3 and "| model_fallback ⚠ |" in synth.summary

    assert run.job("publish").result == "success"
    (pr,) = world.github.pulls
    assert pr["draft"] is True
    assert FAILED in pr["body"] and UNVERIFIED in pr["body"]
    assert "partial" in {label["name"] for label in pr["labels"]}
    commits = world.origin_git("log", "--format=%s", f"main..research-refresh/{CYCLE}").splitlines()
    assert len(commits) == 5 and not any(FAILED in subject for subject in commits)  # 4 reports + synthesis
    assert_no_canary(run, world)


def test_the_schedule_wrapper_runs_the_main_workflow_with_default_inputs(world_factory) -> None:
    world = world_factory()
    run = world.run("research-refresh-schedule.yml", "schedule")

    assert list(run.jobs) == ["refresh"] and run.jobs["refresh"].result == "success"
    called = run.jobs["refresh"].called
    assert called is not None and called.workflow.name == "research-refresh.yml"
    assert called.event == "schedule"
    assert called.inputs == {"topics": "", "models": "", "max-parallel": "4", "dry-run": False, "publish": True,
                             "cycle": ""}
    assert called.concurrency_group == "research-refresh"  # as a dispatch naming this cycle: one group
    cycle = run.job("refresh/plan").outputs["cycle"]
    assert cycle == current_cycle()
    assert run.job("refresh/research").max_parallel == 4
    assert len(run.job("refresh/research").instances) == 5
    assert run.job("refresh/publish").result == "success"
    (pr,) = world.github.pulls
    assert pr["head"]["ref"] == f"research-refresh/{cycle}" and not pr["draft"]
    assert_no_canary(run, world)


def test_with_a_github_app_configured_publish_uses_the_app_token(world_factory) -> None:
    """The fake GitHub accepts only the App token here: a PR proves the token expression picked it."""
    world = world_factory(vars={"REFRESH_APP_CLIENT_ID": "Iv23liExampleClientId"}, app_token=APP_TOKEN,
                          secrets={**SECRETS, "REFRESH_APP_PRIVATE_KEY": APP_PRIVATE_KEY})
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE, "topics": "verl-trl"})

    publish = run.job("publish").instance
    token_step = publish.step("app-token")
    assert token_step.kind == "uses:actions/create-github-app-token" and token_step.outcome == "success"
    assert publish.step("Commit one commit per report, push, create or update the PR").env["GITHUB_TOKEN"] == APP_TOKEN
    assert run.conclusion == "success"
    (pr,) = world.github.pulls
    # one topic of five: the other planned legs have no report of this cycle, so the PR says partial
    assert pr["title"].startswith(f"docs(research): refresh {CYCLE} (partial: 1/5 legs) — 1 report, synthesis")
    assert_no_canary(run, world)


def test_a_topic_filtered_refresh_counts_every_planned_leg(world_factory) -> None:
    """A `--topics` refresh on a fresh repository: the legs it did not run have no report of this cycle,
    so the preview says partial and names them missing, not failed (docs/ARCHITECTURE.md: "A refresh never
    loses work" — FIXED)."""
    world = world_factory()
    run = world.run("research-refresh.yml", "workflow_dispatch",
                    {"cycle": CYCLE, "topics": "verl-trl", "publish": False})
    assert run.job("synthesize").result == "success"
    preview = run.job("synthesize").instance.step("Preview the pull request").stdout
    assert preview.splitlines()[0] == f"docs(research): refresh {CYCLE} (partial: 1/5 legs) — 1 report, synthesis, " \
                                      "4 missing"
