"""Search faults: Tavily errors reach the leg's status, never a silently empty or invented report.

The anchors' failure was "a Tavily 429 produces an empty report" and "an empty context produces an
invented report". Here a search fault is retried when it can heal, refused locally once it cannot
(key or plan), told to the model as an explicit tool error, and named in the leg's reasons; a leg left
with no retrieved source writes no report at all.
"""

from __future__ import annotations

import socket

import pytest

from tests.reliability.conftest import (
    CONTROL,
    TARGET,
    assert_clean,
    calls_of,
    configure,
    run_legs,
    seed_previous,
    view,
)

reliability = pytest.mark.reliability


def statuses(tavily, endpoint: str) -> list[int]:
    return [response.status for request, response in tavily.requests if request.path == f"/{endpoint}"]


def failed_without_report(repo, previous: str, *reasons: str) -> None:
    target = view(repo, TARGET)
    assert target.status["status"] == "failed", target.status
    assert target.status["error"] == "the report cites no retrieved source; an unsupported report is not written"
    for reason in reasons:
        assert reason in target.reasons, target.reasons
    assert target.text == previous


@reliability(area="search", case="Tavily 429 once", expect="retried; the search succeeds; leg ok with no reasons")
def test_429_once_is_retried(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 1, "times": 1, "status": 429}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search") == [429, 200, 200]
    assert_clean(repo, TARGET)


@reliability(area="search", case="Tavily 429 on every search",
             expect="3 attempts per search; failed with 'rate_limit×2' in the reasons and no report (no empty or "
                    "invented one); previous report intact")
