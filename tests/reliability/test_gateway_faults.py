"""Gateway faults: every failure mode of the model gateway ends in a defined state.

Retried and ok, degraded with the reason in the front matter, or failed with a clear message that
leaves the previous report intact — and the other leg, run in the same process against the same
fake, is unaffected (its calls are not matched by the fault rules).

These are the faults of the wire: status codes, errors inside HTTP 200 bodies, retries and
`Retry-After`, timeouts, resets, bodies that are not chat completions. What the research loop does with
a reply that arrived (finish reasons, empty replies, broken tool calls) is tested at the model seam, in
test_loop_rules.py.
"""

from __future__ import annotations

import socket

import pytest

from research_dispatch.core.retry import RetryPolicy
from tests.clirun import run_cli
from tests.reliability.conftest import (
    CONTROL,
    TARGET,
    Sleeps,
    assert_clean,
    calls_of,
    configure,
    on_target,
    run_legs,
    seed_previous,
    view,
)

reliability = pytest.mark.reliability


def served(leg) -> list[dict]:
    """The call-log lines of calls that served (the route is theirs)."""
    return [c for c in leg.calls if not c["aborted"]]


def given_up(leg) -> list[dict]:
    """The call-log lines of attempts given up on the way (their money counts)."""
    return [c for c in leg.calls if c["aborted"]]


def failed_cleanly(repo, previous: str, error_start: str) -> None:
    """The target failed with a clear message, wrote no report over the previous one, and the control is ok."""
    target = view(repo, TARGET)
    assert target.status["status"] == "failed", target.status
    assert target.status["error"].startswith(error_start), target.status["error"]
    assert target.status["exit_code"] == 1
    assert target.text == previous
    assert_clean(repo, CONTROL)


# -- rate limits ---------------------------------------------------------------------------------
@reliability(area="gateway", case="429 with Retry-After",
             expect="retried after exactly the Retry-After wait (7 s, injected sleep); leg ok; other leg ok")
def test_429_with_retry_after(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=2, times=1, status=429, retry_after="7")]})
    sleeps = Sleeps()
    run_legs(repo, fake_env, retry=RetryPolicy(max_retries=3, backoff_base_s=1.0, backoff_max_s=30.0, sleep=sleeps))
    assert sleeps == [7.0]
    target = assert_clean(repo, TARGET)
    assert [c["status"] for c in calls_of(gateway, TARGET)][:3] == [200, 429, 200]
    assert [c["retries"] for c in target.calls][:2] == [0, 1]
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="429 without Retry-After",
             expect="retried after jittered exponential back-off (1.0–1.25 s); leg ok; other leg ok")
def test_429_without_retry_after(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=1, times=1, status=429)]})
    sleeps = Sleeps()
    run_legs(repo, fake_env, retry=RetryPolicy(max_retries=3, backoff_base_s=1.0, backoff_max_s=30.0, sleep=sleeps))
    assert len(sleeps) == 1 and 1.0 <= sleeps[0] <= 1.25
    assert assert_clean(repo, TARGET).calls[0]["retries"] == 1
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="429 with a Retry-After beyond the allowed wait",
             expect="failed at once (no wait, 1 request) naming the requested wait; previous report intact")
def test_429_with_excessive_retry_after(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(status=429, retry_after="3600")]})
    sleeps = Sleeps()
    run_legs(repo, fake_env, retry=RetryPolicy(max_retries=3, backoff_base_s=1.0, backoff_max_s=30.0, sleep=sleeps))
    assert sleeps == [] and len(calls_of(gateway, TARGET)) == 1
    failed_cleanly(repo, previous, "gateway HTTP 429: Rate limit exceeded")
    assert "retry after 3600 s" in view(repo, TARGET).status["error"]


@reliability(area="gateway", case="429 on every attempt",
             expect="4 attempts (3 retries), then failed: 'gateway HTTP 429 … (after 4 attempt(s))'; previous report "
                    "intact; other leg ok")
def test_429_persistent(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(status=429, retry_after="0")]})
    run_legs(repo, fake_env)
    assert len(calls_of(gateway, TARGET)) == 4
    failed_cleanly(repo, previous, "gateway HTTP 429: Rate limit exceeded: too many requests (after 4 attempt(s))")


# -- upstream errors -----------------------------------------------------------------------------
@reliability(area="gateway", case="502/503 burst within the retry budget",
             expect="three failures in a row retried; leg ok with retries=3 on that call; other leg ok")
def test_5xx_burst_is_retried(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=1, status=502), on_target(on_call=2, status=503),
                                    on_target(on_call=3, status=502)]})
    run_legs(repo, fake_env)
    target = assert_clean(repo, TARGET)
    assert [c["status"] for c in calls_of(gateway, TARGET)][:4] == [502, 503, 502, 200]
    assert target.calls[0]["retries"] == 3
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="503 burst longer than the retry budget (on the writing call)",
             expect="failed after 4 attempts with 'gateway HTTP 503 …'; no partial report; previous report intact; "
                    "other leg ok")
