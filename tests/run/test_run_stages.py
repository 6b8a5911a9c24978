"""`run` through the CLI with every stage: legs, route table, synthesis, and publishing to a local branch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import CliRun, run_cli
from tests.run.conftest import CYCLE

BRANCH = f"research-refresh/{CYCLE}"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                           *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def git_repo(repo: Path) -> Path:
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "topics")
    return repo


def run(repo: Path, env: dict[str, str], *args: str) -> CliRun:
    """`run` with the test's environment and `env` (the keys and base URLs of the fakes)."""
    return run_cli("run", "--repo", str(repo), "--cycle", CYCLE, *args, env={**os.environ, **env})


@pytest.mark.slow
def test_run_commits_the_refresh_to_a_local_branch_and_a_rerun_changes_nothing(
        git_repo: Path, run_env: dict, gateway: Any) -> None:
    first = run(git_repo, run_env)
    assert first.code == 0, first.output + first.stderr
    assert "synthesis:" in first.output and "push it:     research-dispatch run --push" in first.output
    assert f"look at it:  git log --stat main..{BRANCH}" in first.output
    assert git(git_repo, "status", "--porcelain", "-uall") == ""  # the base branch's work tree as it was
    subjects = git(git_repo, "log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert len(subjects) == 6  # one per report, one for the synthesis
    trailers = git(git_repo, "log", "--format=%(trailers:key=Route,valueonly)", f"main..{BRANCH}").split()
    assert trailers.count("exact") == 5
    assert git(git_repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"  # the work tree is left alone

    tip = git(git_repo, "rev-parse", BRANCH)
    calls = git(git_repo, "show", f"{BRANCH}:framework/synthesis.calls.jsonl")
    [cost] = [line for line in first.output.splitlines() if line.startswith("  cost: $")]

    gateway.reset()
    second = run(git_repo, run_env)
    assert second.code == 0, second.output
    assert gateway.completions == []  # no leg ran, and the synthesis came from its cache
    assert "nothing changed" in second.output and "calls: none; cost $0.0000" in second.output
    assert git(git_repo, "rev-parse", BRANCH) == tip  # no new commit, nothing to force-push
    assert git(git_repo, "show", f"{BRANCH}:framework/synthesis.calls.jsonl") == calls  # no call, no line
    assert cost in second.output.splitlines()  # the refresh's cost, as the PR says it, is the same
    assert git(git_repo, "status", "--porcelain", "-uall") == ""


@pytest.mark.slow
def test_a_failed_leg_still_synthesizes_and_publishes_and_exits_1(git_repo: Path, run_env: dict, gateway: Any) -> None:
    gateway.set_scenario({"rules": [{"match": {"session": "*04-verl-trl"}, "status": 402}]})
    result = run(git_repo, run_env)
    assert result.code == 1
    assert "failed legs: 04-verl-trl" in result.output
    assert git(git_repo, "cat-file", "-t", f"{BRANCH}:framework/claims.json").strip() == "blob"
    assert len(git(git_repo, "log", "--format=%s", f"main..{BRANCH}").splitlines()) == 5


def test_publishing_needs_are_checked_before_any_leg_runs(git_repo: Path, run_env: dict, gateway: Any) -> None:
    result = run(git_repo, run_env, "--push")
    assert result.code == 2 and "GITHUB_TOKEN is not set" in result.stderr
    env = {**run_env, "GITHUB_TOKEN": "ghs_test_token_123", "GITHUB_REPOSITORY": "acme/review"}
    result = run(git_repo, env, "--push")
    assert result.code == 2 and "no git remote 'origin' to push to" in result.stderr
    plain = git_repo.parent / "plain"
    plain.mkdir()
    (plain / "topics").mkdir()
    for path in (git_repo / "topics").iterdir():
        (plain / "topics" / path.name).write_text(path.read_text())
    result = run(plain, run_env)
    assert result.code == 2 and "not a git repository" in result.stderr
    assert gateway.completions == []


@pytest.mark.slow
def test_a_stage_failure_after_the_legs_is_reported_and_exits_1(git_repo: Path, run_env: dict) -> None:
    """A failed synthesis never loses the legs (DESIGN): the reports are still committed, the PR would be
    partial ("synthesis missing"), and the run exits 1 naming the stage."""
    (git_repo / "framework").mkdir()
    (git_repo / "framework" / "claims.json").mkdir()  # the ledger path is taken by a directory
    result = run(git_repo, run_env, "--topics", "diloco-family,verl-trl")
    assert result.code == 1
    assert "synthesize: FAILED" in result.output and "publish: skipped" not in result.output
    assert "committed to local branch research-refresh/2026-H2 (2 commit(s))" in result.output
    assert "The synthesis is missing" in result.output
    assert "run FAILED" in result.output and "synthesize:" in result.output.splitlines()[-1]


@pytest.mark.slow
def test_no_publish_stops_after_the_synthesis(repo: Path, run_env: dict) -> None:
    result = run(repo, run_env, "--no-publish", "--topics", "diloco-family,verl-trl")
    assert result.code == 0, result.output + result.stderr
    assert "publish" not in result.output.replace("--publish", "")
    assert (repo / "framework" / "claims.json").exists()


@pytest.mark.slow
def test_a_run_pointed_at_the_fakes_by_hand_says_so_in_every_output(git_repo: Path, run_env: dict,
                                                                    gateway: Any) -> None:
    """Issue 30.8: no demo marker, only the fakes' base URLs in the environment: the reports carry the fake
    gateway's banner, and so do the synthesis and the PR body, which must never read as research."""
    done = run(git_repo, run_env)
    assert done.code == 0, done.output + done.stderr
    reports = git(git_repo, "ls-tree", "--name-only", f"{BRANCH}:research").split()
    assert [r for r in reports if r.endswith(".md")]
    for name in (r for r in reports if r.endswith(".md")):
        assert "> **Demo output, not research.**" in git(git_repo, "show", f"{BRANCH}:research/{name}"), name
    document = git(git_repo, "show", f"{BRANCH}:framework/composer-replication-framework.md")
    assert document.split("\n## ", 1)[0].count("Demo output, not research: 5 reports here") == 1, document[:800]
    body = run_cli("publish", "--repo", str(git_repo), "--cycle", CYCLE, "--dry-run", env={**os.environ, **run_env})
    assert body.code == 0, body.output + body.stderr
    assert "Demo output, not research: 5 reports here" in body.output, body.output[:1500]
