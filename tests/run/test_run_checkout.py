"""A local `run` keeps the base branch clean (issue 30, point 4) and a re-run with nothing to do rewrites
nothing (point 5): the results are commits on the local refresh branch, the checkout is put back as the
run found it, and only what a commit of the branch holds is ever put back (`publish/worktree.py`).

Each test runs `research-dispatch run` through the CLI (click's runner) in a real git repository, on the
fake gateway and search servers; the user's view is read with git, as a user would.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from research_dispatch.cli import main
from tests.conftest import write_topic
from tests.run.conftest import CYCLE

pytestmark = pytest.mark.slow

BRANCH = f"research-refresh/{CYCLE}"
TWO_FAMILIES = """id: twin
title: Evaluating retrieval-augmented generation systems
scope: |
  Survey how retrieval-augmented generation systems are evaluated today, and recommend what a small
  team should adopt first.
models:
  - model: openai/gpt-5
    rationale: Broad coverage of recent evaluation papers
  - model: anthropic/claude-sonnet-4.6
    rationale: An independent second family
"""
METHODOLOGY = ("# Methodology\n\nOur team's prose.\n\n<!-- research-dispatch:dispatch-table:start -->\n"
               "<!-- research-dispatch:dispatch-table:end -->\n")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                           *args], capture_output=True, text=True, check=True).stdout


def status(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "-uall")


@pytest.fixture
def two_legs(tmp_path: Path) -> Path:
    """One topic written by two families (the fakes write both reports alike), a methodology page with the
    dispatch-table markers, committed on main."""
    repo = tmp_path / "review"
    write_topic(repo, "01-twin.yaml", TWO_FAMILIES)
    (repo / "pyproject.toml").write_text('[tool.research-dispatch]\nframework_name = "synthesis"\n'
                                         '[tool.research-dispatch.synthesis]\njudge_models = ["x-ai/grok-4"]\n',
                                         encoding="utf-8")
    (repo / "docs").mkdir()
    (repo / "docs" / "METHODOLOGY.md").write_text(METHODOLOGY, encoding="utf-8")
    (repo / ".gitignore").write_text("build/\n", encoding="utf-8")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "topics")
    return repo


def run(repo: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return CliRunner().invoke(main, ["run", "--repo", str(repo), "--cycle", CYCLE, *args])


def test_run_leaves_the_base_branch_clean_and_says_where_the_results_are(
        two_legs: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(two_legs, run_env, monkeypatch)
    assert result.exit_code == 0, result.output + result.stderr
    assert status(two_legs) == ""  # nothing new under research/ or framework/, METHODOLOGY.md unmodified
    assert not list((two_legs / "research").glob("*.md"))
    on_branch = git(two_legs, "ls-tree", "-r", "--name-only", BRANCH).split()
    assert {"research/01-twin.openai-gpt-5.md", "research/01-twin.anthropic-claude-sonnet-4.6.md",
            "framework/synthesis.md", "framework/claims.json"} <= set(on_branch)
    assert "| openai/gpt-5 |" in git(two_legs, "show", f"{BRANCH}:docs/METHODOLOGY.md")  # the table, on the branch
    lines = result.output.splitlines()
    assert f"results: 3 commit(s) on the local branch {BRANCH}, on top of main" in lines
    assert "  your working tree is as it was: the reports and the synthesis are commits on that branch" in lines
    assert f"  look at it:  git log --stat main..{BRANCH}" in lines
    assert any(line.startswith("  push it:     research-dispatch run --push") for line in lines)


def test_a_second_run_with_nothing_to_do_costs_nothing_and_rewrites_nothing(
        two_legs: Path, run_env: dict[str, str], gateway: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run(two_legs, run_env, monkeypatch)
    assert first.exit_code == 0, first.output + first.stderr
    tip = git(two_legs, "rev-parse", BRANCH)
    calls = git(two_legs, "show", f"{BRANCH}:framework/synthesis.calls.jsonl")
    logged = [json.loads(line) for line in calls.splitlines()]
    assert len({c["generation_id"] for c in logged}) == len(logged)  # each report rests on its own calls
    [cost] = [line for line in first.output.splitlines() if line.startswith("  cost: $")]

    for _ in range(2):
        gateway.reset()
        again = run(two_legs, run_env, monkeypatch)
        assert again.exit_code == 0, again.output + again.stderr
        assert gateway.completions == []  # no model call
        assert "0 leg(s) ran, 2 kept" in again.output and "calls: none; cost $0.0000" in again.output
        assert git(two_legs, "rev-parse", BRANCH) == tip  # no new commit: nothing to force-push
        assert git(two_legs, "reflog", "--format=%H", BRANCH).split() == [tip.strip()]
        assert git(two_legs, "show", f"{BRANCH}:framework/synthesis.calls.jsonl") == calls
        assert cost in again.output.splitlines()  # the refresh's cost, as the PR body says it
        assert status(two_legs) == ""


def test_what_no_commit_of_the_branch_holds_stays_in_the_working_tree(
        two_legs: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's notes in research/ and the team's uncommitted prose in METHODOLOGY.md are theirs: the
    run commits what it made, and puts back only that."""
    notes = two_legs / "research" / "reading-notes.txt"
    notes.parent.mkdir()
    notes.write_text("My own notes, not a report.\n", encoding="utf-8")
    methodology = two_legs / "docs" / "METHODOLOGY.md"
    prose = METHODOLOGY.replace("Our team's prose.", "Our team's prose, revised but not committed yet.")
    methodology.write_text(prose, encoding="utf-8")

    result = run(two_legs, run_env, monkeypatch)
    assert result.exit_code == 0, result.output + result.stderr
    assert notes.read_text(encoding="utf-8") == "My own notes, not a report.\n"
    assert methodology.read_text(encoding="utf-8") == prose  # as the run found it (the table is on the branch)
    assert sorted(status(two_legs).splitlines()) == [" M docs/METHODOLOGY.md", "?? research/reading-notes.txt"]
    assert "  still in your working tree, on no commit of that branch: research/reading-notes.txt" in \
        result.output.splitlines()


