"""Canary keys never reach a file, a commit, a log line or anything sent to GitHub."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from research_dispatch.publish.gitops import Git, Identity, auth_config_env
from tests.conftest import CANARY
from tests.publish.conftest import World, git, git_env

SECRETS = tuple(CANARY.values())


def _assert_absent(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret[:8]}… found in {where}"


def _scan_tree(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            _assert_absent(path.read_bytes().decode("utf-8", errors="replace"), str(path))


@pytest.mark.slow
def test_canary_keys_appear_nowhere(world: World, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"model": "anthropic/*"}, "status": 402}]})
    world.run_legs()
    world.write_synthesis()
    outputs = []
    first = world.cli()
    outputs += [first.output, first.stderr]
    assert first.code == 0, first.output + first.stderr
    world.human_push()
    world.run_legs("diloco-family")
    blocked = world.cli()
    outputs += [blocked.output, blocked.stderr]
    assert blocked.code == 1
    dry = world.cli("--dry-run")
    outputs += [dry.output, dry.stderr]

    for text in outputs:
        _assert_absent(text, "CLI output")
    _scan_tree(world.repo)  # working tree, build/ and every plain file under .git (config, refs, logs)
    _scan_tree(world.origin)
    for repo in (world.repo, world.origin):
        _assert_absent(git(repo, "log", "-p", "--all", "--format=%H%n%an%n%ae%n%B"), f"git log of {repo}")
        _assert_absent(git(repo, "for-each-ref"), f"refs of {repo}")
    state = json.dumps(world.github.state())
    _assert_absent(state, "the fake GitHub's PRs and comments")
    assert world.github.comments[1]  # the blocked comment exists and was scanned above
    for request, _ in world.github.requests:
        _assert_absent(request.body.decode("utf-8", errors="replace"), f"request body {request.path}")


def test_the_token_reaches_git_only_through_the_environment(tmp_path: Path) -> None:
    token = CANARY["GITHUB_TOKEN"]
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    env = auth_config_env("https://user:pw@github.invalid/acme/review.git", token)
    key = "http.https://github.invalid/.extraheader"
    assert env["GIT_CONFIG_KEY_0"] == env["GIT_CONFIG_KEY_1"] == key and env["GIT_CONFIG_VALUE_0"] == ""
    seen = subprocess.run(["git", "config", "--get-all", key], cwd=repo, env={**git_env(), **env},
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert seen[0] == "" and seen[1].startswith("AUTHORIZATION: basic ")  # reset first, then our header
    assert token not in seen[1]  # base64 of x-access-token:<token>
    assert auth_config_env("git@github.invalid:acme/review.git", token) == {}
    assert auth_config_env("/srv/origin.git", token) == {}
    assert auth_config_env("http://github.invalid/acme/review.git", token) == {}

    # the wrapper keeps it out of argv and out of error messages
    runner = Git(repo, {**os.environ, "GITHUB_TOKEN": token}, Identity("bot", "bot@example.invalid"))
    assert runner.use_token_for("https://github.invalid/acme/review.git", token)
    assert "GITHUB_TOKEN" not in runner._env and all(token not in v for v in runner._env.values())
    message = runner.clean(f"fatal: could not read from https://x-access-token:{token}@github.invalid/ "
                           f"{seen[1]}")
    assert token not in message and seen[1].split()[-1] not in message
    _scan_tree(repo / ".git")


def test_repository_location_variables_from_the_caller_are_ignored(tmp_path: Path) -> None:
    runner = Git(tmp_path, {"PATH": os.environ["PATH"], "GIT_DIR": "/elsewhere", "GIT_INDEX_FILE": "/tmp/x",
                            "GIT_WORK_TREE": "/", "GIT_CONFIG_COUNT": "1", "GIT_SSH_COMMAND": "ssh -i k",
                            "OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"]},
                 Identity("bot", "bot@example.invalid"))
    env = runner._env
    for name in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_CONFIG_COUNT", "OPENROUTER_API_KEY"):
        assert name not in env
    assert env["GIT_SSH_COMMAND"] == "ssh -i k" and env["GIT_AUTHOR_EMAIL"] == "bot@example.invalid"
