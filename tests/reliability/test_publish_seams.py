"""The small seams the publisher shares with the rest (issue 16): one run URL, the GitHub target read through
`environment`, and a synthesis cost that never lets a damaged number through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from research_dispatch.config.settings import load_settings
from research_dispatch.core.errors import BadInput, MissingKey
from research_dispatch.core.ghactions import run_url, safe_run_url
from research_dispatch.publish.messages import synthesis_cost
from research_dispatch.publish.pulls import require_target

reliability = pytest.mark.reliability
RUNNER = {"GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "acme/review", "GITHUB_RUN_ID": "42"}


def test_one_run_url_for_front_matter_trailers_and_body() -> None:
    assert run_url(RUNNER) == "https://github.example/acme/review/actions/runs/42"
    assert run_url({**RUNNER, "GITHUB_SERVER_URL": ""}) == "https://github.com/acme/review/actions/runs/42"
    assert run_url({}) is None  # outside Actions
    assert run_url({**RUNNER, "GITHUB_RUN_ID": "4 2"}) is None
    assert run_url({**RUNNER, "GITHUB_RUN_ID": "²"}) is None  # a digit to str.isdigit, not a run id
    assert run_url({**RUNNER, "GITHUB_REPOSITORY": "acme/review\nInjected: yes"}) is None


@given(st.dictionaries(st.sampled_from(sorted(RUNNER)), st.text(max_size=40)))
def test_a_run_url_is_one_safe_token_or_none(env: dict[str, str]) -> None:
    url = run_url(env)
    assert url is None or (safe_run_url(url) == url and not any(ch.isspace() for ch in url))


@reliability(area="input", case="publish with a GITHUB_TOKEN holding a newline, or a GITHUB_API_URL in clear text, "
                                 "with a user:password or not http(s)",
             expect="bad input naming the variable, by the same rules as every other key and base URL "
                    "(`environment`), before any request")
def test_the_github_target_is_read_through_environment() -> None:
    good = {"GITHUB_TOKEN": "ghp_test", "GITHUB_REPOSITORY": "acme/review"}
    target = require_target(good)
    assert (target.api_url, target.repository, target.token) == ("https://api.github.com", "acme/review", "ghp_test")
    with pytest.raises(MissingKey):
        require_target({"GITHUB_REPOSITORY": "acme/review"})
    with pytest.raises(BadInput) as caught:
        require_target({**good, "GITHUB_TOKEN": "ghp_test\n"})  # a pasted newline: refused, not stripped
    assert str(caught.value).startswith("environment: GITHUB_TOKEN:")
    for url in ("http://api.github.example", "https://user:pw@api.github.example", "ftp://x"):
        with pytest.raises(BadInput) as caught:
            require_target({**good, "GITHUB_API_URL": url})
        assert str(caught.value).startswith("environment: GITHUB_API_URL:"), url
    assert require_target({**good, "GITHUB_API_URL": "http://127.0.0.1:9/api/"}).api_url == "http://127.0.0.1:9/api"


@reliability(area="hostile", case="a synthesis call log (e.g. from a CI artifact) with NaN, Infinity, negative, "
                                   "string or bool costs and damaged lines",
             expect="the PR's synthesis cost counts only finite, non-negative numbers; never `$nan`, never a "
                    "negative cost hiding money")
def test_synthesis_cost_counts_only_finite_non_negative_numbers(repo: Path) -> None:
    settings = load_settings(repo)
    path = repo / settings.synthesis_calls_relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"cost_usd": 0.25}), json.dumps({"cost_usd": 1}), json.dumps({"purpose": "judge"}),
             '{"cost_usd": NaN}', '{"cost_usd": Infinity}', json.dumps({"cost_usd": -5.0}),
             json.dumps({"cost_usd": "9.99"}), json.dumps({"cost_usd": True}), json.dumps([1.0]), "{damaged"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert synthesis_cost(repo, settings) == 1.25
    path.write_bytes(b"\xff\xfe not utf-8")
    assert synthesis_cost(repo, settings) == 0.0
