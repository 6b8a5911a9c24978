"""A user's world for the never-lose-work tests: the CLI as users type it, real git, a bare origin.

`origin.git` plays the GitHub repository (the fake GitHub serves it, so PRs see what git pushed); every
"user" works in their own clone of it, like a fresh checkout in CI or a colleague's laptop. Each command
is the real CLI with the user's whole environment (`cli`: in process, tests/clirun.py) against the fake
gateway, search and GitHub servers of the test; `process` runs it in a fresh interpreter where the process
is the point (two commands at once, a job log). Nothing of the product is imported to drive it: the tests
only read what a user could read — the output, the files, the branch on the origin, and the PR on the
fake GitHub.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from research_dispatch_fakes.github import FakeGitHub
from tests.clirun import CliRun, run_cli
from tests.conftest import CANARY, ROOT

CYCLE = "2026-H2"
BRANCH = f"research-refresh/{CYCLE}"
FRAMEWORK = "composer-replication-framework"
# three topics, three model families: A, B and C of the tests
TOPICS = {"A": "02-diloco-family", "B": "04-verl-trl", "C": "05-trace-replay-distillation"}
TOPIC_IDS = {"A": "diloco-family", "B": "verl-trl", "C": "trace-replay-distillation"}
STEMS = dict(TOPICS)
PYPROJECT = f"""[project]
name = "review"

[tool.research-dispatch]
framework_name = "{FRAMEWORK}"
pr = {{api_backoff_s = 0.0, api_max_wait_s = 30.0}}
gateway = {{backoff_base_s = 0.0, backoff_max_s = 0.0}}
search_service = {{backoff_base_s = 0.0, backoff_max_s = 0.0}}
"""


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Mia Maintainer",
                "GIT_AUTHOR_EMAIL": "mia@example.invalid", "GIT_COMMITTER_NAME": "Mia Maintainer",
                "GIT_COMMITTER_EMAIL": "mia@example.invalid"})
    for key in CANARY:
        env.pop(key, None)
    return env


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


@dataclass
class UserWorld:
    root: Path
    origin: Path
    github: FakeGitHub
    gateway: Any
    tavily: Any
    clones: list[Path] = field(default_factory=list)
    log: list[CliRun] = field(default_factory=list)

    # -- users ----------------------------------------------------------------------------------
    def clone(self) -> Path:
        """A fresh checkout of main, like a CI job or a colleague's laptop."""
        path = self.root / f"clone-{len(self.clones) + 1}"
        git(self.root, "clone", "-q", str(self.origin), str(path))
        self.clones.append(path)
        return path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update({
            "OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"], "OPENROUTER_BASE_URL": self.gateway.base_url,
            "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"], "TAVILY_BASE_URL": self.tavily.base_url,
            "GITHUB_TOKEN": CANARY["GITHUB_TOKEN"], "GITHUB_REPOSITORY": "acme/review",
            "GITHUB_API_URL": self.github.base_url, "RESEARCH_DISPATCH_CYCLE": CYCLE,
            "RESEARCH_DISPATCH_PROGRESS": "plain", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
            "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1,localhost",
        })
        env.update(extra)
        return env

    def cli(self, repo: Path, command: str, *args: str, env: dict[str, str] | None = None) -> CliRun:
        """`research-dispatch COMMAND --repo REPO ARGS...` with the user's environment (`env`), in process."""
        result = run_cli(command, "--repo", str(repo), *args, env=env or self.env())
        self.log.append(result)
        return result

    def process(self, repo: Path, command: str, *args: str, timeout: float = 300) -> CliRun:
        """The same command in a fresh interpreter (`python -m research_dispatch`), where the process is the
        point: what a workflow step's log shows is everything the process and its children print."""
        argv = [command, "--repo", str(repo), *args]
        done = subprocess.run([sys.executable, "-m", "research_dispatch", *argv], env=self.env(),
                              capture_output=True, text=True, timeout=timeout, check=False)
        result = CliRun(tuple(argv), done.returncode, done.stdout, done.stderr, done.stdout + done.stderr)
        self.log.append(result)
        return result

    def fail_legs(self, *names: str) -> None:
        """The gateway refuses (402) every call of these legs (A, B, C), and serves the others."""
        rules = [{"match": {"session": f"*:{STEMS[name]}"}, "status": 402} for name in names]
        self.gateway.set_scenario({"rules": rules})

    # -- what a user sees -----------------------------------------------------------------------
    def origin_git(self, *args: str) -> str:
        return git(self.origin, *args)

    def branch_exists(self) -> bool:
        return bool(self.origin_git("branch", "--list", BRANCH).strip())

    def branch_file(self, rel: str) -> str | None:
        done = subprocess.run(["git", "cat-file", "blob", f"{BRANCH}:{rel}"], cwd=self.origin, env=git_env(),
                              capture_output=True, check=False)
        return done.stdout.decode("utf-8") if done.returncode == 0 else None

    def branch_reports(self) -> dict[str, str]:
        """{stem: report text} of every report on the refresh branch."""
        if not self.branch_exists():
            return {}
        names = self.origin_git("ls-tree", "--name-only", f"{BRANCH}:research").split()
        return {n[:-3]: self.branch_file(f"research/{n}") or "" for n in names if n.endswith(".md")}

    def pulls(self) -> list[dict[str, Any]]:
        return self.github.pulls

    def pr(self) -> dict[str, Any]:
        pulls = self.pulls()
        assert len(pulls) == 1, f"{len(pulls)} PRs"
        return pulls[0]


