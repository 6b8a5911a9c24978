"""Two clones publish one new cycle at the same moment: the loser re-fetches, re-accumulates and pushes once more.

The race is made to happen, not hoped for: the bare origin's `pre-receive` hook holds every push that
creates the refresh branch until both have arrived (a barrier of two files), then lets both go. Each push
passed its lease (the branch did not exist when it was advertised), so git's own ref transaction decides:
one creates the branch, the other gets `[remote rejected] … (cannot lock ref …: reference already
exists)`. Pushes that update the branch (the loser's second try) pass the hook at once. Everything runs
as users run it (`userworld.py`): the CLI, real git, the fake GitHub; the two racing publishes are two
fresh `research-dispatch` processes, as on two CI runners.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.userworld import (  # noqa: F401  (the fixture)
    BRANCH,
    TOPIC_IDS,
    UserWorld,
    expect_branch,
    expect_pr,
    report,
    user_world,
)

reliability = pytest.mark.reliability
BARRIER_WAIT_S = 600  # a generous bound, only reached if the other push never comes (a failed test)

HOOK = """#!/bin/sh
# Hold a push that creates {branch} until a second one arrives, then release both.
creating=""
while read old new ref; do
  if [ "$ref" = "refs/heads/{branch}" ] && [ "$old" = "0000000000000000000000000000000000000000" ]; then
    creating=1
  fi
done
[ -z "$creating" ] && exit 0
mkdir -p "{barrier}"
: > "{barrier}/arrived.$$"
i=0
while [ "$(ls "{barrier}" | wc -l)" -lt 2 ] && [ "$i" -lt {ticks} ]; do
  sleep 0.1
  i=$((i + 1))
done
exit 0
"""


def install_barrier(world: UserWorld) -> Path:
    barrier = world.root / "barrier"
    hook = world.origin / "hooks" / "pre-receive"
    hook.write_text(HOOK.format(branch=BRANCH, barrier=barrier, ticks=BARRIER_WAIT_S * 10), encoding="utf-8")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return barrier


@pytest.mark.slow
@reliability(area="publish", case="two clones publish one new cycle at the same moment (the origin holds both "
                                  "pushes until both arrived, so git's ref lock decides)",
             expect="the loser's push is refused ('cannot lock ref … reference already exists'), it re-fetches, "
                    "re-applies the accumulation rule and pushes once more: both exit 0, the branch holds all three "
                    "reports with their call logs (one commit each), one PR on the branch's tip")
def test_two_clones_racing_to_create_the_branch_both_land(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    first, second = world.clone(), world.clone()
    for clone, names in ((first, ("A", "B")), (second, ("C",))):
        for name in names:
            done = world.cli(clone, "research", TOPIC_IDS[name])
            assert done.code == 0, done
    expected = {name: report(first if name != "C" else second, name) for name in ("A", "B", "C")}
    barrier = install_barrier(world)

    def start(clone: Path, names: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "research_dispatch", "publish", "--repo", str(clone),
                                 "--topics", names], env=world.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    racers = [start(first, f"{TOPIC_IDS['A']},{TOPIC_IDS['B']}"), start(second, TOPIC_IDS["C"])]
    outputs = [proc.communicate(timeout=BARRIER_WAIT_S + 300)[0] for proc in racers]
    codes = [proc.returncode for proc in racers]
    assert sorted(os.listdir(barrier)) and len(os.listdir(barrier)) == 2, "both pushes reached the origin"
    assert codes == [0, 0], "\n\n".join(outputs)
    lost = [out for out in outputs if "moved on" in out and "fetching and checking again" in out]
    assert len(lost) == 1, "\n\n".join(outputs)  # exactly one lost the race and tried once more
    expect_branch(world, expected)
    pr = expect_pr(world, complete=True)
    assert pr["head"]["sha"] == world.origin_git("rev-parse", BRANCH).strip()
    assert len(world.origin_git("log", "--format=%H", f"main..{BRANCH}").split()) == 3  # one commit per report


AFTER_HOOK = """#!/bin/sh
# After the first push of {branch}: another publish pushes on top of it before the pusher returns.
[ -e "{mark}" ] && exit 0
: > "{mark}"
unset $(git rev-parse --local-env-vars)
cd "{other}" || exit 1
git fetch -q origin "{branch}" && git checkout -q -B other FETCH_HEAD &&
  git -c user.name=bot -c user.email=bot@example.invalid commit -q --allow-empty -m "another publish" &&
  git push -q origin "HEAD:refs/heads/{branch}"
"""


@reliability(area="publish", case="another publish of the cycle pushes on top of this one's push before it updates "
                                  "the PR (the race's loser pushing again)",
             expect="this publish exits 0 and leaves the PR to the newer tip's publish instead of titling it for "
                    "fewer reports than the branch holds; its own commits stay under the newer one")
def test_a_publish_overtaken_after_its_push_leaves_the_pr_to_the_newer_tip(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone, other = world.clone(), world.clone()
    assert world.cli(clone, "research", TOPIC_IDS["A"]).code == 0
    hook = world.origin / "hooks" / "post-receive"
    hook.write_text(AFTER_HOOK.format(branch=BRANCH, mark=world.root / "overtaken", other=other), encoding="utf-8")
    hook.chmod(0o755)
    done = world.cli(clone, "publish", "--topics", TOPIC_IDS["A"])
    assert done.code == 0, done
    assert "leaves the PR to it" in done.output, done
    assert world.pulls() == []  # the newer tip's publish opens it
    log = world.origin_git("log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert log[0] == "another publish" and len(log) == 2, log
