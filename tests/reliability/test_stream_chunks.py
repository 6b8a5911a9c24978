"""Every stream chunk accounted for (issue 31, finding 4).

A streamed completion is folded from its chunks (`gateway/stream.py`). One malformed chunk — a
`tool_calls[0].index` that is `"x"`, `tool_calls` that is `5`, `choices` that is `7`, `usage` that is a
string — used to raise a bare ValueError or TypeError out of the fold: the leg failed as "internal error"
with no retry, and the attempt the gateway had accepted and billed was in no record. Now it is a typed,
retryable "malformed response": the attempt is recorded at its billed cost (looked up at `/generation`
like every other abandoned attempt) and retried; a structured call of the synthesis that meets one fails
that call with its reason, never the whole synthesis.

Served by the fake gateway over real HTTP (its `bad_chunk` action), read by the real `openai` client.
"""
# ruff: noqa: F811 - the imported fixtures are the tests' arguments

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import (
    CONTROL,
    TARGET,
    assert_clean,
    calls_of,
    configure,
    on_target,
    run_legs,
    seed_previous,
    view,
)
from tests.synthesis.conftest import ledger, planted, run_synthesis, synth_env  # noqa: F401

reliability = pytest.mark.reliability
BAD = ["tool_call_index", "tool_calls", "choices", "usage"]


def billed(gateway: Any, generation_ids: list[str]) -> float:
    """What the gateway billed for these generations (its own records)."""
    return round(sum(float(gateway.generations[g]["total_cost"]) for g in generation_ids), 6)


@reliability(area="gateway", case="a malformed stream chunk once ({id})",
             expect="a typed, retryable 'malformed response': retried; the abandoned attempt is in the call log "
                    "(aborted) at the cost the gateway billed for it; the leg's cost is every generation the gateway "
                    "billed; leg ok; other leg ok")
@pytest.mark.parametrize("kind", BAD)
def test_a_malformed_chunk_is_retried_and_billed(repo: Path, fake_env: dict[str, str], gateway: Any,
                                                 kind: str) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=2, times=1, bad_chunk=kind)]})
    run_legs(repo, fake_env)
    target = assert_clean(repo, TARGET)
    [abandoned] = [c for c in target.calls if c["aborted"]]
    assert abandoned["generation_id"] == calls_of(gateway, TARGET)[1]["generation_id"]
    assert abandoned["cost_usd"] == gateway.generations[abandoned["generation_id"]]["total_cost"] > 0
    assert not abandoned["cost_estimated"]
    ids = [c["generation_id"] for c in calls_of(gateway, TARGET)]
    assert sum(c["cost_usd"] for c in target.calls) == pytest.approx(billed(gateway, ids), abs=1e-6)
    assert target.status["cost_usd"] >= billed(gateway, ids) - 1e-6  # the leg's cost adds its search spend (issue 32)
    assert target.status["calls"] == len(ids)
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="a malformed stream chunk on every attempt (choices = 7)",
             expect="4 attempts, then failed: 'gateway returned a malformed response: stream chunk N: choices is a "
                    "int, not a list (after 4 attempt(s))' — never 'internal error'; every attempt in the status "
                    "file at its billed cost; previous report intact; other leg ok")
def test_a_malformed_chunk_every_time_fails_the_leg_honestly(repo: Path, fake_env: dict[str, str], gateway: Any,
                                                             tavily: Any) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(on_call=2, bad_chunk="choices"), on_target(on_call=3,
                                                                                         bad_chunk="choices"),
                                    on_target(on_call=4, bad_chunk="choices"), on_target(on_call=5,
                                                                                         bad_chunk="choices")]})
    run_legs(repo, fake_env)
    target = view(repo, TARGET)
    assert target.status["status"] == "failed" and target.text == previous
    error = target.status["error"]
    assert error.startswith("gateway returned a malformed response: stream chunk ") and "choices is a int" in error
    assert "(after 4 attempt(s))" in error and "internal error" not in error
    ids = [c["generation_id"] for c in calls_of(gateway, TARGET)]
    assert len(ids) == 5 and target.status["calls"] == 5
    assert target.status["cost_usd"] >= billed(gateway, ids) - 1e-6  # the leg's cost adds its search spend (issue 32)
    assert_clean(repo, CONTROL)


@pytest.mark.slow
@reliability(area="gateway", case="a malformed stream chunk in every answer to one report's extraction call",
             expect="that call fails with its reason ('malformed response', after the gateway's retries, every "
                    "attempt in the synthesis call log at its billed cost); the report is listed under limitations "
                    "as not extracted; the other reports are synthesized; never the whole synthesis")
def test_a_malformed_chunk_fails_one_structured_call_not_the_synthesis(planted: Path, gateway: Any,
                                                                     run_synthesis: Any) -> None:
    gateway.set_scenario({"rules": [{"match": {"session": "*:synthesis:01-alpha"}, "bad_chunk": "tool_calls"}]})
    result = run_synthesis(planted)
    data = ledger(planted)
    reports = {r["stem"]: r for r in data["reports"]}
    extraction = reports["01-alpha"]["extraction"]
    assert extraction["status"] == "failed" and "malformed response" in extraction["error"]
    assert "delta.tool_calls is a int, not a list" in extraction["error"]
    attempts = [c for c in gateway.completions if c["session"] == "2026-H2:synthesis:01-alpha"]
    assert len(attempts) == len(extraction["calls"]) >= 2  # the gateway's retries, each one recorded
    assert all(call["aborted"] for call in extraction["calls"])
    assert sum(c["cost_usd"] for c in extraction["calls"]) == pytest.approx(
        billed(gateway, [a["generation_id"] for a in attempts]), abs=1e-6)
    assert any("01-alpha could not be extracted" in line and "malformed response" in line
               for line in data["limitations"])
    assert all(r["extraction"]["status"] == "ok" for stem, r in reports.items() if stem != "01-alpha")
    assert result.counts["extracted"] == len(reports) - 1