def report(clone: Path, name: str) -> str:
    """The report of leg `name` ("A", "B", "C") as the clone holds it: in its work tree (where `research`
    writes it), else on its local refresh branch (where `run` commits it, leaving the work tree as it
    found it)."""
    path = clone / "research" / f"{STEMS[name]}.md"
    if path.exists():
        return path.read_text(encoding="utf-8")
    return git(clone, "cat-file", "blob", f"{BRANCH}:research/{STEMS[name]}.md")


def checkout_status(clone: Path) -> str:
    """`git status --porcelain` of the research and framework directories and the methodology page: empty
    when a run left the base branch's work tree as it found it."""
    return git(clone, "status", "--porcelain", "-uall", "--", "research", "framework", "docs/METHODOLOGY.md")


def front_matter(text: str) -> dict[str, Any]:
    return yaml.safe_load(text.split("---\n", 2)[1])


def file_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_origin(root: Path, topics: dict[str, str] = TOPICS) -> Path:
    """main: the topics, the config, a methodology page; pushed to a bare origin."""
    seed = root / "seed"
    (seed / "topics").mkdir(parents=True)
    for stem in topics.values():
        shutil.copy(ROOT / "topics" / f"{stem}.yaml", seed / "topics")
    (seed / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (seed / "docs").mkdir()
    (seed / "docs" / "METHODOLOGY.md").write_text("# Methodology\n", encoding="utf-8")
    (seed / ".gitignore").write_text("build/\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main", str(seed))
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "Initial commit")
    origin = root / "origin.git"
    git(root, "clone", "-q", "--bare", str(seed), str(origin))
    return origin


def push_main(world: UserWorld, change: Any, message: str) -> None:
    """A maintainer changes main (e.g. renames a topic) and pushes it."""
    clone = world.root / f"maintainer-{len(list(world.root.glob('maintainer-*')))}"
    git(world.root, "clone", "-q", str(world.origin), str(clone))
    change(clone)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", message)
    git(clone, "push", "-q", "origin", "main")


@pytest.fixture
def user_world(tmp_path: Path, gateway: Any, tavily: Any) -> Iterator[UserWorld]:
    origin = make_origin(tmp_path)
    with FakeGitHub(git_dir=origin, token=CANARY["GITHUB_TOKEN"]) as github:
        yield UserWorld(root=tmp_path, origin=origin, github=github, gateway=gateway, tavily=tavily)


# -- the invariants every step must keep ----------------------------------------------------------


def expect_branch(world: UserWorld, expected: dict[str, str]) -> None:
    """The branch holds, for every planned leg, exactly the newest good report (`expected`: name → text),
    each with its own call log; legs without one have no report; the synthesis lists exactly these."""
    reports = world.branch_reports()
    want = {STEMS[name]: text for name, text in expected.items()}
    assert set(reports) == set(want), f"branch reports {sorted(reports)}, expected {sorted(want)}"
    for stem, text in want.items():
        assert reports[stem] == text, f"{stem}: the branch does not hold the newest good report"
        calls = world.branch_file(f"research/{stem}.calls.jsonl")
        ids = [json.loads(line)["generation_id"] for line in (calls or "").splitlines() if line.strip()]
        assert ids and ids == front_matter(text)["generation_ids"], f"{stem}: call log does not match its report"
    ledger = world.branch_file("framework/claims.json")
    if ledger is not None:
        listed = {r["path"]: r["sha256"] for r in json.loads(ledger)["reports"]}
        assert listed == {f"research/{stem}.md": file_sha(text) for stem, text in want.items()}, \
            "the synthesis on the branch does not describe exactly the branch's reports"


def expect_pr(world: UserWorld, *, complete: bool) -> dict[str, Any]:
    """One PR; draft, labelled `partial` and titled as partial exactly while the refresh is incomplete."""
    pr = world.pr()
    labels = {label["name"] for label in pr["labels"]}
    assert pr["state"] == "open"
    assert pr["draft"] is (not complete), pr["title"]
    assert ("partial" in labels) is (not complete), labels
    assert ("(partial:" in pr["title"]) is (not complete), pr["title"]
    assert pr["head"]["sha"] == world.origin_git("rev-parse", BRANCH).strip()
    return pr
