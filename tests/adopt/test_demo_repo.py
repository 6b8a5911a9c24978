"""`demo --repo DIR`: the offline refresh on another repository's own topics and configuration."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from research_dispatch.adopt.demo import demo_command
from research_dispatch.core.errors import BadInput
from tests.adopt.conftest import git_env, snapshot
from tests.clirun import run_cli
from tests.conftest import ROOT

TOPIC = (ROOT / "topics" / "04-verl-trl.yaml").read_text(encoding="utf-8")


@pytest.mark.slow
def test_demo_on_a_repository_with_its_own_layout_branch_and_no_methodology_markers(tmp_path: Path) -> None:
    """Topics in review/topics, PR base `trunk`, a methodology document without the table markers, an
    explicit --dir: the demo follows the configuration and says what it skipped."""
    repo = tmp_path / "theirs"
    (repo / "review" / "topics").mkdir(parents=True)
    (repo / "review" / "topics" / "07-rl-stacks.yaml").write_text(TOPIC.replace("id: verl-trl", "id: rl-stacks"),
                                                                  encoding="utf-8")
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "theirs"\n\n[tool.research-dispatch]\ntopics_dir = "review/topics"\n'
        'framework_name = "stack-choice"\n\n[tool.research-dispatch.pr]\nbase = "trunk"\n', encoding="utf-8")
    (repo / "docs").mkdir()
    (repo / "docs" / "METHODOLOGY.md").write_text("# How we review\n\nNo table here.\n", encoding="utf-8")
    before = snapshot(repo)
    lines: list[str] = []
    code = demo_command(tmp_path / "out" / "demo", repo=repo, echo=lines.append)
    text = "\n".join(lines)
    assert code == 0, text
    assert "✗" not in text and "no dispatch-table markers; skipped" in text
    assert "✓ a report for each of the 1 planned legs, from the 1 model family the topics name" in text
    demo = tmp_path / "out" / "demo"
    assert (demo / "research" / "07-rl-stacks.md").is_file() and (demo / "framework" / "stack-choice.md").is_file()
    branches = subprocess.run(["git", "-C", str(tmp_path / "out" / "demo.origin.git"), "for-each-ref",
                               "--format=%(refname:short)", "refs/heads"], capture_output=True, text=True,
                              env=git_env(), check=True).stdout.split()
    assert "trunk" in branches and "main" not in branches
    assert snapshot(repo) == before  # the source repository is only read


def test_demo_on_a_repository_with_a_bad_topic_is_exit_2_naming_its_file(tmp_path: Path) -> None:
    repo = tmp_path / "theirs"
    (repo / "topics").mkdir(parents=True)
    (repo / "topics" / "01-x.yaml").write_text(TOPIC.replace("id: verl-trl", "id: x") + "colour: blue\n",
                                               encoding="utf-8")
    with pytest.raises(BadInput, match=r"topics/01-x\.yaml.*colour"):
        demo_command(None, repo=repo, echo=lambda _: None)
    assert not (repo / "build").exists()
    done = run_cli("demo", "--repo", str(repo), env=git_env(), cwd=tmp_path)
    assert done.code == 2 and "topics/01-x.yaml" in done.stderr and "Traceback" not in done.stderr
    assert not (repo / "build").exists()
