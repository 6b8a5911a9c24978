"""Git plumbing details: subdirectory projects, foreign-commit detection, checked-out branches."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.core.errors import PublishError
from research_dispatch.leg.execute import run_leg
from research_dispatch.publish import PublishOptions, publish
from research_dispatch.publish.gitops import CommitSpec, FileSpec, Git, Identity
from tests.conftest import ROOT
from tests.publish.conftest import BOT_EMAIL, BRANCH, CYCLE, PYPROJECT, World, git, git_env

BOT = Identity("research-dispatch[bot]", BOT_EMAIL)


def test_a_project_in_a_subdirectory_commits_under_its_prefix(tmp_path: Path, fake_env: dict) -> None:
    top = tmp_path / "mono"
    project = top / "review"
    (project / "topics").mkdir(parents=True)
    shutil.copy(ROOT / "topics" / "02-diloco-family.yaml", project / "topics")
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    git(tmp_path, "init", "-q", "-b", "main", str(top))
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "Initial commit")
    settings = load_settings(project)
    for leg in plan_legs(load_topics(project, settings), settings):
        run_leg(project, settings, leg, env=os.environ, cycle=CYCLE)
    result = publish(project, settings, PublishOptions(cycle=CYCLE, push=False),
                     env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull})
    assert result.operation == "none" and len(result.commits) == 1
    names = git(top, "show", "--name-only", "--format=", result.commits[0]).splitlines()
    assert sorted(names) == ["review/research/02-diloco-family.calls.jsonl",
                             "review/research/02-diloco-family.evidence.jsonl", "review/research/02-diloco-family.md"]


def test_foreign_commits_are_those_not_both_authored_and_committed_by_the_bot(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "a").write_text("a\n")
    git(repo, "add", "a")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    bot_env = git_env("research-dispatch[bot]", BOT_EMAIL.upper())  # e-mail compared case-insensitively
    git(repo, "commit", "-q", "--allow-empty", "-m", "bot", env=bot_env)
    mixed = {**bot_env, "GIT_COMMITTER_EMAIL": "mia@example.invalid"}  # a human rebased a bot commit
    git(repo, "commit", "-q", "--allow-empty", "-m", "rebased by a human", env=mixed)
    runner = Git(repo, os.environ, BOT)
    foreign = runner.foreign_commits(base, "HEAD")
    assert [c.message for c in foreign] == ["rebased by a human"]
    assert runner.foreign_commits(base, "HEAD~1") == []


def test_build_chain_touches_no_ref_index_or_file(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "kept.txt").write_text("staged\n")
    git(repo, "add", "kept.txt")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "kept.txt").write_text("user edit, staged\n")
    git(repo, "add", "kept.txt")
    (repo / "new.md").write_text("report\n")
    before = (git(repo, "for-each-ref"), git(repo, "status", "--porcelain"), (repo / ".git" / "index").read_bytes())
    runner = Git(repo, {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}, BOT)
    shas = runner.build_chain(git(repo, "rev-parse", "HEAD"),
                              [CommitSpec((FileSpec("new.md"),), "one\n\nKey: value")])
    assert before == (git(repo, "for-each-ref"), git(repo, "status", "--porcelain"),
                      (repo / ".git" / "index").read_bytes())
    assert git(repo, "show", "--name-only", "--format=%s", shas[0]).splitlines() == ["one", "", "new.md"]
    assert git(repo, "log", "-1", "--format=%(trailers:key=Key,valueonly)", shas[0]) == "value"


def test_a_checked_out_refresh_branch_is_never_moved(world: World) -> None:
    world.run_legs("diloco-family")
    git(world.repo, "checkout", "-q", "-b", "research-refresh/2026-H2")
    with pytest.raises(PublishError, match="checked out"):
        world.publish(push=False)
    assert git(world.repo, "rev-parse", "HEAD") == git(world.repo, "rev-parse", "main")


def test_the_configured_identity_and_env_override(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.run_legs("diloco-family")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Local Bot")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "local-bot@example.invalid")
    result = world.publish(push=False)
    assert git(world.repo, "log", "-1", "--format=%an <%ae> / %cn <%ce>", result.commits[-1]) == \
        "Local Bot <local-bot@example.invalid> / Local Bot <local-bot@example.invalid>"


@pytest.mark.slow
def test_a_shallow_checkout_does_not_mistake_base_history_for_foreign_commits(world: World) -> None:
    """CI checks out with fetch-depth 1: the base's history must not look like someone else's commits."""
    world.run_legs("diloco-family")
    assert world.publish().operation == "created"
    (world.repo / "README.md").write_text("main moved on\n")
    git(world.repo, "add", "README.md")
    git(world.repo, "commit", "-q", "-m", "Maintainer work on main")
    git(world.repo, "push", "-q", "origin", "main")

    shallow = world.root / "ci"
    git(world.root, "clone", "-q", "--depth", "1", f"file://{world.origin}", str(shallow))
    assert git(shallow, "rev-parse", "--is-shallow-repository") == "true"
    for path in (world.repo / "research").iterdir():
        (shallow / "research").mkdir(exist_ok=True)
        shutil.copy(path, shallow / "research" / path.name)
    result = publish(shallow, load_settings(shallow), PublishOptions(cycle=CYCLE), env=dict(os.environ))
    assert result.operation == "updated", result.message
    assert world.origin_git("rev-list", "--count", f"main..{BRANCH}") == "1"
