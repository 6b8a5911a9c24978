"""research-refresh.yml end to end: its own `run:` steps, in job order, against the fakes and a bare origin.

The harness (runner_harness.py) executes every `run:` step of the workflow file for real with bash in a
fresh checkout per job; only the actions and the install step are emulated. So these tests fail on a
typo in a flag, a wrong output or artifact name, a missing `env:` mapping or a wrong `if:`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import CANARY
from tests.workflows.conftest import CYCLE, WORKFLOWS, World, assert_no_canary
from tests.workflows.runner_harness import Run

pytestmark = pytest.mark.e2e

STEMS = ["01-composer-2.5", "02-diloco-family", "03-monarch-torchforge-openenv", "04-verl-trl",
         "05-trace-replay-distillation"]
BRANCH = f"research-refresh/{CYCLE}"


def secrets_seen(run) -> dict[tuple[str, str], set[str]]:
    """{(job, step): names of the secrets whose values that step's environment held}."""
    names = {value: name for name, value in CANARY.items()}
    seen: dict[tuple[str, str], set[str]] = {}
    for job in run.all_jobs():
        for inst in job.instances:
            for step in inst.steps:
                found = {names[v] for v in step.env.values() if v in names}
                if found:
                    seen.setdefault((job.job_id, step.name), set()).update(found)
    return seen


def test_dispatch_runs_plan_legs_synthesis_and_publishes_one_pr(world_factory) -> None:
    world = world_factory()
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})

    assert {job: r.result for job, r in run.jobs.items()} == {
        "plan": "success", "notify": "success", "research": "success", "synthesize": "success",
        "publish": "success"}
    assert run.concurrency_group == "research-refresh"  # the schedule's run shares it (test_ci_rerun.py)

    # plan: the matrix comes from the real `plan --github-output`
    plan = run.job("plan")
    matrix = json.loads(plan.outputs["matrix"])
    assert [entry["leg"] for entry in matrix["include"]] == STEMS
    assert plan.outputs["count"] == "5" and plan.outputs["cycle"] == CYCLE

    # research: one job per matrix entry, at most max-parallel (default 4) at once, one artifact per leg
    research = run.job("research")
    assert sorted(inst.matrix["leg"] for inst in research.instances) == STEMS
    assert research.max_parallel == 4 and 1 <= research.peak_parallel <= 4
    for stem in STEMS:
        files = sorted(p.relative_to(run.artifacts / f"leg-{stem}").as_posix()
                       for p in (run.artifacts / f"leg-{stem}").rglob("*") if p.is_file())
        assert files == [f"build/legs/{stem}.json", f"build/traces/{stem}.jsonl", f"research/{stem}.calls.jsonl",
                         f"research/{stem}.evidence.jsonl", f"research/{stem}.md"]

    # synthesize: re-validated every leg file, wrote the route table, claim diff and PR preview
    synth = run.job("synthesize").instance
    assert "imported 25 file(s); missing: nothing" in synth.step("Import leg files at their computed paths").stdout
    summary = synth.summary
    assert "## Route fidelity" in summary and summary.count("| exact |") == 5
    assert "## Synthesis" in summary and "### Claim diff" in summary
    assert "## Pull request preview (dry run)" in summary
    synthesis = run.artifacts / "synthesis"
    for rel in ["framework/composer-replication-framework.md", "framework/claims.json", "docs/METHODOLOGY.md",
                *(f"research/{stem}{suffix}" for stem in STEMS for suffix in (".md", ".evidence.jsonl"))]:
        assert (synthesis / rel).is_file(), rel

    # publish: one commit per report with the trailers, one synthesis commit, one PR
    assert world.branches() == ["main", BRANCH]
    subjects = world.origin_git("log", "--reverse", "--format=%s", f"main..{BRANCH}").splitlines()
    assert len(subjects) == 6 and subjects[-1] == f"research(synthesis): regenerate for {CYCLE}"
    for stem, subject in zip(STEMS, subjects, strict=False):
        assert stem in subject
        committed = world.origin_git("log", "-1", "--name-only", "--format=", f"--grep={stem}", BRANCH).split()
        assert sorted(committed) == [f"research/{stem}.calls.jsonl", f"research/{stem}.evidence.jsonl",
                                     f"research/{stem}.md"]  # the evidence travelled with its report
    trailers = world.origin_git("log", "--format=%(trailers)%x00", f"main..{BRANCH}").split("\x00")
    with_route = [t for t in trailers if "Route: exact" in t]
    assert len(with_route) == 5
    assert all("Requested-Model:" in t and "Served-Model:" in t and "Served-Provider:" in t for t in with_route)
    pulls = world.github.pulls
    assert len(pulls) == 1 and pulls[0]["head"]["ref"] == BRANCH and not pulls[0]["draft"]
    assert "## Pull request" in run.job("publish").summary

    # each key reached only the step that needs it
    assert secrets_seen(run) == {
        ("plan", "Check the topics, every key and model, and the schedule (spends nothing)"): {
            "OPENROUTER_API_KEY", "TAVILY_API_KEY"},
        ("research", "Research"): {"OPENROUTER_API_KEY", "TAVILY_API_KEY"},
        ("synthesize", "Synthesize"): {"OPENROUTER_API_KEY"},
        ("publish", "Commit one commit per report, push, create or update the PR"): {"GITHUB_TOKEN"},
    }
    assert_no_canary(run, world)


