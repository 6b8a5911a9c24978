"""Legs on Exa alone and on Tavily + Exa: the real exa-py (and tavily-python) clients against the fakes,
one S<n> registry across providers, and each provider's key checked up front."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.core.errors import MissingKey
from research_dispatch.tools.sources import normalise_url
from research_dispatch_fakes.exa import FakeExa
from tests.tools.conftest import EXA_KEY, make_repo, run_one_leg


def exa_urls(exa: FakeExa) -> set[str]:
    """Every URL the fake Exa returned (search results and read pages), normalised."""
    urls: set[str] = set()
    for request, response in exa.requests:
        if response.status == 200 and request.path in ("/search", "/contents"):
            urls |= {normalise_url(r["url"]) for r in json.loads(response.body)["results"]}
    return urls


def test_exa_only_leg_cites_exa_urls(tmp_path: Path, tool_env: dict[str, str], exa: FakeExa, tavily: Any) -> None:
    repo = make_repo(tmp_path, topic_extra="search: {providers: [exa]}\n")
    env = {k: v for k, v in tool_env.items() if not k.startswith("TAVILY")}  # no Tavily key is needed
    run = run_one_leg(repo, env)
    assert run.result.status == "ok", run.result.reasons
    assert run.meta is not None and run.meta["search"]["providers"] == ["exa"]
    assert tavily.requests == []  # Tavily was never asked
    assert exa.requests_to("/search") and exa.requests_to("/contents")
    assert all(r.headers["x-api-key"] == EXA_KEY for r in exa.requests_to("/search"))
    cited = {normalise_url(s["url"]) for s in run.meta["sources"]}
    assert len(cited) >= 3 and cited <= exa_urls(exa)
    assert any(s["url"].startswith("https://arxiv.org/pdf/") for s in run.meta["sources"])  # Exa's form of the URL
    assert EXA_KEY not in (repo / "build" / "traces" / "02-diloco-family.jsonl").read_text()


def test_both_providers_share_one_registry(tmp_path: Path, tool_env: dict[str, str], exa: FakeExa,
                                           tavily: Any, gateway: Any) -> None:
    repo = make_repo(tmp_path, config='search = {providers = ["tavily", "exa"]}\n')
    run = run_one_leg(repo, tool_env)
    assert run.result.status == "ok", run.result.reasons
    assert run.meta is not None and run.meta["search"]["providers"] == ["tavily", "exa"]
    searches = run.meta["search"]["searches"]
    assert len(tavily.requests_to("/search")) == len(exa.requests_to("/search")) == searches
    assert all(e["detail"]["providers"] == ["tavily", "exa"] for e in run.tool_events() if e["name"] == "web_search")
    research = [c for c in gateway.completions if c["request"].get("tools")]  # not the writing call
    shown = shown_sources(research[-1]["request"]["messages"])
    keys = [normalise_url(url) for url in shown.values()]
    assert len(keys) == len(set(keys))  # one id per page, whichever provider found it
    assert set(keys) & exa_urls(exa) and set(keys) - exa_urls(exa)  # both indexes contributed
    # The same arXiv paper is /abs/ at Tavily and /pdf/ at Exa: both providers returned it, one id holds it.
    both = {normalise_url(u) for r in tavily.requests_to("/search") for u in _urls(tavily, r)} & exa_urls(exa)
    assert both and both <= set(keys)
    cited = [normalise_url(s["url"]) for s in run.meta["sources"]]
    assert len(cited) == len(set(cited)) >= 3


def shown_sources(messages: list[dict[str, Any]]) -> dict[str, str]:
    """id -> URL of every <source> the tools showed the model in this leg."""
    found: dict[str, str] = {}
    for message in messages:
        if message.get("role") == "tool":
            for source_id, url in re.findall(r'<source id="(S\d+)" url="([^"]+)"', message["content"]):
                found.setdefault(source_id, html.unescape(url))
    return found


def _urls(server: Any, request: Any) -> list[str]:
    response = next(resp for req, resp in server.requests if req is request)
    return [r["url"] for r in json.loads(response.body)["results"]] if response.status == 200 else []


def test_exa_key_is_checked_before_any_request(tmp_path: Path, tool_env: dict[str, str], exa: FakeExa,
                                               gateway: Any) -> None:
    repo = make_repo(tmp_path, topic_extra="search: {providers: [exa]}\n")
    env = {k: v for k, v in tool_env.items() if k != "EXA_API_KEY"}
    with pytest.raises(MissingKey, match="EXA_API_KEY"):
        run_one_leg(repo, env)
    assert exa.requests == [] and gateway.completions == []


def test_an_exa_outage_leaves_tavily_results(tmp_path: Path, tool_env: dict[str, str], exa: FakeExa,
                                             tavily: Any) -> None:
    repo = make_repo(tmp_path, config='search = {providers = ["tavily", "exa"]}\n')
    exa.set_scenario({"rules": [{"endpoint": "search", "status": 503}]})
    run = run_one_leg(repo, tool_env)
    assert run.meta is not None and run.result.status == "degraded"
    assert any("search service errors reached the researcher (http_503×" in r for r in run.result.reasons)
    assert len(run.meta["sources"]) >= 3
