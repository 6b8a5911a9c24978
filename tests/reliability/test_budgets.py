"""Budgets over the wire: a model call still waiting when the leg's time cap runs out is cut there.

The loop's own cap rules (steps, time, dollars approached and reached) run at the model seam in
`tests/reliability/test_loop_rules.py`; what needs a real HTTP call that hangs stays here.
"""

from __future__ import annotations

import pytest

from tests.reliability.conftest import TARGET, calls_of, configure, on_target, run_legs, set_topic_budget, view

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability


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
