"""A refresh never loses work: the branch accumulates across runs, clones and partial publishes.

Every command runs as a user runs it (a separate `research-dispatch` process, real git, a bare origin,
the fake GitHub); see `userworld.py`. After every step the branch must hold, for every planned leg, the
newest good report of this cycle that any run produced — with its call log, under one PR that is a
draft, labelled `partial` and titled as partial exactly while some planned leg lacks one.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.reliability.userworld import (  # noqa: F401  (the fixture)
    BRANCH,
    STEMS,
    TOPIC_IDS,
    UserWorld,
    checkout_status,
    expect_branch,
    expect_pr,
    front_matter,
    git,
    push_main,
    report,
    user_world,
)

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability


@reliability(area="refresh", case="run with leg B failing; fresh clone, run --fresh with leg A failing; fresh "
                                  "clone, `research B` + `publish --topics B`",
             expect="after each step the branch holds the newest good report of every leg from any run (A from "
                    "the first run, B from the third, C from the second), each with its call log and trailers; "
                    "one PR, draft + `partial` while B is missing, ready once every leg is good; the synthesis "
                    "on the branch lists exactly the branch's reports")
def test_three_runs_from_three_clones_accumulate_on_one_branch(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    first = world.clone()
    world.fail_legs("B")
    done = world.cli(first, "run", "--push")
    assert done.code == 1, done
    expected = {"A": report(first, "A"), "C": report(first, "C")}
    expect_branch(world, expected)
    assert checkout_status(first) == "", "the run left results on main's work tree"
    pr = expect_pr(world, complete=False)
    assert f"`{STEMS['B']}`" in pr["body"] and "Partial refresh: 2 of 3 planned legs" in pr["body"]

    second = world.clone()  # a fresh checkout: main only, nothing of the first run
    world.fail_legs("A")
    done = world.cli(second, "run", "--push", "--fresh")
    assert done.code == 1, done
    assert f"continuing {BRANCH}: took 2 report(s)" in done.output  # the overlay brought the branch's reports in
    expected |= {"B": report(second, "B"), "C": report(second, "C")}
    assert report(second, "A") == expected["A"], "the failed leg keeps the first run's report"
    expect_branch(world, expected)
    assert checkout_status(second) == ""
    pr = expect_pr(world, complete=True)
    assert "last attempt failed" in pr["body"]  # said out loud, although A's report from run 1 stands

    third = world.clone()
    world.fail_legs()
    done = world.cli(third, "research", TOPIC_IDS["B"])
    assert done.code == 0, done
    expected["B"] = report(third, "B")
    done = world.cli(third, "publish", "--topics", TOPIC_IDS["B"])  # the README's own example
    assert done.code == 0, done
    expect_branch(world, expected)
    pr = expect_pr(world, complete=True)
    assert len(world.pulls()) == 1
    trailers = world.origin_git("log", "--format=%(trailers:key=Research-Leg,valueonly)", f"main..{BRANCH}")
    assert sorted(t for t in trailers.split() if t) == sorted(STEMS.values())  # one commit per report


@reliability(area="refresh", case="random sequences of runs: random legs failing, random --topics, --fresh or "
                                  "not, fresh clones or not, `run` or `research` + `publish --topics` (seeded)",
             expect="after every step: the branch holds exactly the newest good report per planned leg with its "
                    "call log, the synthesis lists exactly those, one PR, draft + partial label + partial title iff "
                    "some leg has no good report")
@pytest.mark.parametrize("seed", [7, 2026])
def test_random_sequences_of_runs_keep_the_newest_good_report_per_leg(user_world: UserWorld, seed: int) -> None:  # noqa: F811
    world = user_world
    rng = random.Random(seed)
    names = sorted(STEMS)
    expected: dict[str, str] = {}
    clones: list[Path] = []
    for step in range(4):
        clone = world.clone() if not clones or rng.random() < 0.5 else rng.choice(clones)
        if clone not in clones:
            clones.append(clone)
        failing = [n for n in names if rng.random() < 0.35]
        world.fail_legs(*failing)
        chosen = sorted(rng.sample(names, rng.randint(1, len(names)))) if rng.random() < 0.4 else names
        before = {n: _status(clone, n) for n in names}
        if rng.random() < 0.7:
            args = ["run", "--push"] + (["--fresh"] if rng.random() < 0.4 else [])
            if chosen != names:
                args += ["--topics", ",".join(TOPIC_IDS[n] for n in chosen)]
            done = world.cli(clone, *args)
        else:  # what a CI re-run of some topics does: research the legs, then publish those topics
            for name in chosen:
                world.cli(clone, "research", TOPIC_IDS[name])
            done = world.cli(clone, "publish", "--topics", ",".join(TOPIC_IDS[n] for n in chosen))
        context = f"seed {seed} step {step}: failing {failing}, topics {chosen}\n{done}"
        for name in names:
            after = _status(clone, name)
            if after != before[name] and after is not None and '"status": "ok"' in after:
                expected[name] = report(clone, name)  # this step produced a new good report of the leg
        assert done.code in (0, 1), context
        expect_branch(world, expected)
        if done.args[0] == "run":
            assert checkout_status(clone) == "", context  # the results are commits, not files on main
        if world.pulls():
            expect_pr(world, complete=len(expected) == len(names))
        else:
            assert not expected, context


def _status(clone: Path, name: str) -> str | None:
    path = clone / "build" / "legs" / f"{STEMS[name]}.json"
    return path.read_text(encoding="utf-8") if path.exists() else None


@reliability(area="refresh", case="a topic renamed on main after a refresh (its old report is on the branch and "
                                  "on main)",
             expect="the next refresh removes the old report, its call log and its evidence file from the branch in "
                    "one commit, lists it in the PR body under 'Removed', the synthesis neither counts nor cites it, "
                    "and the renamed topic's new report is committed")
def test_a_renamed_topic_loses_its_old_report_from_the_branch_and_the_synthesis(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    first = world.clone()
    assert world.cli(first, "run", "--push").code == 0
    old_stem = STEMS["C"]
    # the first refresh is merged: main now carries C's report under its old name
    git(world.origin, "update-ref", "refs/heads/main", world.origin_git("rev-parse", BRANCH).strip())
    world.origin_git("update-ref", "-d", f"refs/heads/{BRANCH}")
    world.github.reset()

    def rename(clone: Path) -> None:
        old = clone / "topics" / f"{old_stem}.yaml"
        text = old.read_text(encoding="utf-8").replace("id: trace-replay-distillation", "id: replay-distillation")
        (clone / "topics" / "05-replay-distillation.yaml").write_text(text, encoding="utf-8")
        old.unlink()

    push_main(world, rename, "Rename a topic")
    second = world.clone()
    assert (second / "research" / f"{old_stem}.md").exists()
    done = world.cli(second, "run", "--push")
    assert done.code == 0, done
    reports = world.branch_reports()
    assert old_stem not in reports and "05-replay-distillation" in reports
    assert world.branch_file(f"research/{old_stem}.calls.jsonl") is None
    assert world.branch_file(f"research/{old_stem}.evidence.jsonl") is None
    subjects = world.origin_git("log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert any(s.startswith("research: remove 3 file(s) of legs no longer planned") for s in subjects), subjects
    pr = world.pr()
    assert "Removed: reports of legs no longer planned" in pr["body"] and f"research/{old_stem}.md" in pr["body"]
    document = world.branch_file("framework/composer-replication-framework.md") or ""
    ledger = world.branch_file("framework/claims.json") or ""
    assert old_stem not in ledger and old_stem not in document, "the synthesis still counts the unplanned report"
    for suffix in (".md", ".calls.jsonl", ".evidence.jsonl"):  # moved aside together, not lost
        assert (second / "build" / "unplanned" / f"{old_stem}{suffix}").exists(), suffix
    # main still carries the old report until the PR is merged: the run leaves main's work tree as it was
    assert (second / "research" / f"{old_stem}.md").exists() and checkout_status(second) == ""
    assert front_matter(reports["05-replay-distillation"])["topic"] == "replay-distillation"
