"""Fixtures for the publish stage: a real git repository with a bare `origin`, the fake GitHub serving
that origin, and reports produced by real legs against the fake gateway and search.

Nothing of the product is mocked: git is the real CLI, the PR goes through the real PyGithub client.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.plan import Leg, plan_legs
from research_dispatch.config.settings import Settings, load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.leg.execute import run_leg
from research_dispatch.leg.status import LegResult
from research_dispatch.publish import PublishOptions, PublishResult, publish
from research_dispatch_fakes.github import FakeGitHub
from tests.clirun import CliRun, run_cli
from tests.conftest import CANARY, ROOT

CYCLE = "2026-H2"
BRANCH = f"research-refresh/{CYCLE}"
BOT_EMAIL = "research-dispatch[bot]@users.noreply.github.com"
FRAMEWORK = "composer-replication-framework"
PYPROJECT = f"""[project]
name = "review"

[tool.research-dispatch]
framework_name = "{FRAMEWORK}"
pr = {{api_backoff_s = 0.0, api_max_wait_s = 30.0}}
"""


def git_env(name: str = "Mia Maintainer", email: str = "mia@example.invalid") -> dict[str, str]:
    """A person's git environment: no global or system config, fixed identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": name,
                "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email})
    for key in CANARY:
        env.pop(key, None)
    return env


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, env=env or git_env(), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {out.stderr}")
    return out.stdout.strip()


@dataclass
class World:
    """The repository under test, its bare origin and the fake GitHub in front of that origin."""

    root: Path
    repo: Path
    origin: Path
    github: FakeGitHub
    sleeps: list[float] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        return load_settings(self.repo)

    def legs(self) -> list[Leg]:
        return plan_legs(load_topics(self.repo, self.settings), self.settings)

    def run_legs(self, *topics: str) -> list[LegResult]:
        settings = self.settings
        chosen = [leg for leg in self.legs() if not topics or leg.topic.id in topics]
        return [run_leg(self.repo, settings, leg, env=os.environ, cycle=CYCLE) for leg in chosen]

    def write_synthesis(self, note: str = "first", ledger: dict[str, Any] | None = None) -> None:
        """A stand-in synthesis whose ledger lists the reports in research/ (so it matches the commit)."""
        framework = self.repo / "framework"
        framework.mkdir(exist_ok=True)
        (framework / f"{FRAMEWORK}.md").write_text(f"# Synthesis\n\nGenerated ({note}).\n", encoding="utf-8")
        data = {"schema": "test-ledger", "claims": [], **(ledger or {}), "reports": self.ledger_reports()}
        (framework / "claims.json").write_text(json.dumps(data) + "\n", encoding="utf-8")
        methodology = self.repo / "docs" / "METHODOLOGY.md"
        methodology.write_text(methodology.read_text(encoding="utf-8") + f"\nDispatch table ({note}).\n",
                               encoding="utf-8")

    def ledger_reports(self) -> list[dict[str, str]]:
        """The `reports` entries a synthesis of the current research/ would list (path and file sha256)."""
        return [{"path": f"research/{p.name}", "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                for p in sorted((self.repo / "research").glob("*.md"))]

    def publish(self, **kwargs: Any) -> PublishResult:
        kwargs.setdefault("cycle", CYCLE)
        env = kwargs.pop("env", None)
        return publish(self.repo, self.settings, PublishOptions(**kwargs), env=env, sleep=self.sleeps.append,
                       log=self.logs.append)

    def cli(self, *args: str) -> CliRun:
        return run_cli("publish", "--repo", str(self.repo), "--cycle", CYCLE, *args)

    def origin_sha(self, ref: str) -> str | None:
        out = subprocess.run(["git", "--git-dir", str(self.origin), "rev-parse", "--verify", "--quiet", ref],
                             env=git_env(), capture_output=True, text=True, check=False)
        return out.stdout.strip() or None

    def origin_git(self, *args: str) -> str:
        return git(self.origin, *args)

    def human_push(self, path: str = "research/NOTES-human.md", text: str = "A reviewer's note.\n",
                   branch: str = BRANCH) -> str:
        """A person clones origin, commits to the refresh branch and pushes."""
        clone = self.root / f"human-{len(list(self.root.glob('human-*')))}"
        git(self.root, "clone", "-q", str(self.origin), str(clone))
        git(clone, "checkout", "-q", branch)
        target = clone / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        git(clone, "add", path)
        git(clone, "commit", "-q", "-m", "Reviewer edit")
        git(clone, "push", "-q", "origin", branch)
        return git(clone, "rev-parse", "HEAD")


def make_repo(root: Path, topics: list[str] | None = None) -> tuple[Path, Path]:
    repo = root / "repo"
    (repo / "topics").mkdir(parents=True)
    for path in sorted((ROOT / "topics").glob("*.yaml")):
        if topics is None or any(t in path.name for t in topics):
            shutil.copy(path, repo / "topics")
    (repo / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (repo / "docs").mkdir()
    (repo / "docs" / "METHODOLOGY.md").write_text("# Methodology\n", encoding="utf-8")
    (repo / ".gitignore").write_text("build/\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial commit")
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    return repo, origin


@pytest.fixture
def world_factory(tmp_path: Path, fake_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
                  ) -> Iterator[Callable[..., World]]:
    servers: list[FakeGitHub] = []

    def build(topics: list[str] | None = None) -> World:
        repo, origin = make_repo(tmp_path, topics)
        github = FakeGitHub(git_dir=origin, token=CANARY["GITHUB_TOKEN"])
        github.__enter__()
        servers.append(github)
        for key, value in {"GITHUB_TOKEN": CANARY["GITHUB_TOKEN"], "GITHUB_REPOSITORY": "acme/review",
                           "GITHUB_API_URL": github.base_url, "GITHUB_SERVER_URL": "https://github.invalid",
                           "GITHUB_RUN_ID": "4242", "GIT_CONFIG_GLOBAL": os.devnull,
                           "GIT_CONFIG_NOSYSTEM": "1"}.items():
            monkeypatch.setenv(key, value)
        for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
            monkeypatch.delenv(key, raising=False)
        return World(root=tmp_path, repo=repo, origin=origin, github=github)

    yield build
    for server in servers:
        server.__exit__(None, None, None)


@pytest.fixture
def world(world_factory: Callable[..., World]) -> World:
    """All five of the project's topics, nothing researched yet."""
    return world_factory()


@pytest.fixture
def small_world(world_factory: Callable[..., World]) -> World:
    """Two topics (diloco-family, verl-trl), for the fault tests."""
    return world_factory(["02-diloco", "04-verl"])
