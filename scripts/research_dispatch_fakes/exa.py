"""A fake Exa search API that the real `exa-py` client can talk to over HTTP.

It follows Exa's published API description (the OpenAPI document of `exa-labs/openapi-spec`,
`exa-openapi-spec.yaml`, and Exa's error-code reference):

* Authentication: an `x-api-key` header, or `Authorization: Bearer <key>` (both schemes are declared);
  without a non-empty key, 401.
* `POST /search`: `query` (required string); `type` one of the search types; `numResults` an integer
  1–100; `includeDomains` / `excludeDomains` lists of strings; `includeText` / `excludeText` at most one
  string of at most five words; `category` from the enum, where `company` and `people` refuse date,
  text and `excludeDomains` filters; `contents` per `ContentsRequest` (`text` a boolean or an object
  with an integer `maxCharacters` and a boolean `includeHtmlTags`; `highlights` a boolean or an object
  with `maxCharacters` >= 1; `summary` an object). Results are `ResultWithContent`: `id`, `url`,
  `title`, `publishedDate`, `author`, `score`, and `text` / `highlights` / `highlightScores` as asked.
* `POST /contents`: `urls` (required, a non-empty list of http(s) URLs, else 400 `INVALID_URLS`) and
  the same `ContentsRequest` options. URL-level failures do not fail the request: each URL gets an
  entry in `statuses` (`success`, or `error` with `tag` `CRAWL_NOT_FOUND` and `httpStatusCode` 404).
* Errors: the HTTP status with a JSON body `{"requestId", "error", "tag"}` (400 `INVALID_REQUEST_BODY`,
  401 `INVALID_API_KEY`, 402 `NO_MORE_CREDITS`, 429 `RATE_LIMIT_EXCEEDED`, ...). exa-py raises
  `ValueError("Request failed with status code N: <body>")` for any of them.

The index is the bundled corpus (`fake/corpus`), ranked by its own term-frequency score (Exa is a
different index from Tavily: the same pages come back in another order). arXiv papers are indexed as
`https://arxiv.org/pdf/<id>`, as Exa's own examples show them; `/contents` accepts either form.

Scenarios script failures, like the fake Tavily's: `FakeExa(scenario=...)`, `set_scenario`, or
`POST /__fake__/scenario`::

    {"latency_s": 0.0,
     "realism": {"rate": 0.3, "seed": 7},   # `/contents` reads arXiv pages as PDF text (`realism`)
     "rules": [{"endpoint": "search" | "contents" | "*", "on_call": 2 | "calls": [1, 3], "times": 1,
                "status": 429, "message": "...", "tag": "...", "delay_s": 1.5, "empty": true,
                "fail_urls": ["https://..."]}]}

This module imports nothing from the product on purpose (see `research_dispatch_fakes`).
"""

from __future__ import annotations

import copy
import math
import re
import threading
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from research_dispatch_fakes.corpus import Page, load_pages, normalize_url
from research_dispatch_fakes.faults import FaultRule, non_negative, parse_rules
from research_dispatch_fakes.http import FakeRequest, FakeResponse, FakeServer
from research_dispatch_fakes.realism import Realism, pdf_artefacts
from research_dispatch_fakes.tavily import tokenize

SEARCH_TYPES = ("neural", "fast", "auto", "deep", "deep-reasoning", "instant", "deep-lite", "lite")
CATEGORIES = ("company", "research paper", "news", "pdf", "github", "personal site", "people", "financial report")
MAX_NUM_RESULTS = 100
DEFAULT_NUM_RESULTS = 10
DEFAULT_TEXT_CHARS = 10_000
DEFAULT_HIGHLIGHT_CHARS = 600
RESTRICTED_CATEGORIES = ("company", "people")
RESTRICTED_FILTERS = ("startPublishedDate", "endPublishedDate", "startCrawlDate", "endCrawlDate", "includeText",
                      "excludeText", "excludeDomains")
_TAGS = {400: "INVALID_REQUEST_BODY", 401: "INVALID_API_KEY", 402: "NO_MORE_CREDITS", 403: "ACCESS_DENIED",
         404: "NOT_FOUND", 422: "UNPROCESSABLE", 429: "RATE_LIMIT_EXCEEDED", 500: "INTERNAL_ERROR",
         502: "BAD_GATEWAY", 503: "SERVICE_UNAVAILABLE"}
_MESSAGES = {401: "Invalid API key", 402: "You have run out of credits", 429: "Rate limit exceeded",
             500: "Internal server error", 503: "Service temporarily unavailable"}
