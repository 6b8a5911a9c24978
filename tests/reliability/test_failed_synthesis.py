"""A failed synthesis never loses the legs (DESIGN, issue 21.2): the good reports are still published.

The gateway answers every synthesis call (sessions `<cycle>:synthesis:*`) with 503 or 401 while the
legs' calls are served. Then `run --push`, and `publish --synthesis-failed true` after `research` and a
failed `synthesize` (what the workflow's publish job runs), still commit and push the reports; the
branch holds no synthesis of other reports (a merged one is removed, never left to be read as current);
the PR is a draft, labelled `partial`, titled `(partial: synthesis missing)` and says why. Every command
is a fresh process, against real git, a bare origin and the fake GitHub serving it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.userworld import (  # noqa: F401  (the fixture)
    BRANCH,
    CYCLE,
    STEMS,
    TOPIC_IDS,
    UserWorld,
    push_main,
    user_world,
)

reliability = pytest.mark.reliability
SYNTHESIS_FILES = ["framework/composer-replication-framework.md", "framework/claims.json",
                   "framework/synthesis.calls.jsonl"]


def fail_synthesis(world: UserWorld, status: int) -> None:
    world.gateway.set_scenario({"rules": [{"match": {"session": "*:synthesis:*"}, "status": status}]})


def retitle(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("\ntitle: ", "\ntitle: Revised - ", 1), encoding="utf-8")


def branch_files(world: UserWorld, branch: str = BRANCH) -> list[str]:
    return world.origin_git("ls-tree", "-r", "--name-only", branch).split()


def expect_published_without_synthesis(world: UserWorld, names: list[str]) -> dict:
    files = branch_files(world)
    for name in names:
        assert f"research/{STEMS[name]}.md" in files, files
        assert f"research/{STEMS[name]}.calls.jsonl" in files, files
    assert not [f for f in files if f.startswith("framework/")], files
    (pr,) = [pr for pr in world.pulls() if pr["head"]["ref"] == BRANCH]
    assert pr["state"] == "open" and pr["draft"] is True
    assert "partial" in {label["name"] for label in pr["labels"]}
    assert "synthesis missing)" in pr["title"], pr["title"]
    assert "**the synthesis is missing**" in pr["body"] and "The synthesis is missing:" in pr["body"]
    return pr


@pytest.mark.slow
@reliability(area="refresh", case="run --push while the gateway answers {id} to every synthesis call",
             expect="the synthesize stage fails (exit 1) but the three good reports are committed and pushed; no "
                    "synthesis on the branch; one PR: draft, labelled partial, titled '(partial: synthesis missing)', "
                    "saying why")
@pytest.mark.parametrize("status", [503, 401])
def test_run_push_publishes_the_reports_when_the_synthesis_fails(user_world: UserWorld, status: int) -> None:  # noqa: F811
    clone = user_world.clone()
    fail_synthesis(user_world, status)
    done = user_world.cli(clone, "run", "--push")
    assert done.code == 1, done
    assert "synthesize: FAILED" in done.output and "publish: skipped" not in done.output, done.output
    pr = expect_published_without_synthesis(user_world, ["A", "B", "C"])
    assert "(partial: synthesis missing) — 3 reports" in pr["title"], pr["title"]
    assert ("503" if status == 503 else "401") in pr["body"], pr["body"]


@pytest.mark.slow
@reliability(area="refresh", case="a merged synthesis on main, then run --push of a new cycle whose synthesis fails",
             expect="the new cycle's reports are pushed and main's synthesis files are removed from the branch in "
                    "their own commit (it describes other reports); docs/METHODOLOGY.md is left alone; the PR is "
                    "partial and says the synthesis is missing")
def test_a_synthesis_of_other_reports_is_removed_not_shown_as_current(user_world: UserWorld) -> None:  # noqa: F811
    first = user_world.clone()
    done = user_world.cli(first, "run", "--topics", TOPIC_IDS["A"], "--push", "--cycle", "2026-H1")
    assert done.code == 0, done
    user_world.origin_git("update-ref", "refs/heads/main", "refs/heads/research-refresh/2026-H1")  # merged
    assert "framework/claims.json" in branch_files(user_world, "main")
    # the topic is retitled on main: another report, so no cached extraction can stand in for the gateway
    push_main(user_world, lambda clone: retitle(clone / "topics" / f"{STEMS['A']}.yaml"), "Retitle topic A")
    fail_synthesis(user_world, 503)
    second = user_world.clone()
    done = user_world.cli(second, "run", "--topics", TOPIC_IDS["A"], "--push")
    assert done.code == 1, done
    expect_published_without_synthesis(user_world, ["A"])
    subjects = user_world.origin_git("log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert subjects[0] == f"research(synthesis): remove the {CYCLE} synthesis until it can be recomputed", subjects
    changed = user_world.origin_git("diff", "--name-only", f"main...{BRANCH}").split()
    assert "docs/METHODOLOGY.md" not in changed and set(SYNTHESIS_FILES) <= set(changed)


@reliability(area="refresh", case="research, a failed synthesize, then publish --synthesis-failed true (the workflow's "
                                  "publish job after a failed synthesize job)",
             expect="synthesize exits 1; publish pushes the report and opens the PR as a draft, labelled partial, "
                    "'(partial: synthesis missing)', saying the synthesize job failed")
def test_publish_after_a_failed_synthesize_publishes_the_reports(user_world: UserWorld) -> None:  # noqa: F811
    clone = user_world.clone()
    done = user_world.cli(clone, "research", TOPIC_IDS["A"])
    assert done.code == 0, done
    fail_synthesis(user_world, 503)
    done = user_world.cli(clone, "synthesize")
    assert done.code == 1, done
    done = user_world.cli(clone, "publish", "--topics", TOPIC_IDS["A"], "--synthesis-failed", "true")
    assert done.code == 0, done
    pr = expect_published_without_synthesis(user_world, ["A"])
    assert "synthesize job of this run failed" in pr["body"]


@reliability(area="input", case="a report holding a git conflict marker (an unfinished merge), then synthesize and "
                                "publish",
             expect="synthesize refuses it as publish does: exit 2 naming the report and the line, before any "
                    "synthesis call; publish exit 2 alike, nothing pushed")
def test_synthesize_refuses_a_conflict_marker_as_publish_does(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    assert world.cli(clone, "research", TOPIC_IDS["A"]).code == 0
    report = clone / "research" / f"{STEMS['A']}.md"
    lines = report.read_text(encoding="utf-8").split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("## ")) + 1
    lines[at:at] = ["<<<<<<< HEAD", "our paragraph", "=======", "their paragraph", ">>>>>>> other"]
    report.write_text("\n".join(lines), encoding="utf-8")
    calls = len(world.gateway.completions)
    for command in ("synthesize", "publish"):
        done = world.cli(clone, command)
        assert done.code == 2, done
        assert f"research/{STEMS['A']}.md" in done.output and f"line {at + 1}" in done.output, done
        assert "conflict marker" in done.output and "Traceback" not in done.output, done
    assert len(world.gateway.completions) == calls  # no synthesis call was made
    assert not world.branch_exists()
