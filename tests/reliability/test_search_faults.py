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


NOTHING_RETRIEVED = ("no source was retrieved (every search and reading failed or found nothing): no report is "
                     "written from nothing")
BRIEF_URLS = ["https://arxiv.org/abs/2311.08105", "https://arxiv.org/abs/2501.18512",
              "https://www.primeintellect.ai/blog/intellect-2"]  # diloco-family's brief names them


def failed_without_report(repo, previous: str, *reasons: str) -> None:
    target = view(repo, TARGET)
    assert target.status["status"] == "failed", target.status
    assert target.status["error"] == NOTHING_RETRIEVED
    for reason in reasons:
        assert reason in target.reasons, target.reasons
    assert target.text == previous


def degraded_from_the_brief(repo, *reasons: str) -> None:
    """No search worked, yet the primary sources the brief names were read: a degraded report from them,
    saying why — never an empty or invented one."""
    target = view(repo, TARGET)
    assert target.status["status"] == "degraded", target.status
    for reason in reasons:
        assert reason in target.meta["status_reasons"], target.meta["status_reasons"]
    assert sorted(s["url"] for s in target.meta["sources"]) == sorted(BRIEF_URLS)


@reliability(area="search", case="Tavily 429 once", expect="retried; the search succeeds; leg ok with no reasons")
def test_429_once_is_retried(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 1, "times": 1, "status": 429}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search")[:3] == [429, 200, 200]  # the first turn's two searches, one retried
    assert_clean(repo, TARGET)


@reliability(area="search", case="Tavily 429 on every search",
             expect="3 attempts per search; the brief's primary sources are still read (readable from the first "
                    "step): a degraded report from them only, with 'rate_limit×2' in the reasons (no empty or "
                    "invented one)")
def test_429_persistent_reads_only_the_briefs_sources(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "status": 429}]})
    run_legs(repo, fake_env, [TARGET])
    searched = statuses(tavily, "search")
    assert searched == [429] * len(searched) and len(searched) % 3 == 0  # three attempts every search
    degraded_from_the_brief(repo, f"search service errors reached the researcher (rate_limit×{len(searched) // 3})")
    tool = [m["content"] for m in calls_of(gateway, TARGET)[1]["request"]["messages"] if m["role"] == "tool"]
    expected = '<tool_result tool="web_search" status="error">\nERROR: search rate limit (HTTP 429)'
    assert len(tool) == 3 and all(t.startswith(expected) for t in tool[:2])  # the third: the brief's pages read
    assert tool[2].startswith('<tool_result tool="web_extract" status="ok">')


@reliability(area="search", case="Tavily 432 plan limit",
             expect="not retried; every call after the turn it hit is refused locally (its turn's calls were "
                    "already in flight); degraded with 'plan_limit×1'; the next leg searches normally")
def test_432_plan_limit(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "times": 1, "status": 432}]})
    run_legs(repo, fake_env)
    target = view(repo, TARGET)
    errors = target.tool_errors()
    assert errors[0] == "plan_limit" and set(errors[1:]) == {"search_disabled"} and len(errors) > 1
    assert target.meta["status"] == "degraded"
    assert "search service errors reached the researcher (plan_limit×1)" in target.meta["status_reasons"]
    # the first turn's search, second search and reading of the brief went out together; then nothing
    first_turn = sorted((r.path, resp.status) for r, resp in tavily.requests[:3])  # in any order: at once
    assert first_turn == [("/extract", 200), ("/search", 200), ("/search", 432)]
    assert_clean(repo, CONTROL)


@reliability(area="search", case="Tavily 433 pay-as-you-go limit after the first search",
             expect="degraded report from the first turn's sources, 'plan_limit×1' in the front matter; every "
                    "later call is refused locally (no request)")
def test_433_after_first_search_is_degraded(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 2, "status": 433}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search") == [200, 433] and statuses(tavily, "extract") == [200]  # the first turn's
    target = view(repo, TARGET)
    # the reading turn's calls (the planted claims' pages, then the next ones) are refused locally, and so are
    # the gap turn's
    errors = target.tool_errors()
    assert errors[0] == "plan_limit" and set(errors[1:]) == {"search_disabled"} and len(errors) >= 4
    assert target.meta["status"] == "degraded"
    assert "search service errors reached the researcher (plan_limit×1)" in target.meta["status_reasons"]
    assert len(target.meta["sources"]) >= 3


