"""One retry policy for every outbound call (`core/retry.py`): its rules as properties, and the gateway,
the search providers and GitHub each holding one (their wire behaviour is tested against the fakes:
tests/reliability/test_gateway_faults.py, tests/reliability/test_search_faults.py,
tests/publish/test_publish_faults.py)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from research_dispatch.config.settings import GatewaySettings, PRSettings, SearchServiceSettings, SearchSettings
from research_dispatch.core.retry import Decision, Failure, GiveUp, RetryPolicy
from research_dispatch.gateway.client import Gateway
from research_dispatch.publish.pulls import Retrier
from research_dispatch.tools.search import SearchTools

seconds = st.floats(min_value=0, max_value=1000, allow_nan=False)
policies = st.builds(RetryPolicy, max_retries=st.integers(0, 10), backoff_base_s=seconds, backoff_max_s=seconds,
                     max_wait_s=seconds, jitter=st.sampled_from([0.0, 0.25]))
failures = st.builds(Failure, retryable=st.booleans(), retry_after_s=st.none() | seconds,
                     at_least_s=st.sampled_from([0.0, 60.0]))


@given(policies, st.integers(0, 12), failures)
def test_the_policy_decides_by_its_rules(policy: RetryPolicy, attempt: int, failure: Failure) -> None:
    decision = policy.decide(attempt, failure)
    if not failure.retryable:
        assert decision.give_up is GiveUp.NOT_RETRYABLE
    elif attempt >= policy.max_retries:
        assert decision.give_up is GiveUp.EXHAUSTED
    elif max(failure.retry_after_s or 0.0, failure.at_least_s) > policy.max_wait_s:
        assert decision.give_up is GiveUp.WAIT_TOO_LONG  # a service's demand beyond the cap: said, not waited
    else:
        assert decision.retry
        if failure.retry_after_s is not None:
            assert decision.wait_s == failure.retry_after_s  # what the service asked, exactly
        else:
            backoff = min(policy.backoff_base_s * 2 ** attempt, policy.backoff_max_s)
            assert max(backoff, failure.at_least_s) <= decision.wait_s
            assert decision.wait_s <= max(backoff * (1 + policy.jitter), failure.at_least_s)


def test_a_wait_past_the_deadline_is_given_up() -> None:
    policy = RetryPolicy(backoff_base_s=5.0, jitter=0.0)
    assert policy.decide(0, Failure(True), deadline=time.monotonic() + 3).give_up is GiveUp.DEADLINE
    assert policy.decide(0, Failure(True), deadline=time.monotonic() + 60) == Decision(5.0)


def test_call_retries_what_the_judge_knows_and_nothing_else() -> None:
    waits: list[float] = []
    told: list[tuple[int, float]] = []
    policy = RetryPolicy(max_retries=2, backoff_base_s=1.0, jitter=0.0, sleep=waits.append)
    outcomes: list[BaseException | str] = [OSError("reset"), OSError("reset"), "ok"]

    def attempt() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def judge(exc: Exception) -> Failure | None:
        return Failure(True, reason="reset") if isinstance(exc, OSError) else None

    assert policy.call(attempt, judge, retrying=lambda _f, n, w: told.append((n, w))) == "ok"
    assert waits == [1.0, 2.0] and told == [(1, 1.0), (2, 2.0)]

    def refused() -> str:
        raise ValueError("not ours")

    with pytest.raises(ValueError, match="not ours"):  # an error the judge does not know: at once, unchanged
        policy.call(refused, judge)

    def failing() -> str:
        raise OSError("reset")

    def give_up(_error: Exception, _failure: Failure, decision: Decision, attempts: int) -> RuntimeError:
        assert decision.give_up is not None
        return RuntimeError(f"gave up after {attempts}: {decision.give_up.value}")

    with pytest.raises(RuntimeError, match="gave up after 3: retries exhausted"):
        policy.call(failing, judge, give_up=give_up)


def test_the_gateway_the_search_providers_and_github_hold_the_one_policy() -> None:
    gateway = Gateway(api_key="sk-or-test", base_url="http://127.0.0.1:9", settings=GatewaySettings(max_retries=5))
    search = SearchTools(api_key="tvly-test", settings=SearchSettings(),
                         retry=SearchServiceSettings(max_retries=1).retry_policy())
    github = Retrier(PRSettings(api_retries=7))
    assert [type(p) for p in (gateway.retry, search.retry, github.policy)] == [RetryPolicy] * 3
    assert (gateway.retry.max_retries, search.retry.max_retries, github.policy.max_retries) == (5, 1, 7)
    assert gateway.retry.max_wait_s == GatewaySettings().max_retry_after_s and gateway.retry.jitter > 0
    gateway.close()