_SCENARIO_KEYS = {"latency_s", "rules", "realism"}
_ENDPOINTS = ("search", "contents")
_ARXIV = re.compile(r"^https://arxiv\.org/abs/(.+)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def exa_url(url: str) -> str:
    """How Exa's index names a page: arXiv papers by their PDF URL."""
    match = _ARXIV.match(url)
    return f"https://arxiv.org/pdf/{match.group(1)}" if match else url


def _key(url: str) -> str:
    """Either form of a page's URL (abs or pdf, with or without `.pdf`) finds the page."""
    url = re.sub(r"^(https?://arxiv\.org/)pdf/([^/?#]+?)(\.pdf)?$", r"\1abs/\2", url.strip())
    return normalize_url(url)


class _Invalid(Exception):
    """A 400 with Exa's error body."""

    def __init__(self, message: str, tag: str = "INVALID_REQUEST_BODY") -> None:
        super().__init__(message)
        self.tag = tag


def _parse_scenario(raw: Any) -> tuple[dict[str, Any], float, list[FaultRule]]:
    raw = {} if raw is None else raw
    if not isinstance(raw, dict) or set(raw) - _SCENARIO_KEYS:
        raise ValueError(f"scenario must be an object with keys among {sorted(_SCENARIO_KEYS)}")
    rules = parse_rules(raw.get("rules", []), endpoints=_ENDPOINTS, normalise_url=_key, with_tag=True)
    Realism.parse(raw.get("realism"))
    return copy.deepcopy(raw), non_negative(raw.get("latency_s", 0.0), "latency_s"), rules


class FakeExa(FakeServer):
    """Fake `api.exa.ai`: pass `base_url` as `Exa(base_url=...)`."""

    def __init__(self, scenario: dict[str, Any] | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        parsed = _parse_scenario(scenario)
        super().__init__(host, port)
        self._state = threading.Lock()
        self._pages = [p for p in load_pages() if not p.hostile]
        self._by_key = {_key(p.url): p for p in self._pages}
        self._df: Counter[str] = Counter()
        self._tf: dict[str, Counter[str]] = {}
        for page in self._pages:
            tf = Counter(tokenize(f"{page.title} {page.synopsis} {page.content}"))
            self._tf[page.url] = tf
            self._df.update(tf.keys())
        self._raw, self._latency, self._rules = parsed
        self._counts = dict.fromkeys(_ENDPOINTS, 0)
        self._sequence = 0
        self.calls: list[tuple[str, Any]] = []

    def __enter__(self) -> FakeExa:
        self.start()
        return self

    @property
    def base_url(self) -> str:
        """What `Exa(base_url=...)` needs: the root URL, no trailing slash."""
        return self.root_url

    def set_scenario(self, scenario: dict[str, Any] | None) -> None:
        parsed = _parse_scenario(scenario)
        with self._state:
            self._raw, self._latency, self._rules = parsed
            self._counts = dict.fromkeys(_ENDPOINTS, 0)

    # -- dispatch --------------------------------------------------------------------------------
    def handle(self, request: FakeRequest) -> FakeResponse:
        path = request.path.rstrip("/") or "/"
        if path == "/__fake__/scenario" and request.method == "POST":
            try:
                self.set_scenario(request.json())
            except ValueError as exc:
                return self._error(400, f"invalid scenario: {exc}", "INVALID_REQUEST_BODY")
            return FakeResponse.json({"ok": True})
        if path == "/__fake__/reset" and request.method == "POST":
            self.set_scenario(None)
            with self._state:
                self.calls = []
            return FakeResponse.json({"ok": True})
        if path not in ("/search", "/contents") or request.method != "POST":
            return self._error(404, f"Cannot {request.method} {request.path}", "NOT_FOUND")
        endpoint = path[1:]
        with self._state:
            self._counts[endpoint] += 1
            call = self._counts[endpoint]
            self._sequence += 1
            request_id = f"{self._sequence:032x}"
            try:
                body = request.json()
            except (ValueError, UnicodeDecodeError):
                body = None
            self.calls.append((endpoint, copy.deepcopy(body)))
            authorized = bool(_key_of(request.headers))
            effects = [r for r in self._rules if authorized and r.matches(endpoint, call)]
            for rule in effects:
                rule.fired += 1
            latency = self._latency
        delay = latency + sum(r.delay_s for r in effects)
        if not authorized:
            return self._error(401, _MESSAGES[401], _TAGS[401], request_id, delay)
        failing = next((r for r in effects if r.status is not None), None)
        if failing is not None and failing.status is not None:
            status = failing.status
            return self._error(status, failing.message or _MESSAGES.get(status, "Request failed"),
                               failing.tag or _TAGS.get(status, "ERROR"), request_id, delay)
        empty = any(r.empty for r in effects)
        fail_urls = frozenset().union(*(r.fail_urls for r in effects)) if effects else frozenset()
        try:
            if not isinstance(body, dict):
                raise _Invalid("Request body must be a JSON object")
            payload = self._search(body, empty) if endpoint == "search" else self._contents(body, empty, fail_urls)
        except _Invalid as exc:
            return self._error(400, str(exc), exc.tag, request_id, delay)
        payload["requestId"] = request_id
        return FakeResponse.json(payload, delay_s=delay)

    @staticmethod
    def _error(status: int, message: str, tag: str, request_id: str = "0" * 32, delay_s: float = 0.0) -> FakeResponse:
        return FakeResponse.json({"requestId": request_id, "error": message, "tag": tag}, status=status,
                                 delay_s=delay_s)

    # -- /search ---------------------------------------------------------------------------------
    def _search(self, body: dict[str, Any], empty: bool) -> dict[str, Any]:
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            raise _Invalid("query is required and must be a non-empty string")
        kind = body.get("type", "auto")
        if kind not in SEARCH_TYPES:
            raise _Invalid(f"type must be one of {', '.join(SEARCH_TYPES)}")
        count = body.get("numResults", DEFAULT_NUM_RESULTS)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_NUM_RESULTS:
            raise _Invalid(f"numResults must be an integer between 1 and {MAX_NUM_RESULTS}")
        include = _string_list(body, "includeDomains")
        exclude = _string_list(body, "excludeDomains")
        for name in ("includeText", "excludeText"):
            phrases = _string_list(body, name)
            if len(phrases) > 1 or any(len(p.split()) > 5 for p in phrases):
                raise _Invalid(f"{name} supports only 1 string of up to 5 words")
        category = body.get("category")
        if category is not None and category not in CATEGORIES:
            raise _Invalid(f"category must be one of {', '.join(CATEGORIES)}")
        if category in RESTRICTED_CATEGORIES:
            used = [f for f in RESTRICTED_FILTERS if body.get(f)]
            if used:
                raise _Invalid(f"category {category!r} does not support {', '.join(used)}", "INVALID_REQUEST")
        contents = _contents_options(body.get("contents"), "contents")
        terms = sorted(set(tokenize(query)))
        ranked: list[tuple[float, Page]] = []
        if not empty:
            for page in self._pages:
                host = (urlsplit(page.url).hostname or "").lower()
                if include and not _host_in(host, include):
                    continue
                if exclude and _host_in(host, exclude):
                    continue
                score = self._score(page, terms)
                if score > 0:
                    ranked.append((score, page))
            ranked.sort(key=lambda sp: (-sp[0], sp[1].url))
        top = max((s for s, _ in ranked), default=1.0)
        results = [self._result(page, round(score / top * 0.5, 6), contents, query)
                   for score, page in ranked[:count]]
        return {"resolvedSearchType": "neural", "results": results,
                "costDollars": {"total": 0.005 + 0.001 * len(results)}}

    def _score(self, page: Page, terms: list[str]) -> float:
        """Sub-linear term frequency times inverse document frequency: a ranking unlike Tavily's BM25."""
        tf = self._tf[page.url]
        n = len(self._pages)
        return sum((1 + math.log(tf[t])) * math.log(n / self._df[t]) for t in terms if tf.get(t))

    # -- /contents -------------------------------------------------------------------------------
    def _contents(self, body: dict[str, Any], empty: bool, fail_urls: frozenset[str]) -> dict[str, Any]:
        urls = body.get("urls", body.get("ids"))
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            raise _Invalid("urls is required and must be a non-empty list of strings")
        for url in urls:
            parts = urlsplit(url.strip())
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise _Invalid(f"Invalid URL: {url[:200]}", "INVALID_URLS")
        options = {k: v for k, v in body.items() if k not in ("urls", "ids")}
        contents = _contents_options(options, "body") or {"text": {}}
        results: list[dict[str, Any]] = []
        statuses: list[dict[str, Any]] = []
        for url in urls:
            page = self._by_key.get(_key(url))
            if page is None or empty or _key(url) in fail_urls:
                statuses.append({"id": url, "status": "error",
                                 "error": {"tag": "CRAWL_NOT_FOUND", "httpStatusCode": 404}})
                continue
            statuses.append({"id": url, "status": "success"})
            result = self._result(page, None, contents, "", read_at=url)
            if "text" in result:  # a page read in full is read from its PDF, with the PDF's artefacts
                result["text"] = pdf_artefacts(result["text"], Realism.parse(self._raw.get("realism")), url)
            result["id"] = url
            results.append(result)
        return {"results": results, "statuses": statuses, "costDollars": {"total": 0.001 * len(results)}}

    def _result(self, page: Page, score: float | None, contents: dict[str, Any] | None, query: str, *,
                read_at: str | None = None) -> dict[str, Any]:
        """One result; its text is the page as read at `read_at` (a /contents URL: an arXiv abstract page at
        `/abs/`), else as indexed (arXiv papers by their PDF: the full text)."""
        url = exa_url(page.url)
        result: dict[str, Any] = {"id": url, "url": url, "title": page.title,
                                  "publishedDate": f"{page.published}T00:00:00.000Z" if page.published else None,
                                  "author": None}
        if score is not None:
            result["score"] = score
        if contents is None:
            return result
        text_option = contents.get("text")
        if text_option:
            limit = text_option.get("maxCharacters", DEFAULT_TEXT_CHARS) if isinstance(text_option, dict) \
                else DEFAULT_TEXT_CHARS
            result["text"] = page.text_at(read_at or url)[:limit]
        highlights = contents.get("highlights")
        if highlights:
            limit = highlights.get("maxCharacters", DEFAULT_HIGHLIGHT_CHARS) if isinstance(highlights, dict) \
                else DEFAULT_HIGHLIGHT_CHARS
            picked = _highlights(page, query or page.title, limit)
            result["highlights"] = picked
            result["highlightScores"] = [round(0.5 - 0.01 * i, 4) for i in range(len(picked))]
        if contents.get("summary") is not None:
            result["summary"] = page.synopsis
        return result


def _key_of(headers: dict[str, str]) -> str:
    key = headers.get("x-api-key", "").strip()
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _string_list(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Invalid(f"{name} must be an array of strings")
    return value


def _host_in(host: str, domains: list[str]) -> bool:
    names = [d.strip().lower().split("/", 1)[0] for d in domains]
    return any(host == d or host.endswith("." + d) for d in names if d)


def _contents_options(raw: Any, where: str) -> dict[str, Any] | None:
    """`ContentsRequest` validation: the shapes the published schema allows, nothing else."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _Invalid(f"{where} must be an object")
    text = raw.get("text")
    if text is not None:
        if isinstance(text, dict):
            chars = text.get("maxCharacters")
            if chars is not None and (isinstance(chars, bool) or not isinstance(chars, int) or chars < 1):
                raise _Invalid("text.maxCharacters must be a positive integer")
            if not isinstance(text.get("includeHtmlTags", False), bool):
                raise _Invalid("text.includeHtmlTags must be a boolean")
        elif not isinstance(text, bool):
            raise _Invalid("text must be a boolean or an object")
    highlights = raw.get("highlights")
    if highlights is not None:
        if isinstance(highlights, dict):
            chars = highlights.get("maxCharacters")
            if chars is not None and (isinstance(chars, bool) or not isinstance(chars, int) or chars < 1):
                raise _Invalid("highlights.maxCharacters must be an integer >= 1")
        elif not isinstance(highlights, bool):
            raise _Invalid("highlights must be a boolean or an object")
    summary = raw.get("summary")
    if summary is not None and not isinstance(summary, dict | bool):
        raise _Invalid("summary must be an object")
    return raw


def _highlights(page: Page, query: str, limit: int) -> list[str]:
    """The page's sentences richest in the query's terms, within `limit` characters in all."""
    terms = set(tokenize(query))
    sentences = [s.strip() for s in _SENTENCE.split(f"{page.synopsis} {' '.join(page.key_points)}") if s.strip()]
    scored = sorted(enumerate(sentences), key=lambda item: (-len(terms & set(tokenize(item[1]))), item[0]))
    picked: list[str] = []
    used = 0
    for _, sentence in scored:
        if used + len(sentence) > limit and picked:
            break
        picked.append(sentence[:limit])
        used += len(sentence)
    return picked


__all__ = ["FakeExa", "exa_url"]