def test_5xx_burst_beyond_retries(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(match={"kind": "write"}, status=503)]})
    run_legs(repo, fake_env)
    kinds = [c["kind"] for c in calls_of(gateway, TARGET)]
    assert kinds[:3] == ["plan", "extract", "done"] and kinds[-4:] == ["write"] * 4 and kinds.count("write") == 4
    failed_cleanly(repo, previous, "gateway HTTP 503: No available providers for this model at the moment "
                                   "(after 4 attempt(s))")


@reliability(area="gateway", case="408 request timeout", expect="retried; leg ok; other leg ok")
def test_408_is_retried(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=2, times=1, status=408)]})
    run_legs(repo, fake_env)
    assert assert_clean(repo, TARGET).calls[1]["retries"] == 1
    assert_clean(repo, CONTROL)


@pytest.mark.slow
@reliability(area="gateway", case="client timeout (no answer within gateway.timeout_s)",
             expect="the hung call is abandoned at the 0.5 s client timeout and retried; leg ok; other leg ok")
def test_client_timeout_is_retried(repo, fake_env, gateway) -> None:
    configure(repo, gateway="timeout_s = 0.5")
    gateway.set_scenario({"rules": [on_target(on_call=2, times=1, delay_s=5.0)]})
    run_legs(repo, fake_env)
    target = assert_clean(repo, TARGET)
    assert served(target)[1]["retries"] >= 1
    assert [c["call"] for c in calls_of(gateway, TARGET)][:3] == [1, 2, 3]
    (abandoned,) = given_up(target)  # the hung call is in the books at what the gateway billed for it
    assert abandoned["generation_id"] == calls_of(gateway, TARGET)[1]["generation_id"]
    assert abandoned["cost_usd"] == gateway.generations[abandoned["generation_id"]]["total_cost"] > 0
    assert not abandoned["cost_estimated"]
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="connection reset", expect="retried; leg ok; other leg ok")
def test_connection_reset_is_retried(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=1, times=1, reset=True)]})
    run_legs(repo, fake_env)
    assert assert_clean(repo, TARGET).calls[0]["retries"] == 1
    assert [c["status"] for c in calls_of(gateway, TARGET)][:2] == ["reset", 200]
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="gateway unreachable (connection refused)",
             expect="4 attempts per leg, then failed: 'connection to the gateway failed: ConnectError'; no report")
def test_gateway_unreachable(repo, fake_env) -> None:
    configure(repo)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1"
    run_legs(repo, {**fake_env, "OPENROUTER_BASE_URL": closed})
    for ref in (TARGET, CONTROL):
        leg = view(repo, ref)
        assert leg.status["status"] == "failed" and leg.text is None
        assert leg.status["error"] == "connection to the gateway failed: ConnectError (after 4 attempt(s))"


# -- account and request errors ------------------------------------------------------------------
@reliability(area="gateway", case="402 insufficient credits",
             expect="not retried (1 request); failed: 'gateway HTTP 402: Insufficient credits…'; exit 1 with one line "
                    "per leg; previous report intact; other leg ok")
def test_402_insufficient_credits(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(status=402)]})
    result = run_cli("research", f"{TARGET.topic},{CONTROL.topic}", "--repo", str(repo))
    assert result.code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{TARGET.stem}: failed — gateway HTTP 402: Insufficient credits")
    assert lines[1].startswith(f"{CONTROL.stem}: ok, route exact")
    assert len(calls_of(gateway, TARGET)) == 1
    failed_cleanly(repo, previous, "gateway HTTP 402: Insufficient credits")


@reliability(area="gateway", case="401 key rejected",
             expect="not retried (1 request); failed: 'gateway HTTP 401: User not found.'; previous report intact; "
                    "other leg ok")
def test_401_key_rejected(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(status=401)]})
    run_legs(repo, fake_env)
    assert len(calls_of(gateway, TARGET)) == 1
    failed_cleanly(repo, previous, "gateway HTTP 401: User not found.")


@reliability(area="gateway", case="403 moderation block",
             expect="not retried (1 request); failed: 'gateway HTTP 403: Input was flagged by moderation'; "
                    "other leg ok")
def test_403_moderation(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(on_call=3, status=403)]})
    run_legs(repo, fake_env)
    assert len(calls_of(gateway, TARGET)) == 3
    failed_cleanly(repo, previous, "gateway HTTP 403: Input was flagged by moderation")


@reliability(area="gateway", case="404 no endpoint for the pinned route",
             expect="not retried (1 request); failed: 'gateway HTTP 404: No endpoints found…'; other leg ok")
def test_404_no_endpoints(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(status=404)]})
    run_legs(repo, fake_env)
    assert len(calls_of(gateway, TARGET)) == 1
    failed_cleanly(repo, previous, "gateway HTTP 404: No endpoints found")


