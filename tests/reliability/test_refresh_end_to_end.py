"""The whole refresh (`run --push`: legs, verify, synthesize, publish) under hostile content and with
canary keys, checked where the stage tests cannot: across every stage, in every git object.

Uses the publish tests' world (a git repository, a bare `origin`, the fake GitHub in front of it) and
the real `run` command.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from research_dispatch.run.refresh import run_command
from tests.conftest import CANARY

# the publish tests' world fixtures (a repository, its bare origin and the fake GitHub)
from tests.publish.conftest import BRANCH, CYCLE, World, git, small_world, world_factory  # noqa: F401
from tests.reliability.conftest import CONTROL, TARGET, on_target

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability
INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")


def refresh(world: World, lines: list[str]) -> int:
    return run_command(world.repo, topics=[], models=[], jobs=2, publish=True, push=True, fresh=False,
                       cycle=CYCLE, env=os.environ, echo=lines.append)


def all_objects(repo: Path) -> bytes:
    """Every object in the repository's database, reachable or not (`git cat-file --batch-all-objects`)."""
    return subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True,
                          check=True).stdout


@reliability(area="hostile", case="full refresh with injection pages and a gullible model: the PR and commits",
             expect="one PR; its body has exactly one HTML comment (the bot's marker), mentions in backticks, no "
                    "bidi/zero-width characters, no `${{` or raw HTML; commit messages carry no hostile text; the "
                    "branch changes only computed paths")
def test_hostile_refresh_reaches_the_pr_sanitised(small_world: World, gateway, tavily) -> None:  # noqa: F811
    tavily.set_scenario({"hostile": True})
    gateway.set_scenario({"script": {"gullible": True},
                          "rules": [on_target(on_call=1, serve_model="deepseek/deepseek-v3")]})
    lines: list[str] = []
    code = refresh(small_world, lines)
    assert code == 3, "\n".join(lines)  # the leg served by another model is not verified
    assert len(small_world.github.pulls) == 1
    body = small_world.github.pulls[0]["body"]
    assert body.count("<!--") == 1 and body.count("-->") == 1 and body.count("research-refresh:v1") == 1
    assert body.startswith(f"<!-- research-refresh:v1 cycle={CYCLE} -->")
    assert not re.search(r"(?<![`\w])@(octocat|github-actions|dependabot)", body)
    assert not INVISIBLE.search(body.replace("\n", ""))
    assert "${{" not in body and not re.search(r"<\s*(script|img|a|iframe)\b", body, re.IGNORECASE)
    assert not re.search(r"^\s*::", body, re.MULTILINE)
    assert "evil.example" not in body
    log = small_world.origin_git("log", "--format=%B", f"main..{BRANCH}")
    for marker in ("evil.example", "@", "<!--", "${{", "::", "\u202e", "gpt-5-pro"):
        assert marker not in log, marker
    changed = set(small_world.origin_git("diff", "--name-only", f"main...{BRANCH}").splitlines())
    allowed = {f"research/{s}{ext}" for s in (TARGET.stem, CONTROL.stem)
               for ext in (".md", ".calls.jsonl", ".evidence.jsonl")}
    allowed |= {"framework/composer-replication-framework.md", "framework/claims.json",
                "framework/synthesis.calls.jsonl", "docs/METHODOLOGY.md"}
    assert changed <= allowed and f"research/{TARGET.stem}.md" in changed


@reliability(area="secrets", case="run --push with a failing leg: every file, git object, output and request",
             expect="no canary in the working tree, build/ (traces, status), any git object of the repository "
                    "or the origin (`git cat-file --batch-all-objects`), the run's output, the PR, its comments, "
                    "or any request body sent to the gateway, search or GitHub")
def test_canaries_across_run_and_publish(small_world: World, gateway, tavily) -> None:  # noqa: F811
    gateway.set_scenario({"rules": [on_target(status=402, message=f"no credit for {CANARY['OPENROUTER_API_KEY']}")]})
    lines: list[str] = []
    code = refresh(small_world, lines)
    assert code == 1, "\n".join(lines)
    assert len(small_world.github.pulls) == 1 and small_world.github.pulls[0]["draft"] is True
    output = "\n".join(lines)
    assert "[REDACTED]" in (small_world.repo / "build" / "legs" / f"{TARGET.stem}.json").read_text()
    blobs: list[tuple[str, bytes]] = [("run output", output.encode()),
                                      ("PR state", repr(small_world.github.state()).encode())]
    for repo in (small_world.repo, small_world.origin):
        blobs.append((f"objects of {repo.name}", all_objects(repo)))
        blobs.append((f"log of {repo.name}", git(repo, "log", "-p", "--all").encode()))
        blobs += [(str(p), p.read_bytes()) for p in repo.rglob("*") if p.is_file()]
    for server in (gateway, tavily, small_world.github):
        blobs += [(f"request {r.path}", r.body) for r, _ in server.requests]
    blobs += [(f"response {r.path}", resp.body) for r, resp in small_world.github.requests]
    # (the gateway's 402 answers echo the key on purpose: that is the fault under test)
    assert len(blobs) > 50
    for name, blob in blobs:
        for variable, secret in CANARY.items():
            assert secret.encode() not in blob, f"{variable} leaked into {name}"