def test_429_persistent_fails_without_a_report(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    tavily.set_scenario({"rules": [{"endpoint": "search", "status": 429}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search") == [429] * 6
    failed_without_report(repo, previous, "search service errors reached the researcher (rate_limit×2)")
    tool = [m["content"] for m in calls_of(gateway, TARGET)[1]["request"]["messages"] if m["role"] == "tool"]
    expected = '<tool_result tool="web_search" status="error">\nERROR: search rate limit (HTTP 429)'
    assert len(tool) == 2 and all(t.startswith(expected) for t in tool)


@reliability(area="search", case="Tavily 432 plan limit",
             expect="not retried; every later search refused locally (1 request in all); failed with "
                    "'plan_limit×1'; the next leg searches normally")
def test_432_plan_limit(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    tavily.set_scenario({"rules": [{"endpoint": "search", "times": 1, "status": 432}]})
    run_legs(repo, fake_env)
    target = view(repo, TARGET)
    assert target.tool_errors() == ["plan_limit", "search_disabled"]
    failed_without_report(repo, previous, "search service errors reached the researcher (plan_limit×1)")
    assert statuses(tavily, "search")[:3] == [432, 200, 200]  # the third and fourth are the control leg's
    assert_clean(repo, CONTROL)


@reliability(area="search", case="Tavily 433 pay-as-you-go limit after the first search",
             expect="degraded report from the first search's sources, 'plan_limit×1' in the front matter; the "
                    "extract is refused locally (no request)")
def test_433_after_first_search_is_degraded(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 2, "status": 433}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search") == [200, 433] and statuses(tavily, "extract") == []
    target = view(repo, TARGET)
    # the reading turn's three calls (two planted claims' pages, then the next one) are refused locally
    assert target.tool_errors() == ["plan_limit", "search_disabled", "search_disabled", "search_disabled"]
    assert target.meta["status"] == "degraded"
    assert "search service errors reached the researcher (plan_limit×1)" in target.meta["status_reasons"]
    assert len(target.meta["sources"]) >= 3


@reliability(area="search", case="Tavily 401 key rejected",
             expect="not retried; later calls refused locally; failed with 'key_rejected×1' and no report")
def test_401_key_rejected(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    tavily.set_scenario({"rules": [{"status": 401}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search") == [401] and statuses(tavily, "extract") == []
    failed_without_report(repo, previous, "search service errors reached the researcher (key_rejected×1)")


@reliability(area="search", case="Tavily 5xx once", expect="retried; leg ok with no reasons")
def test_5xx_once_is_retried(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 2, "times": 1, "status": 502}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search") == [200, 502, 200]
    assert_clean(repo, TARGET)


@reliability(area="search", case="Tavily 5xx on every extract",
             expect="3 attempts; degraded report from search snippets with 'http_500×1' and 'no page could be read "
                    "in full' in the front matter")
def test_5xx_on_extract_is_degraded(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "extract", "status": 500}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "extract") == [500, 500, 500] * 3  # each of the reading turn's three calls
    meta = view(repo, TARGET).meta
    assert meta["status"] == "degraded"
    assert "search service errors reached the researcher (http_500×3)" in meta["status_reasons"]
    assert any(r.startswith("no page could be read in full") for r in meta["status_reasons"])


@pytest.mark.slow
@reliability(area="search", case="Tavily timeout",
             expect="the hung request is abandoned at the 0.5 s client timeout and retried; leg ok")
def test_timeout_is_retried(repo, fake_env, tavily) -> None:
    # 1 s: the extract call sends the same number as Tavily's `timeout`, which must be 1-60 s
    configure(repo, search_service="timeout_s = 1.0")
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 1, "times": 1, "delay_s": 5.0}]})
    run_legs(repo, fake_env, [TARGET])
    assert len(statuses(tavily, "search")) == 3
    assert_clean(repo, TARGET)


@reliability(area="search", case="search service unreachable",
             expect="3 attempts per search; failed with 'unreachable×2' and no report")
def test_unreachable(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    run_legs(repo, {**fake_env, "TAVILY_BASE_URL": closed}, [TARGET])
    failed_without_report(repo, previous, "search service errors reached the researcher (unreachable×2)")


@reliability(area="search", case="empty results for every search",
             expect="the model is told 'No results'; failed with 'all 2 search(es) returned no results' and no "
                    "(invented) report; previous report intact")
def test_empty_results(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    tavily.set_scenario({"rules": [{"endpoint": "search", "empty": True}]})
    run_legs(repo, fake_env, [TARGET])
    failed_without_report(repo, previous, "all 2 search(es) returned no results")
    tool = [m["content"] for m in calls_of(gateway, TARGET)[1]["request"]["messages"] if m["role"] == "tool"]
    assert len(tool) == 2
    assert all(t.startswith('<tool_result tool="web_search" status="empty">\nNo results for') for t in tool)


@reliability(area="search", case="extract fails for one URL",
             expect="the other pages are read; the model is told which page failed and why; leg ok")
def test_extract_fails_for_one_url(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    # four pages: the planted claims' two each in a call of its own, then one call reading the other two
    gateway.set_scenario({"script": {"extract_top": 4}})
    run_legs(repo, fake_env, [TARGET])
    urls = [body["urls"] for endpoint, body in tavily.calls if endpoint == "extract"][-1]
    assert len(urls) == 2
    gateway.reset()
    tavily.reset()
    gateway.set_scenario({"script": {"extract_top": 4}})
    tavily.set_scenario({"rules": [{"endpoint": "extract", "fail_urls": [urls[1]]}]})
    run_legs(repo, fake_env, [TARGET])
    extract = [m["content"] for m in calls_of(gateway, TARGET)[2]["request"]["messages"] if m["role"] == "tool"][-1]
    assert extract.startswith('<tool_result tool="web_extract" status="ok">')
    assert extract.count("<source id=") == 1
    assert f"{urls[1]}: extraction failed (Failed to fetch url)" in extract
    assert_clean(repo, TARGET)


@reliability(area="search", case="extract fails for every URL",
             expect="tool error to the model; degraded report from search snippets with 'no page could be read "
                    "in full' in the front matter")
def test_extract_fails_for_every_url(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "extract", "empty": True}]})
    run_legs(repo, fake_env, [TARGET])
    target = view(repo, TARGET)
    assert target.tool_errors() == ["extract_failed"] * 3  # each of the reading turn's three calls
    assert target.meta["status"] == "degraded"
    assert target.meta["status_reasons"] == ["no page could be read in full (every extraction failed); the report "
                                             "rests on search snippets"]