def from_a_branch(world_factory, inputs: dict[str, object]) -> tuple[World, Run, dict[str, str]]:
    """What a maintainer does to try a change: dispatch two topics from their branch with `inputs`; returns
    the world, the run and every branch's tip before it."""
    world = world_factory()
    world.origin_git("branch", "try-refresh", "main")
    before = {ref: world.origin_git("rev-parse", ref) for ref in world.branches()}
    run = world.run("research-refresh.yml", "workflow_dispatch",
                    {"cycle": CYCLE, "topics": "diloco-family,verl-trl", **inputs}, ref="refs/heads/try-refresh")
    return world, run, before


def test_a_dry_run_is_free_checks_plans_and_estimates_in_the_job_summary(world_factory) -> None:
    """Issue 30.6: to a user of pip, terraform or gh a dry run costs nothing. Only the plan job (check
    --online, the plan, the estimate) and notify run: no model call, no search, nothing written."""
    world, run, before = from_a_branch(world_factory, {"dry-run": True})

    assert {job: r.result for job, r in run.jobs.items()} == {
        "plan": "success", "notify": "success", "research": "skipped", "synthesize": "skipped",
        "publish": "skipped"}
    assert world.gateway.completions == [] and world.tavily.calls == []  # nothing paid for
    assert [r.path for r, _ in world.tavily.requests] == ["/usage"]  # the key checked for free
    summary = run.job("plan").summary
    assert "## Check (online)" in summary and "| ✓ | search tavily |" in summary
    assert "| ✓ | schedule | research-refresh-schedule.yml is active; next cycle " in summary
    assert "## Plan: 2 leg(s), worst case $6.00, estimate ~$" in summary and "02-diloco-family" in summary
    # nothing written: no new branch, no moved ref, no PR, no issue, no comment, no label
    assert {ref: world.origin_git("rev-parse", ref) for ref in world.branches()} == before
    state = world.github.state()
    assert state["pulls"] == [] and state["issues"] == [] and state["labels"] == []
    assert not any(state["comments"].values())
    assert "the refresh started; no cannot-start issue was open" in run.job("notify").instance.step(
        "Open, update or close the cannot-start issue").stdout
    assert_no_canary(run, world)


def test_publish_false_runs_the_paid_legs_and_the_synthesis_and_writes_nothing(world_factory) -> None:
    """The paid legs without publishing have their own input: what a maintainer runs to try a change."""
    world, run, before = from_a_branch(world_factory, {"publish": False})

    assert {job: r.result for job, r in run.jobs.items()} == {
        "plan": "success", "notify": "success", "research": "success", "synthesize": "success",
        "publish": "skipped"}
    assert sorted(inst.matrix["leg"] for inst in run.job("research").instances) == ["02-diloco-family",
                                                                                    "04-verl-trl"]
    assert world.gateway.completions, "the legs called the model"
    summary = run.job("synthesize").summary
    assert "## Pull request preview (dry run)" in summary
    assert f"docs(research): refresh {CYCLE} (partial: 2/5 legs) — 2 reports, synthesis" in summary
    assert {ref: world.origin_git("rev-parse", ref) for ref in world.branches()} == before
    state = world.github.state()
    assert state["pulls"] == [] and state["labels"] == [] and not any(state["comments"].values())
    assert_no_canary(run, world)


def test_a_typo_in_a_flag_fails_the_run(world_factory, tmp_path: Path) -> None:
    """The harness runs the file's own commands: `--export` misspelt in a copy of the YAML is caught."""
    copy = tmp_path / "edited"
    shutil.copytree(WORKFLOWS, copy / ".github" / "workflows")
    path = copy / ".github" / "workflows" / "research-refresh.yml"
    text = path.read_text(encoding="utf-8")
    assert text.count("--export leg-out") == 1
    path.write_text(text.replace("--export leg-out", "--exprot leg-out"), encoding="utf-8")

    world = world_factory(workflows_root=copy)
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE, "topics": "diloco-family"})

    assert run.conclusion == "failure"
    leg = run.job("research").instance
    assert leg.result == "failure"
    assert "No such option '--exprot'" in leg.step("Research").stderr
    assert not (run.artifacts / "leg-02-diloco-family").exists()
    assert world.github.pulls == []
