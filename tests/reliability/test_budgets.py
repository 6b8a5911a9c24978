"""Budgets: a leg stops at its step, time and dollar caps, and says so.

Each cap has two behaviours: approaching it, the loop closes the tools and asks for the report from
the evidence gathered (degraded, reason in the front matter); reaching it, no further call starts
(failed when there is no draft, with the cap named). Time runs on an injected clock, so nothing here
depends on the speed of the machine.
"""

from __future__ import annotations

import pytest

from tests.reliability.conftest import (
    CONTROL,
    TARGET,
    TickClock,
    assert_clean,
    calls_of,
    configure,
    on_target,
    run_legs,
    seed_previous,
    set_topic_budget,
    view,
)

reliability = pytest.mark.reliability
SLOW_SCRIPT = {"searches": 4, "per_turn": 1}  # the scripted model would search four times before writing


def forced_to_write(gateway, cap: str) -> None:
    """The last request closed the tools and told the model why."""
    last = calls_of(gateway, TARGET)[-1]["request"]
    assert last["tool_choice"] == "none"
    assert last["messages"][-1]["content"].startswith(f"Stop researching: the {cap} is reached.")


@reliability(area="budget", case="step budget nearly spent",
             expect="tools closed, report written from the evidence so far: exactly max_steps=2 calls; degraded "
                    "with 'step budget (budget.max_steps) reached while researching' in the front matter; other leg ok")
def test_step_budget_forces_the_report(repo, fake_env, gateway) -> None:
    configure(repo)
    set_topic_budget(repo, TARGET, "{max_steps: 2}")
    run_legs(repo, fake_env)
    assert [c["kind"] for c in calls_of(gateway, TARGET)] == ["search", "write"]
    forced_to_write(gateway, "step budget")
    target = view(repo, TARGET)
    assert target.meta["status"] == "degraded" and target.meta["calls"] == 2
    assert target.meta["status_reasons"] == ["step budget (budget.max_steps) reached while researching; report "
                                             "written from the evidence gathered so far"]
    assert_clean(repo, CONTROL)


@reliability(area="budget", case="step cap with a runaway tool loop",
             expect="a model that ignores tool_choice=none is refused ('tools are closed') and stopped at exactly "
                    "max_steps=6 calls; failed: 'no report was produced: step cap reached (budget.max_steps: 6 calls)'")
def test_runaway_loop_stops_at_the_step_cap(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    set_topic_budget(repo, TARGET, "{max_steps: 6}")
    gateway.set_scenario({"script": {"stubborn": True}})
    run_legs(repo, fake_env, [TARGET])
    assert len(calls_of(gateway, TARGET)) == 6
    assert len(tavily.requests_to("/search")) == 4  # the two calls after the tools closed never reached search
    target = view(repo, TARGET)
    assert target.status["status"] == "failed" and target.status["calls"] == 6
    assert target.status["error"] == "no report was produced: step cap reached (budget.max_steps: 6 calls)"
    assert target.text == previous


@reliability(area="budget", case="time budget nearly spent (injected clock)",
             expect="at 80% of timeout_minutes the tools close and the report is written; degraded with 'time "
                    "budget (budget.timeout_minutes) reached while researching' in the front matter")
def test_time_budget_forces_the_report(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"script": SLOW_SCRIPT})
    run_legs(repo, fake_env, [TARGET], clock=TickClock(200.0))  # 200 s per loop turn; the cap is 12 min
    assert [c["kind"] for c in calls_of(gateway, TARGET)] == ["search", "search", "write"]
    forced_to_write(gateway, "time budget")
    meta = view(repo, TARGET).meta
    assert meta["status"] == "degraded"
    assert meta["status_reasons"] == ["time budget (budget.timeout_minutes) reached while researching; report "
                                      "written from the evidence gathered so far"]