@reliability(area="search", case="Tavily 401 key rejected",
             expect="not retried: the first turn's three calls (at once) are refused, no later request is made; "
                    "failed with 'key_rejected×3' and no report, no writing call spent on nothing")
def test_401_key_rejected(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    tavily.set_scenario({"rules": [{"status": 401}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search") == [401, 401] and statuses(tavily, "extract") == [401]
    failed_without_report(repo, previous, "search service errors reached the researcher (key_rejected×3)")
    assert "write" not in [c["kind"] for c in calls_of(gateway, TARGET)]


@reliability(area="search", case="Tavily 5xx once", expect="retried; leg ok with no reasons")
def test_5xx_once_is_retried(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 2, "times": 1, "status": 502}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search")[:3] == [200, 502, 200]
    assert_clean(repo, TARGET)


@reliability(area="search", case="Tavily 5xx on every extract",
             expect="3 attempts a reading; degraded report from search snippets with 'http_500' and 'no page could "
                    "be read in full' in the front matter")
def test_5xx_on_extract_is_degraded(repo, fake_env, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "extract", "status": 500}]})
    run_legs(repo, fake_env, [TARGET])
    failed = view(repo, TARGET).tool_errors()
    assert statuses(tavily, "extract") == [500] * 3 * len(failed) and set(failed) == {"http_500"}
    meta = view(repo, TARGET).meta
    assert meta["status"] == "degraded"
    assert f"search service errors reached the researcher (http_500×{len(failed)})" in meta["status_reasons"]
    assert any(r.startswith("no page could be read in full") for r in meta["status_reasons"])


@pytest.mark.slow
@reliability(area="search", case="Tavily timeout",
             expect="the hung request is abandoned at the 0.5 s client timeout and retried; leg ok")
def test_timeout_is_retried(repo, fake_env, tavily) -> None:
    # 1 s: the extract call sends the same number as Tavily's `timeout`, which must be 1-60 s
    configure(repo, search_service="timeout_s = 1.0")
    tavily.set_scenario({"rules": [{"endpoint": "search", "on_call": 1, "times": 1, "delay_s": 5.0}]})
    run_legs(repo, fake_env, [TARGET])
    assert statuses(tavily, "search")[:3] == [200, 200, 200] and len(tavily.requests_to("/search")) >= 3
    assert_clean(repo, TARGET)


@reliability(area="search", case="search service unreachable",
             expect="3 attempts a call; failed with 'unreachable×3' (two searches and the brief's reading) and no "
                    "report")
def test_unreachable(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    previous = seed_previous(repo, fake_env, gateway, tavily)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    run_legs(repo, {**fake_env, "TAVILY_BASE_URL": closed}, [TARGET])
    failed_without_report(repo, previous, "search service errors reached the researcher (unreachable×3)")


@reliability(area="search", case="empty results for every search",
             expect="the model is told 'No results'; a degraded report from the brief's primary sources only, with "
                    "'all N search(es) returned no results' (no invented one)")
def test_empty_results(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"endpoint": "search", "empty": True}]})
    run_legs(repo, fake_env, [TARGET])
    degraded_from_the_brief(repo, f"all {len(statuses(tavily, 'search'))} search(es) returned no results")
    tool = [m["content"] for m in calls_of(gateway, TARGET)[1]["request"]["messages"] if m["role"] == "tool"]
    assert len(tool) == 3
    assert all(t.startswith('<tool_result tool="web_search" status="empty">\nNo results for') for t in tool[:2])


@reliability(area="search", case="extract fails for one URL",
             expect="the other pages are read; the model is told which page failed and why; leg ok")
def test_extract_fails_for_one_url(repo, fake_env, gateway, tavily) -> None:
    configure(repo)
    # four pages: the planted claims' two each in a call of its own, then one call reading the other two
    gateway.set_scenario({"script": {"extract_top": 4}})
    run_legs(repo, fake_env, [TARGET])
    # the reading turn's calls run at once: the search server sees them in any order
    (urls,) = [body["urls"] for endpoint, body in tavily.calls if endpoint == "extract" and len(body["urls"]) == 2]
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
    assert set(target.tool_errors()) == {"extract_failed"}  # every reading: the brief's, the claims' pages, the gaps'
    assert target.meta["status"] == "degraded"
    assert target.meta["status_reasons"] == ["no page could be read in full (every extraction failed); the report "
                                             "rests on search snippets"]
