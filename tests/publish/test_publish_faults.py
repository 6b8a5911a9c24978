"""Publish faults: GitHub 5xx, lost answers, rate limits, dropped connections and pushes that race.

Whatever fails, the outcome must be one PR and no lost commit: the lease refuses to overwrite what it
did not inspect, and a failed create is followed by a look-up, not a second create.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from research_dispatch.core.errors import PublishError
from research_dispatch.publish import gitops
from tests.publish.conftest import BOT_EMAIL, BRANCH, World, git, git_env


@pytest.fixture
def ready(small_world: World) -> World:
    small_world.run_legs()
    small_world.write_synthesis()
    return small_world


@pytest.mark.slow
def test_a_5xx_on_create_is_retried_and_gives_one_pr(ready: World) -> None:
    ready.github.set_scenario({"rules": [{"method": "POST", "path": "/repos/*/pulls", "on_call": 1, "status": 502}]})
    result = ready.publish()
    assert result.operation == "created" and result.pr_number == 1
    assert len(ready.github.pulls) == 1 and len(ready.github.state()["fired"]) == 1
    assert ready.sleeps == [0.0] and any("HTTP 502" in line for line in ready.logs)


@pytest.mark.slow
def test_a_lost_create_answer_is_found_and_updated_not_duplicated(ready: World) -> None:
    ready.github.set_scenario({"rules": [{"method": "POST", "path": "/repos/*/pulls", "times": 1, "status": 502,
                                          "create_then_fail": True}]})
    result = ready.publish()
    assert result.operation == "created" and result.pr_number == 1
    assert len(ready.github.pulls) == 1
    assert ready.github.pulls[0]["body"] == result.body and ready.github.pulls[0]["title"] == result.title
    assert any("already existed" in w for w in result.warnings)


@pytest.mark.slow
def test_a_persistent_5xx_fails_clearly_and_a_rerun_completes_with_one_pr(ready: World) -> None:
    ready.github.set_scenario({"rules": [{"method": "POST", "path": "/repos/*/pulls", "status": 503}]})
    with pytest.raises(PublishError, match=r"could not create the pull request: HTTP 503.*4 attempt"):
        ready.publish()
    pushed = ready.origin_sha(BRANCH)
    assert pushed is not None and ready.github.pulls == []  # the commits are safe on the branch
    ready.github.set_scenario({"rules": []})
    result = ready.publish()
    assert result.operation == "created" and len(ready.github.pulls) == 1
    assert result.pushed is False and ready.origin_sha(BRANCH) == pushed  # same content: not rewritten


def test_rate_limit_waits_for_retry_after_then_succeeds(ready: World) -> None:
    ready.github.set_scenario({"rules": [{"method": "GET", "path": "/repos/*/pulls", "on_call": 1,
                                          "rate_limit": True, "retry_after": "7"}]})
    result = ready.publish()
    assert result.operation == "created" and len(ready.github.pulls) == 1
    assert ready.sleeps == [7.0]


def test_rate_limit_that_does_not_clear_is_a_clear_failure_before_the_push(ready: World) -> None:
    ready.github.set_scenario({"rules": [{"method": "GET", "path": "/repos/*/pulls", "rate_limit": True}]})
    with pytest.raises(PublishError, match="rate limit"):
        ready.publish()
    assert len(ready.sleeps) <= 3 and all(wait <= 30.0 for wait in ready.sleeps)
    assert ready.github.pulls == [] and ready.origin_sha(BRANCH) is None


def test_a_rate_limit_wait_longer_than_the_cap_is_not_waited(ready: World) -> None:
    ready.github.set_scenario({"rules": [{"method": "GET", "path": "/repos/*/pulls", "rate_limit": True,
                                          "retry_after": "3600"}]})
    with pytest.raises(PublishError, match="asks to wait 3600 s, more than the 30 s"):
        ready.publish()
    assert ready.sleeps == []


@pytest.mark.slow
def test_a_dropped_connection_is_retried(ready: World) -> None:
    ready.github.set_scenario({"rules": [{"method": "PATCH", "path": "/repos/*/pulls/*", "on_call": 1,
                                          "drop": True}]})
    assert ready.publish().operation == "created"
    ready.run_legs("diloco-family")
    result = ready.publish()
    assert result.operation == "updated" and len(ready.github.pulls) == 1
    assert ready.github.pulls[0]["body"] == result.body
    assert any("connection error" in line for line in ready.logs)


def _concurrent_push(world: World, monkeypatch: pytest.MonkeyPatch, *, as_bot: bool, every_time: bool) -> list[str]:
    """Make someone push to the branch between our fetch and our push."""
    original = gitops.Git.push_with_lease
    pushed: list[str] = []

    def racing(self: gitops.Git, remote: str, sha: str, branch: str, expected: str | None) -> None:
        if every_time or not pushed:
            clone = world.root / f"racer-{len(pushed)}"
            git(world.root, "clone", "-q", str(world.origin), str(clone))
            env = git_env("research-dispatch[bot]", BOT_EMAIL) if as_bot else git_env()
            if world.origin_sha(branch):
                git(clone, "checkout", "-q", branch)
            else:
                git(clone, "checkout", "-q", "-b", branch)
            (clone / "research" ).mkdir(exist_ok=True)
            (clone / "research" / f"race-{len(pushed)}.md").write_text("raced in\n", encoding="utf-8")
            git(clone, "add", "-A", env=env)
            git(clone, "commit", "-q", "-m", "Concurrent push", env=env)
            git(clone, "push", "-q", "origin", branch, env=env)
            pushed.append(git(clone, "rev-parse", "HEAD"))
        original(self, remote, sha, branch, expected)

    monkeypatch.setattr(gitops.Git, "push_with_lease", racing)
    return pushed


@pytest.mark.slow
def test_push_rejected_because_a_human_pushed_meanwhile_keeps_their_commit(ready: World,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert ready.publish().operation == "created"
    ready.run_legs("diloco-family")
    raced = _concurrent_push(ready, monkeypatch, as_bot=False, every_time=False)
    result = ready.publish()
    assert result.operation == "blocked" and result.exit_code == 1 and result.pr_number == 1
    assert ready.origin_sha(BRANCH) == raced[0]  # not overwritten
    assert any("moved" in line for line in ready.logs)
    assert len(ready.github.pulls) == 1 and "Edited/Blocked" in ready.github.comments[1][0]["body"]


def test_a_branch_created_by_someone_else_during_the_first_publish_is_kept(ready: World,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    raced = _concurrent_push(ready, monkeypatch, as_bot=False, every_time=False)
    result = ready.publish()
    assert result.operation == "blocked" and ready.origin_sha(BRANCH) == raced[0]
    assert ready.github.pulls == []


@pytest.mark.slow
def test_a_concurrent_bot_push_is_rebuilt_over_after_one_recheck(ready: World, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ready.publish().operation == "created"
    ready.run_legs("verl-trl")
    _concurrent_push(ready, monkeypatch, as_bot=True, every_time=False)
    result = ready.publish()
    assert result.operation == "updated" and result.pushed is True
    assert ready.origin_sha(BRANCH) == result.commits[-1] and len(ready.github.pulls) == 1


@pytest.mark.slow
def test_a_branch_that_keeps_moving_stops_with_a_clear_error(ready: World, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ready.publish().operation == "created"
    ready.run_legs("verl-trl")
    raced = _concurrent_push(ready, monkeypatch, as_bot=True, every_time=True)
    with pytest.raises(PublishError, match=r"push refused twice.*nothing was overwritten"):
        ready.publish()
    assert len(raced) == 2 and ready.origin_sha(BRANCH) == raced[-1]
    assert len(ready.github.pulls) == 1


def test_push_failure_other_than_a_lease_is_a_clear_error(ready: World, tmp_path: Path) -> None:
    hook = ready.origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch' >&2\nexit 1\n", encoding="utf-8")
    hook.chmod(0o755)
    with pytest.raises(PublishError, match=r"git push failed.*protected branch"):
        ready.publish()
    assert ready.github.pulls == [] and ready.origin_sha(BRANCH) is None
