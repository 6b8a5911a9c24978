"""Fixtures for the workflow tests: a test repository with a bare origin, the fakes, and the harness."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.github import FakeGitHub
from research_dispatch_fakes.tavily import FakeTavily
from tests.conftest import CANARY, ROOT
from tests.workflows.adopter import scaffold
from tests.workflows.runner_harness import ISSUES_TOKEN, READ_TOKEN, Machine, Run, Runner

WORKFLOWS = ROOT / ".github" / "workflows"
CYCLE = "2026-H2"
SECRETS = {"OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"], "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"]}
APP_PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----canary-app-key-9f8e7d6c-----END RSA PRIVATE KEY-----"
APP_TOKEN = "ghs_app_installation_canary_5e4d3c2b1a"
ALL_CANARIES = [*CANARY.values(), APP_PRIVATE_KEY, APP_TOKEN]


@pytest.fixture(scope="session")
def adopter_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository set up by `research-dispatch init` (tests/workflows/adopter.py), once per session."""
    return scaffold(tmp_path_factory.mktemp("adopter") / "review")


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Mia Maintainer",
                "GIT_AUTHOR_EMAIL": "mia@example.invalid", "GIT_COMMITTER_NAME": "Mia Maintainer",
                "GIT_COMMITTER_EMAIL": "mia@example.invalid"})
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def make_repository(root: Path, source: Path | None = None) -> Path:
    """The repository the workflow runs on: this project's topics, config, methodology and lock file (or
    the files of `source`, e.g. a repository `research-dispatch init` set up), committed and pushed to a
    bare `origin` (what actions/checkout clones). Returns the bare origin."""
    src = root / "src"
    if source is not None:
        shutil.copytree(source, src, ignore=shutil.ignore_patterns(".git"))
    else:
        src.mkdir(parents=True)
        shutil.copytree(ROOT / "topics", src / "topics")
        shutil.copytree(ROOT / ".github" / "workflows", src / ".github" / "workflows")  # GitHub knows them
        shutil.copy(ROOT / "pyproject.toml", src / "pyproject.toml")
        shutil.copy(ROOT / "requirements.lock", src / "requirements.lock")
        (src / "docs").mkdir()
        shutil.copy(ROOT / "docs" / "METHODOLOGY.md", src / "docs" / "METHODOLOGY.md")
        (src / ".gitignore").write_text("build/\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main", str(src))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "Initial commit")
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    git(src, "push", "-q", str(origin), "main")
    return origin


@dataclass
class World:
    """One workflow run's world: the bare origin, the fakes in front of it, and the runner machine."""

    root: Path
    origin: Path
    gateway: FakeGateway
    tavily: FakeTavily
    github: FakeGitHub
    machine: Machine

    def run(self, workflow: str, event: str, inputs: dict[str, Any] | None = None, **kwargs: Any) -> Run:
        return Runner(self.machine).run(workflow, event, inputs, **kwargs)

    def rerun_failed(self, previous: Run) -> Run:
        """GitHub's "Re-run failed jobs" on a finished run (runner_harness.Runner.rerun_failed)."""
        return Runner(self.machine).rerun_failed(previous)

    def origin_git(self, *args: str) -> str:
        return git(self.root, "--git-dir", str(self.origin), *args)

    def branches(self) -> list[str]:
        return sorted(self.origin_git("for-each-ref", "--format=%(refname:short)", "refs/heads").split())


@pytest.fixture
def world_factory(tmp_path: Path) -> Iterator[Callable[..., World]]:
    """Builds a World; `gateway_scenario` scripts the fake gateway, `vars`/`app_token` the repository."""
    started: list[Any] = []

    def build(*, gateway_scenario: dict[str, Any] | None = None, vars: dict[str, str] | None = None,
              secrets: dict[str, str] | None = None, github_token: str = CANARY["GITHUB_TOKEN"],
              workflows_root: Path = ROOT, app_token: str | None = None, source: Path | None = None,
              repositories: dict[str, Path] | None = None) -> World:
        root = tmp_path / f"world{len(started)}"
        root.mkdir()
        origin = make_repository(root, source)
        gateway = FakeGateway(scenario=gateway_scenario)
        tavily = FakeTavily()
        github = FakeGitHub(git_dir=origin, token=app_token or github_token, read_tokens=(READ_TOKEN,),
                            issue_tokens=(ISSUES_TOKEN,))
        for server in (gateway, tavily, github):
            server.__enter__()
            started.append(server)
        home = root / "home"
        home.mkdir()
        env = {
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TMPDIR": str(root),
            "NO_PROXY": "127.0.0.1,localhost", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
            # the network the runner machine reaches: the fakes instead of openrouter.ai and api.tavily.com
            "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_BASE_URL": tavily.base_url,
        }
        machine = Machine(workflows_root=workflows_root, origin=origin, work=root / "runner", env=env,
                          secrets=dict(SECRETS if secrets is None else secrets), vars=dict(vars or {}),
                          github_token=github_token, app_token=app_token, api_url=github.base_url,
                          repositories=dict(repositories or {}))
        return World(root=root, origin=origin, gateway=gateway, tavily=tavily, github=github, machine=machine)

    yield build
    for server in reversed(started):
        server.__exit__(None, None, None)


def assert_no_canary(run: Run, world: World) -> None:
    """No key or token in any log, summary, output file or artifact, nor in what was pushed or sent."""
    texts = list(run.texts())
    texts.append(("origin history", world.origin_git("log", "--all", "-p", "--format=%H%n%B")))
    texts += [(f"PR #{pr['number']} body", str(pr.get("body"))) for pr in world.github.pulls]
    for where, text in texts:
        for canary in ALL_CANARIES:
            assert canary not in text, f"a secret leaked into {where}"