# -- errors inside HTTP 200 ----------------------------------------------------------------------
@reliability(area="gateway", case="HTTP-200 body with choices[].error (retryable code 502)",
             expect="raised as an error, retried; leg ok; other leg ok")
def test_error_in_200_choice_is_retried(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=2, times=1, error_in_200="choice", code=502)]})
    run_legs(repo, fake_env)
    target = assert_clean(repo, TARGET)
    assert served(target)[1]["retries"] == 1 and served(target)[1]["finish_reason"] != "error"
    assert [c["cost_usd"] for c in given_up(target)] == [0.0]  # a failed generation is not billed
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="HTTP-200 body with a top-level error (non-retryable code 400)",
             expect="not retried; failed: 'gateway returned an error in an HTTP 200 body: …'; previous report "
                    "intact; other leg ok")
def test_error_in_200_top_level_fails(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(on_call=3, error_in_200="top_level", code=400,
                                              message="context length exceeded")]})
    run_legs(repo, fake_env)
    assert len(calls_of(gateway, TARGET)) == 3
    failed_cleanly(repo, previous, "gateway returned an error in an HTTP 200 body: context length exceeded")


@reliability(area="gateway", case="HTTP-200 body that is not JSON",
             expect="treated as a retryable malformed response: retried; leg ok; other leg ok")
def test_garbage_200_is_retried(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=2, times=1, raw_body="<html>502 Bad Gateway</html>"),
                                    on_target(on_call=4, times=1, raw_body='{"choices": "x"}')]})
    run_legs(repo, fake_env)
    target = assert_clean(repo, TARGET)
    assert [c["status"] for c in calls_of(gateway, TARGET)][:5] == [200, "raw", 200, "raw", 200]
    assert [c["retries"] for c in target.calls][:3] == [0, 1, 1]
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="HTTP-200 body that is never valid",
             expect="failed after 4 attempts: 'gateway returned a malformed response …'; previous report intact")
def test_garbage_200_persistent_fails(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(raw_body="not json{")]})
    run_legs(repo, fake_env)
    assert len(calls_of(gateway, TARGET)) == 4
    failed_cleanly(repo, previous, "gateway returned a malformed response")


@reliability(area="gateway", case="mid-stream error (retryable code 502)",
             expect="every call streams; the error chunk after the HTTP 200 is a retryable gateway error: retried; "
                    "the abandoned attempt is in the call log (aborted, its generation's cost); leg ok; other leg ok")
def test_mid_stream_error_is_retried_and_recorded(repo, fake_env, gateway) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(on_call=2, times=1, mid_stream_error=True, code=502)]})
    run_legs(repo, fake_env)
    assert gateway.completions and all(c["request"].get("stream") is True for c in gateway.completions)
    target = assert_clean(repo, TARGET)
    (abandoned,) = given_up(target)
    assert abandoned["generation_id"] == calls_of(gateway, TARGET)[1]["generation_id"]
    assert abandoned["verdict"] == "aborted" and abandoned["cost_usd"] == 0.0 and not abandoned["cost_estimated"]
    assert served(target)[1]["retries"] == 1
    assert_clean(repo, CONTROL)


@reliability(area="gateway", case="mid-stream error (non-retryable code 400)",
             expect="not retried; failed: 'gateway returned an error in an HTTP 200 body: …'; the attempt is in "
                    "the status file's calls and cost; previous report intact; other leg ok")
def test_mid_stream_error_that_cannot_succeed_fails(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    gateway.set_scenario({"rules": [on_target(on_call=2, mid_stream_error=True, code=400,
                                              message="prompt is too long")]})
    run_legs(repo, fake_env)
    assert len(calls_of(gateway, TARGET)) == 2
    target = view(repo, TARGET)
    assert target.status["calls"] == 2  # the one that served, and the abandoned one
    failed_cleanly(repo, previous, "gateway returned an error in an HTTP 200 body: prompt is too long")


@pytest.mark.slow
@reliability(area="gateway", case="stream stalls halfway past the call's deadline",
             expect="cut at gateway.timeout_s although keep-alive comments arrive; retried; the stalled attempt "
                    "is in the call log at its generation's cost (a provider that supports cancellation bills "
                    "what it streamed); leg ok")
def test_a_stalled_stream_is_cut_retried_and_billed(repo, fake_env, gateway) -> None:
    configure(repo, gateway="timeout_s = 0.5")
    gateway.set_scenario({"rules": [on_target(match={"kind": "write"}, times=1, stall_s=5.0)]})
    run_legs(repo, fake_env, [TARGET])
    target = assert_clean(repo, TARGET)
    (abandoned,) = given_up(target)
    record = gateway.generations[abandoned["generation_id"]]
    assert record["streamed"] and record["cancelled"]
    assert abandoned["cost_usd"] == record["total_cost"] > 0 and not abandoned["cost_estimated"]
    assert abandoned["completion_tokens"] < served(target)[-1]["completion_tokens"]  # billed for half a report
