"""Where a leg stands, as the synthesis says it, is the one rule of `leg/state` (issue 16): the ledger's leg
states, the limitations and the dispatch table agree with what resume, the run summary and the PR use."""

from __future__ import annotations

import shutil
from pathlib import Path

from research_dispatch.config.plan import Leg, plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.leg.standing import assess_worktree
from research_dispatch.leg.status import LegResult, LegState
from tests.conftest import ROOT
from tests.synthesis.conftest import CYCLE, write_report

DILOCO = ("02-diloco-family", "deepseek/deepseek-v4-pro",
          ["DiLoCo trains with infrequent synchronisation across islands of compute"])
VERL = ("04-verl-trl", "anthropic/claude-sonnet-4.6",
        ["VeRL runs GRPO on Ray with a hybrid controller for rollouts and training"])


def legs(repo: Path) -> dict[str, Leg]:
    settings = load_settings(repo)
    return {leg.stem: leg for leg in plan_legs(load_topics(repo, settings), settings)}


def write_status(repo: Path, leg: Leg, *, cycle: str, started_at: str, error: str = "HTTP 402 from the gateway"
                 ) -> None:
    """The status file of a failed attempt, as `run_leg` writes it (`LegResult.to_json`)."""
    result = LegResult(stem=leg.stem, topic=leg.topic.id, model=leg.route.model, family=leg.family,
                       status=LegState.FAILED, error=error, cycle=cycle, started_at=started_at,
                       finished_at=started_at, calls=2, cost_usd=0.01)
    path = repo / "build" / "legs" / f"{leg.stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.to_json(), encoding="utf-8")


def test_the_ledger_states_are_the_legstate_ones_and_the_limitations_say_them(repo: Path, run_synthesis) -> None:
    (repo / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "METHODOLOGY.md", repo / "docs" / "METHODOLOGY.md")
    planned = legs(repo)
    for stem, model, sentences in (DILOCO, VERL):
        write_report(repo, stem, model, sentences)
    # 02: a failed attempt of an earlier cycle says nothing about this one
    write_status(repo, planned["02-diloco-family"], cycle="2026-H1", started_at="2026-01-02T00:00:00Z")
    # 04: this cycle's attempt after its good report failed; the report still stands
    write_status(repo, planned["04-verl-trl"], cycle=CYCLE, started_at="2026-07-02T00:00:00Z")
    # 05: this cycle's only attempt failed, no report
    write_status(repo, planned["05-trace-replay-distillation"], cycle=CYCLE, started_at="2026-07-02T00:00:00Z",
                 error="no report was produced: step cap reached")
    # 01: a damaged status file is only a record: no crash, the leg is missing
    (repo / "build" / "legs" / "01-composer-2.5.json").write_text("{not json", encoding="utf-8")

    data = run_synthesis(repo).ledger
    states = {leg["stem"]: leg["state"] for leg in data["legs"]}
    settings = load_settings(repo)
    assert states == {stem: assess_worktree(repo, settings, leg, cycle=CYCLE).state.value
                      for stem, leg in planned.items()}
    assert states == {"01-composer-2.5": "missing", "02-diloco-family": "ok",
                      "03-monarch-torchforge-openenv": "missing", "04-verl-trl": "ok",
                      "05-trace-replay-distillation": "failed"}
    limitations = "\n".join(data["limitations"])
    assert "02-diloco-family (deepseek/deepseek-v4-pro):" not in limitations  # another cycle's failure
    assert ("Leg 04-verl-trl (anthropic/claude-sonnet-4.6): latest run failed: HTTP 402 from the gateway; the "
            f"previous report (cycle {CYCLE}) is used.") in data["limitations"]
    assert ("Leg 05-trace-replay-distillation (moonshotai/kimi-k2-thinking): latest run failed: no report was "
            "produced: step cap reached.") in data["limitations"]
    assert sum("has no report" in item for item in data["limitations"]) == 2
    table = (repo / "docs" / "METHODOLOGY.md").read_text(encoding="utf-8")
    assert "| research/05-trace-replay-distillation.md | moonshotai/kimi-k2-thinking | — | failed (no report) |" \
        in table
    assert "| research/01-composer-2.5.md | google/gemini-3.1-pro-preview | — | not yet run |" in table


def test_a_report_of_an_earlier_cycle_is_stale_and_used_and_said(repo: Path, run_synthesis) -> None:
    stem, model, sentences = DILOCO
    write_report(repo, stem, model, sentences, cycle="2026-H1")
    data = run_synthesis(repo).ledger
    assert {leg["stem"]: leg["state"] for leg in data["legs"]}[stem] == "stale"
    assert [r["stem"] for r in data["reports"]] == [stem]  # the synthesis still reads it...
    assert f"Report {stem} is from cycle 2026-H1, not {CYCLE}." in data["limitations"]  # ...and says so, once
    assert not [item for item in data["limitations"] if item.startswith(f"Leg {stem} ")]
