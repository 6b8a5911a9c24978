"""The issue's first story in GitHub Actions: research-refresh.yml run twice, the second time for one topic.

Runs the workflow's own steps (tests/workflows/runner_harness.py: every `run:` step with bash in a fresh
checkout per job, artifacts between jobs, the fake GitHub in front of a bare origin). The second dispatch
re-runs only the topic that failed: its synthesize and publish jobs start from fresh checkouts that hold
none of the first run's reports, so only the refresh branch remembers them.
"""

from __future__ import annotations

import json

import pytest

from tests.workflows.conftest import CYCLE, world_factory  # noqa: F401  (the fixture)

reliability = pytest.mark.reliability
BRANCH = f"research-refresh/{CYCLE}"
STEMS = ["01-composer-2.5", "02-diloco-family", "03-monarch-torchforge-openenv", "04-verl-trl",
         "05-trace-replay-distillation"]


def branch_reports(world) -> dict[str, str]:
    names = world.origin_git("ls-tree", "--name-only", f"{BRANCH}:research").split()
    return {n[:-3]: world.origin_git("show", f"{BRANCH}:research/{n}") for n in names if n.endswith(".md")}


@reliability(area="refresh", case="research-refresh.yml with one leg failing, then dispatched again with "
                                  "topics=<that leg> (fresh checkouts in every job)",
             expect="the second run keeps the first run's four reports on the branch and adds the fifth; its "
                    "synthesis lists exactly the five; one PR, draft + partial after the first run, ready after the "
                    "second")
def test_a_ci_rerun_of_one_topic_keeps_every_other_report(world_factory) -> None:  # noqa: F811
    world = world_factory(gateway_scenario={"rules": [{"match": {"session": "*:04-verl-trl"}, "status": 402}]})
    first = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE})
    assert first.job("publish").result == "success"
    after_first = branch_reports(world)
    assert sorted(after_first) == [s for s in STEMS if s != "04-verl-trl"]
    (pr,) = world.github.pulls
    assert pr["draft"] is True and "partial" in {label["name"] for label in pr["labels"]}

    world.gateway.set_scenario({})
    world.machine.work = world.root / "runner-second-run"  # a new run: new job workspaces and artifacts
    world.machine.run_id = "4243"
    second = world.run("research-refresh.yml", "workflow_dispatch", {"cycle": CYCLE, "topics": "verl-trl"})
    assert {job: r.result for job, r in second.jobs.items()} == {
        "plan": "success", "research": "success", "synthesize": "success", "publish": "success"}
    after_second = branch_reports(world)
    assert sorted(after_second) == STEMS
    assert {s: after_second[s] for s in after_first} == after_first, "a report of the first run was lost"
    ledger = json.loads(world.origin_git("show", f"{BRANCH}:framework/claims.json"))
    assert sorted(r["path"] for r in ledger["reports"]) == [f"research/{s}.md" for s in STEMS]
    (pr,) = world.github.pulls
    assert pr["draft"] is False and "partial" not in {label["name"] for label in pr["labels"]}
    assert pr["title"].startswith(f"docs(research): refresh {CYCLE} — 5 reports, synthesis")
