"""The publish stage end to end: real legs, real git, the real PyGithub client against the fake GitHub."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import CANARY
from tests.publish.conftest import BOT_EMAIL, BRANCH, CYCLE, FRAMEWORK, World, git

FIXED = ("Requested-Model", "Served-Model", "Served-Provider", "Route")


def trailers_by_commit(world: World, rng: str) -> list[tuple[str, dict[str, list[str]]]]:
    """(subject, {key: [values]}) per commit, oldest first, as `%(trailers)` shows them."""
    out = world.origin_git("log", "--reverse", "--format=%s%x00%(trailers)%x1e", rng)
    result = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        subject, _, trailers = record.partition("\x00")
        parsed: dict[str, list[str]] = {}
        for line in trailers.splitlines():
            if ": " in line:
                key, value = line.split(": ", 1)
                parsed.setdefault(key, []).append(value)
        result.append((subject, parsed))
    return result


@pytest.mark.slow
def test_first_publish_opens_one_pr_with_one_commit_per_report_and_fixed_trailers(world: World) -> None:
    results = world.run_legs()
    assert [r.status for r in results] == ["ok"] * 5
    world.write_synthesis()

    cli = world.cli()
    assert cli.code == 0, cli.output + cli.stderr

    commits = trailers_by_commit(world, f"main..{BRANCH}")
    assert len(commits) == 6  # five reports, one synthesis
    stems = sorted(leg.stem for leg in world.legs())
    for (subject, trailers), leg in zip(commits[:5], sorted(world.legs(), key=lambda item: item.stem), strict=True):
        assert subject == f"research({leg.topic.id}): refresh {leg.stem} with {leg.route.model}"
        assert all(key in trailers for key in FIXED), trailers
        assert trailers["Requested-Model"] == [leg.route.model]
        assert trailers["Served-Model"] == [leg.route.model]
        assert trailers["Route"] == ["exact"] and trailers["Report-Status"] == ["ok"]
        assert trailers["Refresh-Cycle"] == [CYCLE] and trailers["Research-Leg"] == [leg.stem]
        assert int(trailers["Generation-Count"][0]) >= 1 and float(trailers["Cost-USD"][0]) > 0
        assert trailers["Run-Link"] == ["https://github.invalid/acme/review/actions/runs/4242"]
    diloco = dict(commits)["research(diloco-family): refresh 02-diloco-family with deepseek/deepseek-v4-pro"]
    assert diloco["Served-Provider"] == ["DeepSeek"]
    assert commits[5][0] == f"research(synthesis): regenerate for {CYCLE}"

    # each report commit holds exactly its report, call log and evidence file; the synthesis commit its own files
    files = [world.origin_git("show", "--name-only", "--format=", f"{BRANCH}~{n}").splitlines()
             for n in range(5, -1, -1)]
    for names, stem in zip(files[:5], stems, strict=True):
        assert sorted(names) == [f"research/{stem}.calls.jsonl", f"research/{stem}.evidence.jsonl",
                                 f"research/{stem}.md"]
    assert sorted(files[5]) == ["docs/METHODOLOGY.md", "framework/claims.json", f"framework/{FRAMEWORK}.md"]
    authors = set(world.origin_git("log", "--format=%ae %ce", f"main..{BRANCH}").splitlines())
    assert authors == {f"{BOT_EMAIL} {BOT_EMAIL}"}

    pulls = world.github.pulls
    assert len(pulls) == 1
    pr = pulls[0]
    assert pr["head"]["ref"] == BRANCH and pr["base"]["ref"] == "main" and pr["draft"] is False
    assert pr["title"] == f"docs(research): refresh {CYCLE} — 5 reports, synthesis"
    assert pr["body"].startswith(f"<!-- research-refresh:v1 cycle={CYCLE} -->\n")
    assert {label["name"] for label in pr["labels"]} == {"research-refresh", "automated"}
    assert pr["head"]["sha"] == world.origin_sha(BRANCH)
    assert "pull request: #1 created" in cli.output
    saved = (world.repo / "build" / "pr-body.md").read_text(encoding="utf-8")
    assert saved == pr["body"]

    # the user's working tree, index and HEAD are untouched: still on main, nothing staged
    assert git(world.repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git(world.repo, "diff", "--cached", "--name-only") == ""
    assert git(world.repo, "rev-parse", BRANCH) == world.origin_sha(BRANCH)


@pytest.mark.slow
def test_second_publish_updates_the_same_pr(world: World) -> None:
    world.run_legs()
    world.write_synthesis()
    first = world.publish()
    assert first.operation == "created" and first.pr_number == 1 and len(first.commits) == 6

    again = world.publish()  # nothing changed: the branch is reused, the PR updated
    assert again.operation == "updated" and again.pr_number == 1 and again.pushed is False
    assert again.commits == first.commits

    world.run_legs("diloco-family")  # a re-run leg: new timestamps, new generation ids
    third = world.publish()
    assert third.operation == "updated" and third.pr_number == 1 and third.pushed is True
    assert len(third.commits) == 6 and third.commits != first.commits
    assert len(world.github.pulls) == 1
    assert world.github.pulls[0]["head"]["sha"] == third.commits[-1] == world.origin_sha(BRANCH)
    assert world.github.pulls[0]["body"] == third.body


@pytest.mark.slow
def test_a_human_commit_on_the_branch_is_not_overwritten(world: World) -> None:
    world.run_legs("diloco-family", "verl-trl")
    world.write_synthesis()
    assert world.publish().operation == "created"
    human = world.human_push()

    world.run_legs("diloco-family")
    cli = world.cli()
    assert cli.code == 1, cli.output + cli.stderr
    assert "blocked" in cli.output and "Mia Maintainer" in cli.output
    assert world.origin_sha(BRANCH) == human  # still the human's commit on top
    comments = world.github.comments[1]
    assert len(comments) == 1
    assert "Edited/Blocked" in comments[0]["body"] and human[:12] in comments[0]["body"]
    body = world.github.pulls[0]["body"]
    assert "keeps the newest good report of the cycle from any run, **unless someone else has pushed to it**" in body

    # a re-run does not repeat the comment, and still does not push
    assert world.cli().code == 1
    assert len(world.github.comments[1]) == 1 and world.origin_sha(BRANCH) == human
    assert len(world.github.pulls) == 1


@pytest.mark.slow
def test_a_leg_failure_makes_the_pr_a_draft_and_names_the_leg(world: World, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"model": "anthropic/*"}, "status": 402,
                                     "message": "Insufficient credits"}]})
    results = {r.stem: r.status for r in world.run_legs()}
    assert results["04-verl-trl"] == "failed"
    world.write_synthesis()
    result = world.publish()
    assert result.operation == "created" and result.draft is True
    assert result.legs_without_report == ["04-verl-trl"]
    pr = world.github.pulls[0]
    assert pr["draft"] is True
    assert pr["title"] == f"docs(research): refresh {CYCLE} (partial: 4/5 legs) — 4 reports, synthesis, 1 failed"
    assert "`04-verl-trl` (anthropic/claude-sonnet-4.6) — **failed**" in pr["body"]
    assert "402" in pr["body"]
    assert "partial" in {label["name"] for label in pr["labels"]}
    assert "topics=`verl-trl`" in pr["body"]

    # the leg is re-run successfully: the PR becomes ready for review and loses `partial`
    gateway.set_scenario({"rules": []})
    world.run_legs("verl-trl")
    again = world.publish()
    assert again.operation == "updated" and again.draft is False
    pr = world.github.pulls[0]
    assert pr["draft"] is False and "partial" not in {label["name"] for label in pr["labels"]}
    assert pr["title"] == f"docs(research): refresh {CYCLE} — 5 reports, synthesis"


def test_an_unverified_route_makes_the_pr_a_draft(small_world: World, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"model": "deepseek/*"}, "on_call": 2,
                                     "serve_model": "deepseek/deepseek-v3"}]})
    small_world.run_legs()
    result = small_world.publish()
    assert result.draft is True and result.unverified_legs == ["02-diloco-family"]
    pr = small_world.github.pulls[0]
    assert pr["draft"] is True and pr["title"].endswith("— 2 reports, 1 unverified")
    assert "⚠️ model_fallback" in pr["body"]
    trailers = trailers_by_commit(small_world, f"main..{BRANCH}")[0][1]
    assert trailers["Route"] == ["model_fallback"]
    assert trailers["Served-Model"] == ["deepseek/deepseek-v3", "deepseek/deepseek-v4-pro"]


def test_only_computed_paths_are_committed(world: World) -> None:
    world.run_legs("diloco-family")
    world.write_synthesis()
    (world.repo / "research" / "stray.md").write_text("not a planned report\n", encoding="utf-8")
    (world.repo / "research" / "02-diloco-family.notes.txt").write_text("scratch\n", encoding="utf-8")
    (world.repo / "framework" / "extra.md").write_text("extra\n", encoding="utf-8")
    (world.repo / "secrets.txt").write_text("password\n", encoding="utf-8")
    (world.repo / "pyproject.toml").write_text((world.repo / "pyproject.toml").read_text() + "# edited\n")
    git(world.repo, "add", "secrets.txt")  # even a staged file stays out

    result = world.publish()
    assert result.operation == "created"
    changed = set(world.origin_git("diff", "--name-only", f"main...{BRANCH}").splitlines())
    assert changed == {"research/02-diloco-family.md", "research/02-diloco-family.calls.jsonl",
                       "research/02-diloco-family.evidence.jsonl",
                       f"framework/{FRAMEWORK}.md", "framework/claims.json", "docs/METHODOLOGY.md"}
    assert any("research/stray.md is not a computed" in w for w in result.warnings)
    # the user's staged file is still staged, and nothing else was staged or changed
    assert git(world.repo, "diff", "--cached", "--name-only") == "secrets.txt"
    assert "missing" in result.body and result.draft is True  # four legs never ran


def test_nothing_changed_means_no_commit_and_no_pr(world: World) -> None:
    world.run_legs("diloco-family")
    git(world.repo, "add", "research/02-diloco-family.md", "research/02-diloco-family.calls.jsonl",
        "research/02-diloco-family.evidence.jsonl")
    git(world.repo, "commit", "-q", "-m", "Reports merged")
    git(world.repo, "push", "-q", "origin", "main")
    refs_before = world.origin_git("for-each-ref")

    cli = world.cli()
    assert cli.code == 0, cli.output + cli.stderr
    assert "nothing to publish" in cli.output
    assert world.github.pulls == [] and world.origin_git("for-each-ref") == refs_before
    assert world.origin_sha(BRANCH) is None


def test_dry_run_prints_title_and_body_and_writes_nothing(world: World, monkeypatch) -> None:
    world.run_legs("diloco-family", "verl-trl")
    world.write_synthesis()
    monkeypatch.delenv("GITHUB_TOKEN")  # not needed for a dry run

    def snapshot() -> tuple[str, ...]:
        objects = subprocess.run(["find", ".git/objects", "-type", "f"], cwd=world.repo, capture_output=True,
                                 text=True, check=True).stdout
        return (git(world.repo, "for-each-ref"), objects, world.origin_git("for-each-ref"),
                git(world.repo, "status", "--porcelain"), json.dumps(world.github.state(), sort_keys=True))

    before = snapshot()
    requests_before = len(world.github.requests)
    cli = world.cli("--dry-run")
    assert cli.code == 0, cli.output + cli.stderr
    assert cli.output.startswith(f"docs(research): refresh {CYCLE} (partial: 2/5 legs) — 2 reports, synthesis, "
                                 "3 missing\n\n"
                                 f"<!-- research-refresh:v1 cycle={CYCLE} -->")
    assert "dry run: nothing was committed, pushed or sent" in cli.output
    assert snapshot() == before
    assert len(world.github.requests) == requests_before
    assert not (world.repo / "build" / "pr-body.md").exists()


def test_no_push_commits_to_a_local_branch_only(world: World) -> None:
    world.run_legs("diloco-family")
    cli = world.cli("--no-push")
    assert cli.code == 0, cli.output + cli.stderr
    assert world.origin_sha(BRANCH) is None and world.github.requests == []
    local = git(world.repo, "log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert local == ["research(diloco-family): refresh 02-diloco-family with deepseek/deepseek-v4-pro"]
    assert git(world.repo, "symbolic-ref", "HEAD") == "refs/heads/main"


def test_missing_token_or_repository_is_exit_2_before_any_request(world: World, monkeypatch) -> None:
    world.run_legs("diloco-family")
    monkeypatch.delenv("GITHUB_TOKEN")
    cli = world.cli()
    assert cli.code == 2
    assert "GITHUB_TOKEN is not set" in cli.stderr
    monkeypatch.setenv("GITHUB_TOKEN", CANARY["GITHUB_TOKEN"])
    monkeypatch.delenv("GITHUB_REPOSITORY")
    cli = world.cli()
    assert cli.code == 2 and "GITHUB_REPOSITORY" in cli.stderr
    assert world.github.requests == [] and world.origin_sha(BRANCH) is None


def test_branch_and_base_options(world: World) -> None:
    world.run_legs("diloco-family")
    git(world.repo, "push", "-q", "origin", "main:release")
    result = world.publish(branch="refresh/custom", base="release")
    assert result.operation == "created" and result.branch == "refresh/custom"
    pr = world.github.pulls[0]
    assert pr["head"]["ref"] == "refresh/custom" and pr["base"]["ref"] == "release"
    bad = world.cli("--branch", "bad..name")
    assert bad.code == 2 and "--branch" in bad.stderr