def test_results_that_could_not_be_committed_stay_in_the_working_tree(
        two_legs: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Never lose work: when publishing refuses (here a report edited by hand, never committed under a
    model's trailers), nothing is put back — the run's new reports are only in the working tree."""
    assert run(two_legs, run_env, monkeypatch).exit_code == 0
    git(two_legs, "restore", f"--source={BRANCH}", "--worktree", "--", "research")  # a reviewer takes them
    edited = two_legs / "research" / "01-twin.anthropic-claude-sonnet-4.6.md"
    edited.write_text(edited.read_text(encoding="utf-8").replace("\n## References", "\nA note.\n\n## References", 1),
                      encoding="utf-8")
    write_topic(two_legs, "01-twin.yaml", TWO_FAMILIES.replace("title: Evaluating", "title: Reviewing"))
    result = run(two_legs, run_env, monkeypatch)
    assert result.exit_code == 1 and "publish: FAILED" in result.output, result.output
    assert "results:" not in result.output
    redone = two_legs / "research" / "01-twin.openai-gpt-5.md"
    assert "# Reviewing retrieval-augmented" in redone.read_text(encoding="utf-8")  # the new report, kept
    assert "A note." in edited.read_text(encoding="utf-8")
    assert (two_legs / "framework" / "synthesis.md").is_file()


def test_a_failed_synthesis_still_leaves_the_base_branch_clean(
        two_legs: Path, run_env: dict[str, str], gateway: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The branch's synthesis comes into the working tree as the previous one; when the next synthesis
    fails, the refresh removes it from the branch, and the copy the run brought in is put back too."""
    assert run(two_legs, run_env, monkeypatch).exit_code == 0
    write_topic(two_legs, "01-twin.yaml", TWO_FAMILIES.replace("title: Evaluating", "title: Reviewing"))
    git(two_legs, "commit", "-q", "-am", "a revised title: both legs are redone, their reports change")
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction"}, "status": 400}]})
    result = run(two_legs, run_env, monkeypatch)
    assert result.exit_code == 1 and "synthesize: FAILED" in result.output, result.output
    assert "The synthesis is missing" in result.output
    assert not [p for p in git(two_legs, "ls-tree", "-r", "--name-only", BRANCH).split() if p.startswith("framework/")]
    assert status(two_legs) == ""
