"""Another repository's refresh, end to end: the caller workflows `research-dispatch init` wrote, calling
this repository's research-refresh.yml as a remote reusable workflow at a pinned commit.

Two "GitHub" repositories: the adopter (`acme/review`: init's files, its example topic, no copy of
research-dispatch) and research-dispatch itself (`research-dispatch/research-dispatch`: this checkout's
workflow, lock file and package, committed). The harness resolves the caller's
`uses: research-dispatch/research-dispatch/.github/workflows/research-refresh.yml@<sha>` in the second
repository, and every called job checks out the adopter at the workspace root and research-dispatch at
`job.workflow_sha` beside it. Commands, fakes and assertions as in test_workflow_run.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from research_dispatch.adopt.init import UPSTREAM
from tests.conftest import ROOT
from tests.workflows.adopter import scaffold
from tests.workflows.conftest import CYCLE, assert_no_canary, git
from tests.workflows.runner_harness import WorkflowError

pytestmark = pytest.mark.e2e

LEGS = ["01-example.anthropic-claude-sonnet-4.6", "01-example.openai-gpt-5"]


def tool_repository(root: Path) -> tuple[Path, str]:
    """research-dispatch as it is on disk now, committed to a bare origin; returns it and the commit."""
    src = root / "research-dispatch"
    src.mkdir(parents=True)
    shutil.copytree(ROOT / ".github", src / ".github")
    shutil.copytree(ROOT / "scripts" / "research_dispatch", src / "scripts" / "research_dispatch",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "requirements.lock", "README.md"):
        shutil.copy(ROOT / name, src / name)
    git(root, "init", "-q", "-b", "main", str(src))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "research-dispatch")
    sha = git(src, "rev-parse", "HEAD")
    # main moves on after the pinned commit, and breaks the install: a caller pinned to `sha` must not notice
    git(src, "rm", "-q", "requirements.lock")
    git(src, "commit", "-q", "-m", "later work on main")
    origin = root / "research-dispatch.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    git(src, "push", "-q", str(origin), "main")
    return origin, sha


@pytest.fixture
def adopter(world_factory, tmp_path: Path):
    def build(**kwargs):
        tool_origin, sha = tool_repository(tmp_path / "upstream")
        review = scaffold(tmp_path / "review", ref=sha)
        world = world_factory(source=review, workflows_root=review, repositories={UPSTREAM: tool_origin}, **kwargs)
        return world, sha
    return build


def test_the_adopters_dispatch_runs_research_dispatch_at_the_pinned_commit_on_its_own_topics(adopter) -> None:
    world, sha = adopter()
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})

    assert list(run.jobs) == ["refresh"] and run.conclusion == "success"
    called = run.jobs["refresh"].called
    assert called is not None and called.source is not None
    assert (called.source.repository, called.source.sha) == (UPSTREAM, sha)
    assert {job: r.result for job, r in called.jobs.items()} == {
        "plan": "success", "notify": "success", "research": "success", "synthesize": "success", "publish": "success"}

    # every called job: the adopter at the root, research-dispatch at the pinned commit beside it
    for job in called.all_jobs():
        for inst in job.instances:
            tool = inst.step("Check out research-dispatch at the commit this workflow was called at")
            assert f"checked out {UPSTREAM}@{sha}" in tool.stdout
            assert git(inst.workspace / ".research-dispatch", "rev-parse", "HEAD") == sha
            assert (inst.workspace / "topics" / "01-example.yaml").is_file()
            assert not (inst.workspace / "topics" / "02-diloco-family.yaml").exists()
            assert inst.step("Install research-dispatch").outcome == "success"

    # the adopter's topics: one example topic, two legs of two families
    matrix = json.loads(run.job("refresh/plan").outputs["matrix"])
    assert sorted(entry["leg"] for entry in matrix["include"]) == LEGS
    assert sorted(inst.matrix["leg"] for inst in run.job("refresh/research").instances) == LEGS

    # the adopter's repository gets the refresh: one commit per report, the synthesis, one PR
    branch = f"research-refresh/{CYCLE}"
    assert world.branches() == ["main", branch]
    subjects = world.origin_git("log", "--format=%s", f"main..{branch}").splitlines()
    assert len(subjects) == 3 and subjects[0] == f"research(synthesis): regenerate for {CYCLE}"
    files = world.origin_git("diff", "--name-only", f"main..{branch}").splitlines()
    assert "framework/synthesis.md" in files and f"research/{LEGS[1]}.md" in files
    assert not any(path.startswith(".research-dispatch") for path in files)
    (pr,) = world.github.pulls
    assert pr["head"]["ref"] == branch and not pr["draft"]
    assert_no_canary(run, world)


def test_a_dry_run_from_the_adopter_is_free_and_writes_nothing(adopter) -> None:
    """The README quick start's last step: `gh workflow run research-refresh.yml -f dry-run=true`: the
    checks, the plan and the estimate in the job summary; no leg, no synthesis, nothing written. (The
    schedule wrapper calls the same pinned workflow; its contract is checked in test_invariants.py.)"""
    world, _ = adopter()
    before = {ref: world.origin_git("rev-parse", ref) for ref in world.branches()}
    run = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE, "dry-run": True})

    assert run.job("refresh/plan").result == "success" and run.job("refresh/notify").result == "success"
    assert {run.job(f"refresh/{name}").result for name in ("research", "synthesize", "publish")} == {"skipped"}
    summary = run.job("refresh/plan").summary
    assert "## Check (online)" in summary and "## Plan: 2 leg(s), worst case $" in summary
    assert world.gateway.completions == [] and world.tavily.calls == []
    assert {ref: world.origin_git("rev-parse", ref) for ref in world.branches()} == before
    assert world.github.pulls == [] and world.github.issues == []


def test_a_pin_that_is_not_in_research_dispatch_is_refused_at_startup(adopter) -> None:
    """GitHub refuses to start a run whose reusable workflow reference does not resolve."""
    world, sha = adopter()
    caller = world.machine.workflows_root / ".github" / "workflows" / "research-refresh.yml"
    text = caller.read_text(encoding="utf-8")
    caller.write_text(text.replace(f"@{sha}", "@" + "0" * 40), encoding="utf-8")
    with pytest.raises(WorkflowError, match="cannot resolve"):
        world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})
