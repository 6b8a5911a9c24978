"""`publish` as a user runs it after `research` and `synthesize`: `--dry-run` writes nothing, `--no-push`
commits locally only, a full publish pushes and opens one PR (and a second publish updates it), a bad
branch name is exit 2. Real git, a bare `origin`, the fake GitHub serving that origin
(tests/reliability/userworld.py); every command a fresh interpreter.

The refresh (one topic researched, then synthesized) is made once for the module in a clone; each test
publishes from its own copy of that clone, to its own copy of the origin, so no test sees another's push.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from research_dispatch_fakes.github import FakeGitHub
from tests.bounds.conftest import one_error
from tests.cli.conftest import Fakes
from tests.conftest import CANARY
from tests.reliability.userworld import BRANCH, TOPIC_IDS, TOPICS, UserWorld, git, make_origin

STEM = TOPICS["A"]


@dataclass(frozen=True)
class Refresh:
    """A clone holding a researched and synthesized refresh, not yet published."""

    world: UserWorld
    clone: Path


@pytest.fixture(scope="module")
def refresh(tmp_path_factory: pytest.TempPathFactory, fakes: Fakes) -> Iterator[Refresh]:
    root = tmp_path_factory.mktemp("publish")
    origin = make_origin(root, {"A": STEM})
    with FakeGitHub(git_dir=origin, token=CANARY["GITHUB_TOKEN"]) as github:
        world = UserWorld(root=root, origin=origin, github=github, gateway=fakes.gateway, tavily=fakes.tavily)
        clone = world.clone()
        for args in (("research", TOPIC_IDS["A"]), ("synthesize",)):
            done = world.cli(clone, *args)
            assert done.code == 0, done
        yield Refresh(world, clone)


@pytest.fixture
def user(refresh: Refresh, tmp_path: Path) -> Iterator[tuple[UserWorld, Path]]:
    """This test's copy of the refresh clone, publishing to its own copy of the origin and fake GitHub."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(refresh.world.origin), str(origin))
    clone = Path(shutil.copytree(refresh.clone, tmp_path / "clone", symlinks=True))
    git(clone, "remote", "set-url", "origin", str(origin))
    with FakeGitHub(git_dir=origin, token=CANARY["GITHUB_TOKEN"]) as github:
        yield UserWorld(root=tmp_path, origin=origin, github=github, gateway=refresh.world.gateway,
                        tavily=refresh.world.tavily), clone


def local_branch(clone: Path) -> str:
    return git(clone, "branch", "--list", BRANCH).strip()


def state(clone: Path) -> tuple[str, str, str]:
    """What a publish could change in the clone: HEAD, the branches, the work tree's status."""
    return (git(clone, "rev-parse", "HEAD"), git(clone, "branch", "--list"),
            git(clone, "status", "--porcelain", "--untracked-files=all"))


def test_dry_run_prints_the_pull_request_and_writes_nothing(user: tuple[UserWorld, Path]) -> None:
    world, clone = user
    before = state(clone)
    done = world.cli(clone, "publish", "--dry-run")
    assert done.code == 0, done
    lines = done.output.splitlines()
    assert lines[0].startswith("docs(research): refresh 2026-H2"), lines[0]  # the title, then the body
    assert TOPIC_IDS["A"] in done.output and "Traceback" not in done.output
    assert lines[-1] == "dry run: nothing was committed, pushed or sent"
    assert state(clone) == before and not local_branch(clone)
    assert not world.branch_exists() and world.pulls() == []
    # issue 30.1: the 📅 line gives the date GitHub pauses the schedule (60 days after the base's last commit)
    # and the one command that re-enables it
    last = dt.datetime.fromtimestamp(int(git(clone, "log", "-1", "--format=%ct", "main")), dt.timezone.utc).date()
    schedule = next(line for line in lines if line.startswith("📅 **Schedule**"))
    assert f"from the last commit on `main` ({last:%Y-%m-%d}), on **{last + dt.timedelta(days=60):%Y-%m-%d}**" \
        in schedule, schedule
    assert "`gh workflow enable research-refresh-schedule.yml`" in schedule


def test_no_push_commits_locally_with_trailers_and_leaves_origin_alone(user: tuple[UserWorld, Path]) -> None:
    world, clone = user
    done = world.cli(clone, "publish", "--no-push")
    assert done.code == 0, done
    assert "pushed: no" in done.output
    assert local_branch(clone)
    subjects = git(clone, "log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert len(subjects) == 2 and any(STEM in s for s in subjects), subjects
    trailers = git(clone, "log", "--format=%(trailers:only,unfold)", f"main..{BRANCH}")
    for key in ("Requested-Model:", "Served-Model:", "Served-Provider:", "Route: exact"):
        assert key in trailers, trailers
    assert not world.branch_exists() and world.pulls() == []


def test_publish_opens_one_pull_request_updates_it_and_never_overwrites_a_human(
        user: tuple[UserWorld, Path]) -> None:
    """Exit 0 twice (one PR, updated), then exit 1 once a person committed to the refresh branch: their
    commit stays, and the PR gets a comment instead of a force-push."""
    world, clone = user
    first = world.cli(clone, "publish")
    assert first.code == 0, first
    assert "pushed: yes" in first.output and "pull request: #1 created" in first.output, first
    assert world.branch_exists() and STEM in world.branch_reports()
    again = world.cli(clone, "publish")
    assert again.code == 0, again
    pr = world.pr()  # still exactly one
    assert pr["state"] == "open" and pr["head"]["sha"] == world.origin_git("rev-parse", BRANCH).strip()
    human = world.clone()
    git(human, "checkout", "-q", BRANCH)
    (human / "NOTES.md").write_text("A reviewer's note.\n", encoding="utf-8")
    git(human, "add", "NOTES.md")
    git(human, "commit", "-q", "-m", "Reviewer note")
    git(human, "push", "-q", "origin", BRANCH)
    theirs = git(human, "rev-parse", "HEAD").strip()
    blocked = world.cli(clone, "publish")
    assert blocked.code == 1, blocked
    assert "not overwriting them; commented on PR #1" in blocked.output and "Traceback" not in blocked.output
    assert world.origin_git("rev-parse", BRANCH).strip() == theirs
    assert len(world.github.comments[1]) == 1


def test_a_bad_branch_name_is_exit_2_naming_the_option(user: tuple[UserWorld, Path]) -> None:
    world, clone = user
    before = state(clone)
    done = world.cli(clone, "publish", "--no-push", "--branch", "bad..name")
    assert done.code == 2, done
    one_error(done.output, "--branch", "bad..name")  # stdout and stderr together: that one line only
    assert state(clone) == before