@reliability(area="budget", case="time cap reached (injected clock)",
             expect="no call starts after timeout_minutes: 1 call, then failed 'no report was produced: time cap "
                    "reached (budget.timeout_minutes: 12 min)'; previous report intact")
def test_time_cap_stops_the_leg(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    run_legs(repo, fake_env, [TARGET], clock=TickClock(400.0))
    assert len(calls_of(gateway, TARGET)) == 1
    target = view(repo, TARGET)
    assert target.status["status"] == "failed"
    assert target.status["error"] == "no report was produced: time cap reached (budget.timeout_minutes: 12 min)"
    assert target.text == previous


@reliability(area="budget", case="time cap reached during a model call",
             expect="the call still waiting when budget.timeout_minutes runs out is cut there and not retried: 1 "
                    "request, then failed 'no report was produced: time cap reached (budget.timeout_minutes: 0.1 "
                    "min) during a model call', never the words of a per-call timeout (gateway.timeout_s)")
def test_time_cap_during_a_call_names_the_cap(repo, fake_env, gateway) -> None:
    configure(repo)
    set_topic_budget(repo, TARGET, "{timeout_minutes: 0.1}")
    gateway.set_scenario({"rules": [on_target(on_call=1, delay_s=120.0)]})
    run_legs(repo, fake_env, [TARGET])
    assert len(calls_of(gateway, TARGET)) == 1
    target = view(repo, TARGET)
    assert target.status["status"] == "failed"
    assert target.status["error"] == ("no report was produced: time cap reached (budget.timeout_minutes: 0.1 min) "
                                      "during a model call")
    assert target.reasons == ["time cap reached (budget.timeout_minutes: 0.1 min) during a model call"]


@reliability(area="budget", case="dollar budget nearly spent",
             expect="when writing the report now would no longer fit in max_cost_usd (gateway prices × prompt and a "
                    "band-maximum report), the tools close and the report is written; the leg never spends past "
                    "the cap; degraded with 'dollar budget (budget.max_cost_usd) reached while researching'")
def test_dollar_budget_forces_the_report(repo, fake_env, gateway) -> None:
    configure(repo)
    set_topic_budget(repo, TARGET, "{max_cost_usd: 1.3}")  # the writing is priced with its reasoning room
    gateway.set_scenario({"script": SLOW_SCRIPT, "pricing": {"*": {"prompt": 100.0, "completion": 100.0}}})
    run_legs(repo, fake_env, [TARGET])
    kinds = [c["kind"] for c in calls_of(gateway, TARGET)]
    assert kinds[0] == "search" and kinds[-1] == "write"
    forced_to_write(gateway, "dollar budget")
    target = view(repo, TARGET)
    assert sum(call["cost_usd"] for call in target.calls) <= 1.3  # a hard cap: never crossed
    assert target.meta is not None, target.status
    assert target.meta["status"] == "degraded"
    assert target.meta["status_reasons"] == ["dollar budget (budget.max_cost_usd) reached while researching; report "
                                             "written from the evidence gathered so far"]


@reliability(area="budget", case="dollar cap reached",
             expect="no call starts that the remaining budget cannot pay for (prompt at list price plus a minimal "
                    "output): 0 calls, then failed 'no report was produced: dollar cap reached (budget.max_cost_usd: "
                    "$0.0000 spent of $0.05; the next call could not be paid for)'; previous report intact")
def test_dollar_cap_stops_the_leg(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    set_topic_budget(repo, TARGET, "{max_cost_usd: 0.05}")
    gateway.set_scenario({"script": SLOW_SCRIPT, "pricing": {"*": {"prompt": 100.0, "completion": 100.0}}})
    run_legs(repo, fake_env, [TARGET])
    assert len(calls_of(gateway, TARGET)) == 0
    target = view(repo, TARGET)
    assert target.status["status"] == "failed" and target.text == previous
    assert target.status["error"] == ("no report was produced: dollar cap reached (budget.max_cost_usd: $0.0000 "
                                      "spent of $0.05; the next call could not be paid for)")
