"""`run`: legs in parallel, failures contained, the run budget, and a plain display without model text."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from research_dispatch_fakes.gateway import FakeGateway
from tests.conftest import fast_retries
from tests.run.conftest import Output, refresh, sessions

ALL = ["01-composer-2.5", "02-diloco-family", "03-monarch-torchforge-openenv", "04-verl-trl",
       "05-trace-replay-distillation"]


class BarrierGateway(FakeGateway):
    """Holds each chat call until `parties` are in flight at once (or 10 s pass), recording the peak.

    A serial runner can never reach the barrier, so the peak proves overlap without timing anything.
    """

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.parties = parties
        self.in_flight = 0
        self.peak = 0
        self.released = False
        self._cv = threading.Condition()

    def handle(self, request: Any) -> Any:
        if not request.path.endswith("/chat/completions"):
            return super().handle(request)
        with self._cv:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.in_flight >= self.parties:
                self.released = True
            self._cv.notify_all()
            self._cv.wait_for(lambda: self.released, timeout=10)
        try:
            return super().handle(request)
        finally:
            with self._cv:
                self.in_flight -= 1


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [3, 5])
def test_legs_run_in_parallel_up_to_jobs(repo: Path, tavily: Any, out: Output, jobs: int) -> None:
    with BarrierGateway(parties=jobs) as gateway:
        env = {"OPENROUTER_API_KEY": "sk-or-test-key-123", "TAVILY_API_KEY": "tvly-test-key-123",
               "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_BASE_URL": tavily.base_url}
        outcome = refresh(repo, env, out.append, jobs=jobs)
    assert gateway.peak == jobs, f"peak concurrency {gateway.peak}, expected {jobs}"
    assert outcome.exit_code == 0, out.text
    assert outcome.stems("ok") == ALL
    assert f"jobs {jobs}" in out.text


def test_a_failing_leg_does_not_stop_the_others(repo: Path, run_env: dict, gateway: Any, out: Output) -> None:
    gateway.set_scenario({"rules": [{"match": {"session": "*04-verl-trl"}, "status": 402}]})
    outcome = refresh(repo, run_env, out.append, jobs=2)
    assert outcome.exit_code == 1
    assert outcome.stems("failed") == ["04-verl-trl"]
    assert outcome.stems("ok") == [s for s in ALL if s != "04-verl-trl"]
    assert "failed legs: 04-verl-trl" in out.text
    summary_row = next(line for line in out.text.splitlines() if line.startswith("04-verl-trl ") and "failed" in line)
    assert "402" in summary_row
    assert not (repo / "research" / "04-verl-trl.md").exists()
    assert "no report: 04-verl-trl" in out.text


@pytest.mark.slow
def test_a_crashing_leg_is_only_that_legs_failure(repo: Path, run_env: dict, out: Output,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import research_dispatch.run.pool as pool  # where the leg pool calls run_leg

    real = pool.run_leg

    def flaky(repo: Path, settings: Any, leg: Any, **kwargs: Any) -> Any:
        if leg.stem == "03-monarch-torchforge-openenv":
            raise OSError("disk on fire")
        return real(repo, settings, leg, **kwargs)

    monkeypatch.setattr(pool, "run_leg", flaky)
    outcome = refresh(repo, run_env, out.append)
    assert outcome.stems("failed") == ["03-monarch-torchforge-openenv"] and len(outcome.stems("ok")) == 4
    status = json.loads((repo / "build" / "legs" / "03-monarch-torchforge-openenv.json").read_text())
    assert status["status"] == "failed" and "disk on fire" in status["error"]


def test_run_budget_stops_new_legs_but_lets_running_ones_finish(repo: Path, run_env: dict, gateway: Any,
                                                                out: Output) -> None:
    fast_retries(repo, "run_budget_usd = 0.01\n")
    gateway.set_scenario({"pricing": {"*": {"prompt": 2.0, "completion": 8.0}}})  # ~$0.05 a leg
    outcome = refresh(repo, run_env, out.append, jobs=2)
    started = sorted(sessions(gateway))
    assert started == ALL[:2], "only the first two legs (one per worker) may start"
    assert outcome.stems("ok") == ALL[:2]
    assert outcome.stems("not started") == ALL[2:]
    assert all("run budget reached" in o.note for o in outcome.legs if o.label == "not started")
    assert outcome.exit_code == 1
    assert "not started: 03-monarch-torchforge-openenv, 04-verl-trl, 05-trace-replay-distillation" in out.text


@pytest.mark.slow
def test_plain_output_shows_counts_and_statuses_but_no_model_text(repo: Path, run_env: dict, gateway: Any,
                                                                  out: Output) -> None:
    from research_dispatch.leg.report import load_report

    outcome = refresh(repo, run_env, out.append)
    assert outcome.exit_code == 0
    text = out.text
    assert "[02-diloco-family] step 1/40:" in text and "tokens" in text and "$" in text
    fragments: set[str] = set()
    for path in sorted((repo / "research").glob("*.md")):
        body = load_report(path, repo=repo).body
        fragments |= {line.strip() for line in body.splitlines() if len(line.strip()) > 40}
    for path in sorted((repo / "build" / "traces").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "tool":
                fragments.add(json.loads(event["arguments"]).get("query") or "")
    fragments.discard("")
    assert fragments
    leaked = [f for f in fragments if f in text]
    assert not leaked, leaked[:3]
    assert run_env["OPENROUTER_API_KEY"] not in text and run_env["TAVILY_API_KEY"] not in text


def test_missing_key_is_bad_input_before_any_request(repo: Path, run_env: dict, gateway: Any, tavily: Any,
                                                     out: Output) -> None:
    from research_dispatch.core.errors import MissingKey

    env = {k: v for k, v in run_env.items() if k != "TAVILY_API_KEY"}
    with pytest.raises(MissingKey):
        refresh(repo, env, out.append)
    assert gateway.requests == [] and tavily.requests == []
    assert not (repo / "build").exists()


def test_unknown_topic_is_bad_input(repo: Path, run_env: dict, out: Output) -> None:
    from research_dispatch.core.errors import BadInput

    with pytest.raises(BadInput, match="unknown topic"):
        refresh(repo, run_env, out.append, topics=["nope"])
