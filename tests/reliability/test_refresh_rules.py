"""The rules around the refresh, run as a user runs them (the CLI, real git, the fake GitHub; see
userworld.py): GitHub that cannot make drafts or labels, hand edits, one writer at a time, money,
truthful commits. One writer at a time is between processes, so that case runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from research_dispatch_fakes.script_researcher import DEFAULT_SEARCHES
from tests.conftest import ROOT
from tests.faultshim import Faults
from tests.reliability.userworld import (  # noqa: F401  (the fixture)
    BRANCH,
    FRAMEWORK,
    STEMS,
    TOPIC_IDS,
    UserWorld,
    checkout_status,
    expect_pr,
    front_matter,
    git,
    push_main,
    user_world,
)

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability
DRAFTS_NOTE = "GitHub does not support draft pull requests in this repository"
FORBIDDEN_NOTE = "GitHub refused to"
LABEL_NOTE = "GitHub refused the label(s)"


def trailers(world: UserWorld, stem: str) -> tuple[str, dict[str, list[str]]]:
    """(subject, trailers) of the branch's commit that last touched a leg's report."""
    out = world.origin_git("log", "-1", "--format=%s%x00%(trailers)", f"main..{BRANCH}", "--", f"research/{stem}.md")
    subject, _, block = out.strip("\n").partition("\x00")
    found: dict[str, list[str]] = {}
    for line in block.splitlines():
        if ": " in line:
            key, value = line.split(": ", 1)
            found.setdefault(key, []).append(value)
    return subject, found


def edit_body(path: Path, note: str) -> str:
    text = path.read_text(encoding="utf-8")
    edited = text.replace("\n## References", f"\n{note}\n\n## References", 1)
    assert edited != text
    path.write_text(edited, encoding="utf-8")
    return edited


# -- (3) what GitHub refuses: the label, the title and the body carry the partial state ---------------


@reliability(area="refresh", case="a repository without draft PRs (422 'Draft pull requests are not supported "
                                  "in this repository.') and a partial refresh",
             expect="publish succeeds: one PR, open for review, labelled `partial`, titled and described as partial; "
                    "the reason is said once")
def test_no_drafts_in_this_repository(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    world.github.configure(drafts_supported=False)
    world.fail_legs("B")
    done = world.cli(world.clone(), "run", "--push")
    assert done.code == 1 and "pull request: #1 created, partial" in done.output, done  # the leg failed, not publish
    assert done.output.count(DRAFTS_NOTE) == 1, done
    pr = world.pr()
    assert pr["draft"] is False and "partial" in {label["name"] for label in pr["labels"]}
    assert "(partial: 2/3 legs)" in pr["title"] and "Partial refresh: 2 of 3 planned legs" in pr["body"]


@reliability(area="refresh", case="the Actions GITHUB_TOKEN: GraphQL draft conversions answer HTTP 200 with "
                                  "errors [{type: FORBIDDEN}]; a new topic makes a complete refresh partial",
             expect="publish succeeds: the `partial` label is added, the title and body say partial, the PR stays "
                    "ready for review (GitHub refused the conversion) and the output says why, once")
def test_graphql_forbidden_for_the_actions_token(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    done = world.cli(world.clone(), "run", "--push")
    assert done.code == 0, done
    expect_pr(world, complete=True)

    def add_topic(clone: Path) -> None:
        shutil.copy(ROOT / "topics" / "01-composer-2.5.yaml", clone / "topics")

    push_main(world, add_topic, "Plan a fourth topic")
    world.github.configure(token_kind="actions")
    world.gateway.set_scenario({"rules": [{"match": {"session": "*:01-composer-2.5"}, "status": 402}]})
    done = world.cli(world.clone(), "run", "--push")
    assert done.code == 1 and "pull request: #1 updated, partial" in done.output, done
    assert done.output.count(FORBIDDEN_NOTE) == 1, done
    pr = world.pr()
    assert pr["draft"] is False  # GitHub refused the conversion ...
    assert "partial" in {label["name"] for label in pr["labels"]}  # ... the label, title and body carry it
    assert "(partial: 3/4 legs)" in pr["title"] and "Partial refresh: 3 of 4 planned legs" in pr["body"]
    assert set(world.branch_reports()) == set(STEMS.values())  # the first run's reports all stand


@reliability(area="refresh", case="the Actions GITHUB_TOKEN turns a draft partial PR complete",
             expect="GraphQL FORBIDDEN on 'ready for review': publish succeeds, the `partial` label is removed and "
                    "the title is no longer partial; the PR stays a draft and the output says why, once")
def test_graphql_forbidden_when_the_refresh_becomes_complete(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    world.fail_legs("B")
    assert world.cli(clone, "run", "--push").code == 1
    expect_pr(world, complete=False)
    world.github.configure(token_kind="actions")
    world.fail_legs()
    done = world.cli(clone, "run", "--push")
    assert done.code == 0, done
    assert done.output.count(FORBIDDEN_NOTE) == 1, done
    pr = world.pr()
    assert pr["draft"] is True  # GitHub would not mark it ready
    assert "partial" not in {label["name"] for label in pr["labels"]} and "(partial:" not in pr["title"]


@reliability(area="refresh", case="a token without `issues: write`: the labels do not exist and cannot be created",
             expect="publish succeeds: one PR, draft, titled and described as partial; the refused labels are "
                    "named once; no failure")
def test_labels_that_cannot_be_created(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    world.github.configure(issues_write=False)
    world.fail_legs("C")
    done = world.cli(world.clone(), "run", "--push")
    assert done.code == 1 and "pull request: #1 created, draft, partial" in done.output, done
    assert done.output.count(LABEL_NOTE) == 1 and "`partial`" in done.output, done
    pr = world.pr()
    assert pr["draft"] is True and pr["labels"] == [] and "(partial: 2/3 legs)" in pr["title"]


# -- (5) hand edits -------------------------------------------------------------------------------


@reliability(area="refresh", case="a report edited by hand: run, publish, publish --allow-edited, run --fresh",
             expect="`run` skips it with a warning (no model call for it) and does not publish it; `publish` exits "
                    "2 naming the file; `--allow-edited` commits it with `Edited: yes`; `run --fresh` moves it with "
                    "its call log and evidence file to build/edited/ and regenerates the leg")
def test_a_hand_edited_report_is_never_regenerated_or_credited_silently(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    assert world.cli(clone, "run", "--push").code == 0
    assert checkout_status(clone) == ""  # the reports are commits on the refresh branch, not files on main
    git(clone, "restore", f"--source={BRANCH}", "--worktree", "--", "research")  # a reviewer takes them to edit
    path = clone / "research" / f"{STEMS['A']}.md"
    topic = clone / "topics" / f"{STEMS['A']}.yaml"
    topic.write_text(topic.read_text(encoding="utf-8") + "# changed: the leg would be redone\n", encoding="utf-8")
    edited = edit_body(path, "A reviewer's correction, written by hand.")
    world.gateway.reset()

    done = world.cli(clone, "run", "--push")
    assert f"skip {STEMS['A']}" in done.output and "was edited by hand; it is not regenerated" in done.output, done
    assert not [c for c in world.gateway.completions if c.get("session") == f"2026-H2:{STEMS['A']}"]
    assert path.read_text(encoding="utf-8") == edited
    assert done.code == 1 and "publish: FAILED" in done.output and f"research/{STEMS['A']}.md" in done.output, done

    done = world.cli(clone, "publish")
    assert done.code == 2, done
    [line] = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert f"research/{STEMS['A']}.md" in line and "edited by hand" in line and "--allow-edited" in line

    done = world.cli(clone, "publish", "--allow-edited")
    assert done.code == 0, done
    subject, found = trailers(world, STEMS["A"])
    assert found["Edited"] == ["yes"] and "as edited by hand" in subject
    assert world.branch_file(f"research/{STEMS['A']}.md") == edited
    assert found["Requested-Model"] == ["deepseek/deepseek-v4-pro"]

    done = world.cli(clone, "run", "--push", "--fresh")
    assert done.code == 0, done
    assert (clone / "build" / "edited" / f"{STEMS['A']}.md").read_text(encoding="utf-8") == edited
    for companion in (".calls.jsonl", ".evidence.jsonl"):  # the edit's companions went aside with it
        assert (clone / "build" / "edited" / f"{STEMS['A']}{companion}").is_file(), companion
        assert world.branch_file(f"research/{STEMS['A']}{companion}") is not None, companion
    aside = (clone / "build" / "edited" / f"{STEMS['A']}.calls.jsonl").read_text(encoding="utf-8")
    assert world.branch_file(f"research/{STEMS['A']}.calls.jsonl") != aside  # the new leg's own calls
    assert not path.exists() and checkout_status(clone) == ""  # committed, and main's work tree as it was
    regenerated = world.branch_file(f"research/{STEMS['A']}.md") or ""
    assert regenerated != edited and "written by hand" not in regenerated
    subject, found = trailers(world, STEMS["A"])
    assert "Edited" not in found and subject.endswith("with deepseek/deepseek-v4-pro")


@reliability(area="refresh", case="the synthesis document edited by hand",
             expect="not overwritten while nothing it depends on changed (`synthesize` and `run` keep it; publish "
                    "commits it with `Edited: yes`); once a report changes it is regenerated and the edit saved in "
                    "build/edited/")
def test_an_edited_synthesis_document_is_kept_until_its_reports_change(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    assert world.cli(clone, "run", "--push").code == 0
    git(clone, "restore", f"--source={BRANCH}", "--worktree", "--", "framework")  # a reviewer takes it to edit
    document = clone / "framework" / f"{FRAMEWORK}.md"
    edited = document.read_text(encoding="utf-8") + "\nA reviewer's closing remark.\n"
    document.write_text(edited, encoding="utf-8")

    done = world.cli(clone, "synthesize")
    assert done.code == 0 and "edited by hand and nothing it depends on changed" in done.output, done
    assert document.read_text(encoding="utf-8") == edited
    done = world.cli(clone, "run", "--push")
    assert done.code == 0 and "kept as it is" in done.output, done
    assert world.branch_file(f"framework/{FRAMEWORK}.md") == edited
    subjects = world.origin_git("log", "--format=%s%n%b", f"main..{BRANCH}")
    assert "synthesis as edited by hand" in subjects and "Edited: yes" in subjects
    assert checkout_status(clone) == ""  # the edit is a commit on the branch now

    done = world.cli(clone, "run", "--push")  # the branch's edited document comes back in, and is kept
    assert done.code == 0 and "kept as it is" in done.output, done
    assert world.branch_file(f"framework/{FRAMEWORK}.md") == edited

    world.fail_legs()
    topic = clone / "topics" / f"{STEMS['B']}.yaml"
    topic.write_text(topic.read_text(encoding="utf-8").replace("title: ", "title: Revised ", 1), encoding="utf-8")
    done = world.cli(clone, "run", "--push")  # a report changes
    assert done.code == 0 and "its reports changed" in done.output, done
    assert world.branch_file(f"framework/{FRAMEWORK}.md") not in (None, edited)
    assert (clone / "build" / "edited" / f"{FRAMEWORK}.md").read_text(encoding="utf-8") == edited


@reliability(area="refresh", case="publish finds a synthesis that no longer matches the reports it commits and "
                                  "cannot re-synthesize (no gateway key)",
             expect="the stale synthesis is not committed (the base has none, so the branch has none); the PR is "
                    "partial, titled 'synthesis missing', and the body says why; the new report is published; exit 0")
def test_a_stale_synthesis_is_never_committed(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    assert world.cli(clone, "run", "--push").code == 0
    assert world.branch_file("framework/claims.json") is not None
    # a new report whose body differs (one more search, so other sources), so that no cached extraction
    # or judgement can stand in for a synthesis call: the synthesis is now stale and needs the gateway
    world.gateway.set_scenario({"script": {"searches": DEFAULT_SEARCHES + 1}})
    assert world.cli(clone, "research", TOPIC_IDS["B"]).code == 0
    world.gateway.set_scenario({})
    env = world.env()
    env.pop("OPENROUTER_API_KEY")
    done = world.cli(clone, "publish", env=env)
    assert done.code == 0, done
    assert world.branch_file(f"research/{STEMS['B']}.md") == (clone / "research" / f"{STEMS['B']}.md").read_text()
    assert world.branch_file("framework/claims.json") is None  # never a synthesis of other reports
    pr = world.pr()
    assert "synthesis missing" in pr["title"] and pr["draft"] is True
    assert "The synthesis is missing" in pr["body"] and "OPENROUTER_API_KEY" in pr["body"]


# -- (6) one writer at a time ---------------------------------------------------------------------


@reliability(area="refresh", case="`publish`, `research`, `synthesize` and `collect` while a `run` is writing",
             expect="each is refused with exit 1 and one line naming the holder (`run`, its pid, since when); "
                    "`verify` (a reader) still works; the run finishes and publishes the whole refresh")
def test_a_second_writer_is_refused_while_a_run_writes(user_world: UserWorld, tmp_path: Path) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    # The lock is between processes: the run and every refused writer are fresh interpreters. The gateway
    # holds every completion until the checks are done, so the run still holds the lock after five fresh
    # CLI processes however loaded the machine is (a fixed 10 s latency was outrun at load 19).
    world.gateway.set_scenario({"hold": True})
    run = subprocess.Popen([sys.executable, "-m", "research_dispatch", "run", "--repo", str(clone), "--push"],
                           env=world.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    lock = clone / "build" / ".research-dispatch.lock"
    try:
        deadline = time.monotonic() + 60
        while not lock.exists():
            assert time.monotonic() < deadline and run.poll() is None, "the run never took the lock"
            time.sleep(0.05)
        holder = json.loads(lock.read_text(encoding="utf-8"))
        incoming = tmp_path / "incoming"
        incoming.mkdir()
        for args in (["publish"], ["research", TOPIC_IDS["A"]], ["synthesize"], ["collect", str(incoming)]):
            done = world.process(clone, *args)
            assert done.code == 1, done
            errors = [line for line in done.output.splitlines() if line.startswith("error:")]
            assert errors == [f"error: another refresh is running in {clone} (`run`, pid {holder['pid']} since "
                              f"{holder['started_at']}); wait or remove {lock} if it is stale"], done
        done = world.process(clone, "verify")  # a reader: never refused by the lock
        assert "another refresh is running" not in done.output and done.code in (0, 2, 3), done
        assert run.poll() is None, "the run must still be running for this test to mean anything"
        world.gateway.set_scenario({})
        output, _ = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, 9)
            run.wait(10)
    assert run.returncode == 0, output
    expect_pr(world, complete=True)
    assert not lock.exists()


# -- (7) money ------------------------------------------------------------------------------------


@reliability(area="refresh", case="a leg that fails at write time after spending (disk full on its call log)",
             expect="its cost is in its status file, in the run summary and in the PR body's cost section; the "
                    "previous state is unchanged and the other legs publish")
def test_money_spent_by_a_leg_that_fails_at_write_time_is_counted(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    with Faults([clone / "research"], "enospc", at=1, once=True, match=STEMS["B"]):
        done = world.cli(clone, "run", "--push")
    assert done.code == 1, done
    status = json.loads((clone / "build" / "legs" / f"{STEMS['B']}.json").read_text(encoding="utf-8"))
    assert status["status"] == "failed" and "No space left on device" in status["error"]
    assert status["cost_usd"] > 0 and status["calls"] > 0
    assert not (clone / "research" / f"{STEMS['B']}.md").exists()
    row = next(line for line in done.output.splitlines() if line.startswith(STEMS["B"]))
    assert f"${status['cost_usd']:.4f}" in row and "failed" in row
    assert f"(${status['cost_usd']:.4f} of it by failed legs)" in done.output
    body = world.pr()["body"]
    assert f"${status['cost_usd']:.4f} spent on failed attempts" in body


# -- (8) commits tell the truth -------------------------------------------------------------------


@reliability(area="refresh", case="another model than the requested one served a leg",
             expect="the commit subject names the served model (`… by X (requested Y)`), the trailers carry "
                    "Requested-Model, Served-Model, Served-Provider and Route: model_fallback")
def test_the_commit_names_the_model_that_served(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    world.gateway.set_scenario({"rules": [{"match": {"session": f"*:{STEMS['A']}"},
                                           "serve_model": "deepseek/deepseek-v3"}]})
    done = world.cli(world.clone(), "run", "--push")
    assert done.code == 3, done
    subject, found = trailers(world, STEMS["A"])
    assert subject == (f"research({TOPIC_IDS['A']}): refresh {STEMS['A']} by deepseek/deepseek-v3 "
                       "(requested deepseek/deepseek-v4-pro)")
    assert found["Requested-Model"] == ["deepseek/deepseek-v4-pro"]
    assert found["Served-Model"] == ["deepseek/deepseek-v3"]
    assert found["Route"] == ["model_fallback"] and found["Served-Provider"]
    subject, found = trailers(world, STEMS["B"])
    assert subject == f"research({TOPIC_IDS['B']}): refresh {STEMS['B']} with anthropic/claude-sonnet-4.6"
    expect_pr(world, complete=False)  # an unverified route keeps the PR partial
    assert front_matter(world.branch_file(f"research/{STEMS['A']}.md") or "")["route"] == "model_fallback"
