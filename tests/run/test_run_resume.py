"""`run` resumes: only failed or changed legs are redone; `--fresh` redoes all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_topic
from tests.run.conftest import Output, refresh, sessions

ALL = ["01-composer-2.5", "02-diloco-family", "03-monarch-torchforge-openenv", "04-verl-trl",
       "05-trace-replay-distillation"]


@pytest.mark.slow
def test_second_run_keeps_good_legs_and_redoes_failed_and_changed_ones(repo: Path, run_env: dict, gateway: Any,
                                                                        out: Output) -> None:
    gateway.set_scenario({"rules": [{"match": {"session": "*04-verl-trl"}, "status": 402}]})
    first = refresh(repo, run_env, out.append)
    assert first.stems("failed") == ["04-verl-trl"]

    gateway.reset()
    out.clear()
    second = refresh(repo, run_env, out.append)
    assert second.ran == ["04-verl-trl"] and sessions(gateway) == {"04-verl-trl"}
    assert second.stems("kept") == [s for s in ALL if s != "04-verl-trl"]
    assert second.exit_code == 0
    assert "keep 02-diloco-family (deepseek/deepseek-v4-pro): good report for 2026-H2, inputs unchanged" in out.text
    assert "run  04-verl-trl (anthropic/claude-sonnet-4.6): no report yet" in out.text

    gateway.reset()
    out.clear()
    third = refresh(repo, run_env, out.append)
    assert third.ran == [] and gateway.completions == []
    assert third.exit_code == 0 and "0 to run, 5 kept" in out.text

    path = repo / "topics" / "02-diloco-family.yaml"
    write_topic(repo, path.name, path.read_text() + "# a reviewer's note: a comment changes nothing it says\n")
    out.clear()
    assert refresh(repo, run_env, out.append).ran == [] and gateway.completions == []  # inputs hashed as meaning
    write_topic(repo, path.name, path.read_text().replace("title: DiLoCo family", "title: DiLoCo family, revised"))
    out.clear()
    fourth = refresh(repo, run_env, out.append)
    assert fourth.ran == ["02-diloco-family"] and sessions(gateway) == {"02-diloco-family"}
    assert "inputs changed" in out.text

    gateway.reset()
    fresh = refresh(repo, run_env, out.append, fresh=True)
    assert fresh.ran == ALL and sessions(gateway) == set(ALL)


def test_a_failed_rerun_keeps_the_old_report_and_is_redone_next_time(repo: Path, run_env: dict, gateway: Any,
                                                                     out: Output) -> None:
    refresh(repo, run_env, out.append, topics=["diloco-family"])
    report = repo / "research" / "02-diloco-family.md"
    before = report.read_text()
    gateway.set_scenario({"rules": [{"status": 402}]})
    failed = refresh(repo, run_env, out.append, topics=["diloco-family"], fresh=True)
    assert failed.stems("failed") == ["02-diloco-family"]
    assert report.read_text() == before
    gateway.set_scenario({})
    out.clear()
    again = refresh(repo, run_env, out.append, topics=["diloco-family"])
    assert again.ran == ["02-diloco-family"] and "last attempt failed" in out.text


def test_degraded_unverified_and_other_cycle_reports_are_redone(repo: Path, run_env: dict, gateway: Any,
                                                                out: Output) -> None:
    from research_dispatch.config.plan import plan_legs
    from research_dispatch.config.settings import load_settings
    from research_dispatch.config.topics import load_topics
    from research_dispatch.leg.resume import decide

    gateway.set_scenario({"rules": [{"match": {"session": "*02-diloco-family"}, "serve_model": "deepseek/other"}]})
    verl = repo / "topics" / "04-verl-trl.yaml"  # a step budget too small to research: a degraded report
    verl.write_text(verl.read_text(encoding="utf-8") + "budget: {max_steps: 2}\n", encoding="utf-8")
    first = refresh(repo, run_env, out.append, topics=["diloco-family", "verl-trl", "composer-2.5"])
    assert first.exit_code == 3 and first.stems("degraded") == ["04-verl-trl"]
    settings = load_settings(repo)
    legs = {leg.stem: leg for leg in plan_legs(load_topics(repo, settings), settings)}
    routed = decide(repo, settings, legs["02-diloco-family"], cycle="2026-H2", fresh=False)
    assert routed.run and routed.reason == "route not verified (model_fallback)"
    short = decide(repo, settings, legs["04-verl-trl"], cycle="2026-H2", fresh=False)
    assert short.run and short.reason == "last report is degraded"
    other_cycle = decide(repo, settings, legs["01-composer-2.5"], cycle="2027-H1", fresh=False)
    assert other_cycle.run and other_cycle.reason == "report is from cycle 2026-H2"
    kept = decide(repo, settings, legs["01-composer-2.5"], cycle="2026-H2", fresh=False)
    assert not kept.run


def test_route_not_verified_exits_3_when_every_leg_has_a_report(repo: Path, run_env: dict, gateway: Any,
                                                                out: Output) -> None:
    gateway.set_scenario({"rules": [{"match": {"session": "*02-diloco-family"}, "on_call": 2,
                                     "serve_model": "deepseek/deepseek-v3"}]})
    outcome = refresh(repo, run_env, out.append, topics=["diloco-family", "verl-trl"])
    assert outcome.exit_code == 3, out.text
    assert "model_fallback ⚠" in out.text


def test_status_file_of_a_failed_leg_names_the_cycle(repo: Path, run_env: dict, gateway: Any, out: Output) -> None:
    gateway.set_scenario({"rules": [{"status": 402}]})
    refresh(repo, run_env, out.append, topics=["verl-trl"])
    status = json.loads((repo / "build" / "legs" / "04-verl-trl.json").read_text())
    assert status["cycle"] == "2026-H2" and status["status"] == "failed"
