"""The fake Exa server, proven with the real `exa-py` client, and as strict as Exa's published API.

Each refusal below is a rule of Exa's OpenAPI description (`exa-openapi-spec.yaml`) or its error-code
reference; the fake must refuse what the real service refuses, with Exa's error body
`{"requestId", "error", "tag"}`, which exa-py surfaces as `ValueError("Request failed with status code N: ...")`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from exa_py import Exa

from research_dispatch_fakes.exa import FakeExa

KEY = "exa-test-key-0123456789"


@pytest.fixture
def exa_server() -> Iterator[FakeExa]:
    with FakeExa() as server:
        yield server


@pytest.fixture
def client(exa_server: FakeExa) -> Exa:
    return Exa(api_key=KEY, base_url=exa_server.base_url)


def post(server: FakeExa, path: str, body: Any, headers: dict[str, str] | None = None) -> requests.Response:
    return requests.post(server.base_url + path, data=json.dumps(body),
                         headers={"x-api-key": KEY, "Content-Type": "application/json", **(headers or {})}, timeout=10)


def refused(response: requests.Response, status: int, tag: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"requestId", "error", "tag"} and body["tag"] == tag and body["error"]
    return body


def test_search_with_highlights_through_exa_py(client: Exa, exa_server: FakeExa) -> None:
    response = client.search("DiLoCo low communication training", num_results=3,
                             contents={"highlights": {"max_characters": 300}})
    assert len(response.results) == 3
    first = response.results[0]
    assert first.url.startswith("https://") and first.title and first.highlights
    assert sum(len(h) for h in first.highlights) <= 300 + 200  # one sentence may run over the budget
    assert exa_server.calls[0] == ("search", {"query": "DiLoCo low communication training", "numResults": 3,
                                              "contents": {"highlights": {"maxCharacters": 300}}})
    request = exa_server.requests_to("/search")[0]
    assert request.headers["x-api-key"] == KEY


def test_arxiv_pages_are_indexed_by_their_pdf_url(client: Exa) -> None:
    urls = [r.url for r in client.search("DiLoCo", num_results=10, contents=False).results]
    assert any(u.startswith("https://arxiv.org/pdf/") for u in urls)
    assert not any(u.startswith("https://arxiv.org/abs/") for u in urls)


def test_contents_returns_text_and_per_url_statuses(client: Exa) -> None:
    url = client.search("DiLoCo", num_results=1, contents=False).results[0].url
    abs_form = url.replace("/pdf/", "/abs/")
    response = client.get_contents([url, abs_form, "https://unknown.example.org/page"],
                                   text={"max_characters": 500})
    assert [len(r.text) for r in response.results] == [500, 500]
    assert [(s.id, s.status) for s in response.statuses] == [(url, "success"), (abs_form, "success"),
                                                             ("https://unknown.example.org/page", "error")]
    assert response.statuses[2].error.tag == "CRAWL_NOT_FOUND"
    assert response.statuses[2].error.http_status_code == 404


def test_bearer_authorization_is_accepted_too(exa_server: FakeExa) -> None:
    response = requests.post(exa_server.base_url + "/search", json={"query": "DiLoCo"},
                             headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert response.status_code == 200 and response.json()["results"]


@pytest.mark.parametrize("headers", [{"x-api-key": ""}, {"x-api-key": "", "Authorization": "Bearer "}])
def test_no_key_is_401(exa_server: FakeExa, headers: dict[str, str]) -> None:
    refused(post(exa_server, "/search", {"query": "x"}, headers), 401, "INVALID_API_KEY")


def test_exa_py_surfaces_an_error_status_as_value_error(client: Exa, exa_server: FakeExa) -> None:
    exa_server.set_scenario({"rules": [{"status": 402}]})
    with pytest.raises(ValueError, match=r"^Request failed with status code 402: .*NO_MORE_CREDITS"):
        client.search("DiLoCo")


@pytest.mark.parametrize(("body", "why"), [
    ({}, "query is required"),
    ({"query": ""}, "query is required"),
    ({"query": 3}, "query is required"),
    ({"query": "x", "numResults": 0}, "numResults"),
    ({"query": "x", "numResults": 101}, "numResults"),
    ({"query": "x", "numResults": True}, "numResults"),
    ({"query": "x", "type": "semantic"}, "type must be one of"),
    ({"query": "x", "includeDomains": "arxiv.org"}, "includeDomains must be an array"),
    ({"query": "x", "excludeDomains": [1]}, "excludeDomains must be an array"),
    ({"query": "x", "includeText": ["a", "b"]}, "only 1 string"),
    ({"query": "x", "excludeText": ["one two three four five six"]}, "up to 5 words"),
    ({"query": "x", "category": "blog"}, "category must be one of"),
    ({"query": "x", "contents": {"text": "yes"}}, "text must be a boolean or an object"),
    ({"query": "x", "contents": {"text": {"maxCharacters": 0}}}, "maxCharacters"),
    ({"query": "x", "contents": {"highlights": {"maxCharacters": 0}}}, "highlights.maxCharacters"),
    ({"query": "x", "contents": []}, "contents must be an object"),
])
def test_search_refuses_what_the_schema_refuses(exa_server: FakeExa, body: dict[str, Any], why: str) -> None:
    assert why in refused(post(exa_server, "/search", body), 400, "INVALID_REQUEST_BODY")["error"]


def test_company_category_refuses_unsupported_filters(exa_server: FakeExa) -> None:
    body = {"query": "x", "category": "company", "excludeDomains": ["a.com"]}
    refused(post(exa_server, "/search", body), 400, "INVALID_REQUEST")


@pytest.mark.parametrize(("body", "tag"), [
    ({}, "INVALID_REQUEST_BODY"),
    ({"urls": []}, "INVALID_REQUEST_BODY"),
    ({"urls": "https://arxiv.org/abs/2311.08105"}, "INVALID_REQUEST_BODY"),
    ({"urls": ["arxiv.org/abs/2311.08105"]}, "INVALID_URLS"),
    ({"urls": ["ftp://arxiv.org/x"]}, "INVALID_URLS"),
])
def test_contents_refuses_bad_urls(exa_server: FakeExa, body: dict[str, Any], tag: str) -> None:
    refused(post(exa_server, "/contents", body), 400, tag)


def test_body_must_be_a_json_object(exa_server: FakeExa) -> None:
    refused(post(exa_server, "/search", ["query"]), 400, "INVALID_REQUEST_BODY")


def test_only_post_on_known_paths(exa_server: FakeExa) -> None:
    assert requests.get(exa_server.base_url + "/search", headers={"x-api-key": KEY}, timeout=10).status_code == 404
    refused(post(exa_server, "/answerz", {"query": "x"}), 404, "NOT_FOUND")


def test_scenario_rules_script_failures(client: Exa, exa_server: FakeExa) -> None:
    exa_server.set_scenario({"rules": [{"endpoint": "search", "on_call": 1, "status": 429},
                                       {"endpoint": "contents", "fail_urls": ["https://arxiv.org/abs/2311.08105"]}]})
    with pytest.raises(ValueError, match="status code 429"):
        client.search("DiLoCo")
    assert client.search("DiLoCo", num_results=1, contents=False).results
    response = client.get_contents(["https://arxiv.org/pdf/2311.08105"], text=True)
    assert response.results == [] and response.statuses[0].status == "error"
    with pytest.raises(ValueError):
        exa_server.set_scenario({"rules": [{"endpoint": "answer"}]})
