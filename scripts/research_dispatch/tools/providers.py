"""Search providers: Tavily and Exa behind one small interface, each through its official client.

A provider answers two questions — which pages match a query (`search`) and what a page says
(`extract`) — and raises `SearchServiceError` with a stable `kind` for every failure, so the toolset
(`search.SearchTools`) can merge several providers into one source registry and report their faults
alike. Every request is read under a `CallBounds` (whole-call deadline, size cap, interrupt) through
`search_http.BoundedSession`.

Wire facts:
* tavily-python takes the session (`TavilyClient(session=...)`); its extract `timeout` travels in the
  body, where Tavily accepts 1–60 s only (400 otherwise), and is also its HTTP read timeout, so the
  value is clamped to 1–60 s and the per-read timeout gets a margin above it.
* exa-py 2.28 sends with module-level `requests.post` (a fresh session per call, no way to hand it an
  adapter). `_BoundedExa` keeps everything of the official client — argument validation, camelCase
  bodies, the `x-api-key` header, response parsing into `Result` objects, its `ValueError` for an HTTP
  error — and only routes the POST through the bounded session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import requests
from exa_py import Exa
from exa_py.api import ExaJSONEncoder  # type: ignore[attr-defined]
from tavily import TavilyClient
from tavily import errors as tavily_errors

from research_dispatch.config.settings import SearchPriceSettings
from research_dispatch.core import sanitize
from research_dispatch.core.bounds import CallBounds
from research_dispatch.core.errors import CallTimedOut, Interrupted, ResponseTooLarge, SearchError
from research_dispatch.core.search_http import BoundedSession

TAVILY_EXTRACT_TIMEOUT_RANGE = (1.0, 60.0)  # Tavily refuses an extract `timeout` outside it (HTTP 400)
READ_MARGIN_S = 5.0  # the client waits a little longer than the server was told to take
EXA_PAGE_CHARACTERS = 20_000  # text asked of Exa per page read (the toolset keeps its best passages)
EXA_SNIPPET_CHARACTERS = 600


class SearchServiceError(SearchError):
    """A failed request to a search service, with a stable `kind` for the leg's status reasons."""

    def __init__(self, message: str, *, kind: str, status: int | None = None, retryable: bool = False,
                 fatal: bool = False) -> None:
        super().__init__(message, status=status, retryable=retryable)
        self.kind = kind
        self.fatal = fatal


@dataclass(frozen=True)
class Hit:
    """One search result: a lead to a page."""

    url: str
    title: str
    snippet: str


@dataclass
class Pages:
    """What an extract returned: page text by URL as asked, and why the others failed."""

    texts: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchQuery:
    query: str
    max_results: int
    depth: str
    include_domains: tuple[str, ...]
    exclude_domains: tuple[str, ...]


class SearchProvider(Protocol):
    name: str

    def search(self, request: SearchQuery, *, bounds: CallBounds, timeout_s: float) -> list[Hit]: ...

    def extract(self, urls: list[str], *, bounds: CallBounds, timeout_s: float) -> Pages: ...

    def close(self) -> None:
        """Release the provider's connections. Its owner calls it when the leg ends: a leg is one of many
        in a `run` (and a command one of many in a process), so a kept-alive socket per leg would pile up
        until the process exits."""


def _bound_error(exc: Exception, provider: str) -> SearchServiceError | None:
    if isinstance(exc, Interrupted):
        return SearchServiceError(f"{provider}: interrupted", kind="interrupted", fatal=True)
    if isinstance(exc, CallTimedOut):
        return SearchServiceError(f"{provider} search timed out (no complete answer within the call's deadline)",
                                  kind="timeout", retryable=True)
    if isinstance(exc, ResponseTooLarge):
        return SearchServiceError(f"{provider} answered with an oversized response; reading stopped",
                                  kind="response_too_large")
    return None


def _transport_error(exc: Exception, provider: str) -> SearchServiceError | None:
    if isinstance(exc, requests.Timeout):
        return SearchServiceError(f"{provider} search timed out", kind="timeout", retryable=True)
    if isinstance(exc, requests.HTTPError):
        status = exc.response.status_code if exc.response is not None else None
        return SearchServiceError(f"{provider} service error (HTTP {status})", kind=f"http_{status}", status=status,
                                  retryable=status is None or status >= 500 or status == 429)
    if isinstance(exc, requests.ConnectionError):
        return SearchServiceError(f"cannot reach the {provider} service", kind="unreachable", retryable=True)
    return None


def _translated(provider: str, translate: Callable[[Exception], SearchServiceError], call: Callable[[], Any]) -> Any:
    """One client call; whatever it raises leaves as a `SearchServiceError`.

    Why catch everything: the official clients raise unrelated types (tavily-python its own errors and
    requests' exceptions, exa-py a bare `ValueError` for an HTTP error), and the toolset needs one typed
    error with a stable `kind` for every fault. Our own errors (already typed, or raised by the bounded
    session: deadline, size cap, interrupt) are mapped here alike; the provider's `translate` maps only
    what its client raises.
    """
    try:
        return call()
    except SearchServiceError:
        raise
    except Exception as exc:
        raise (_bound_error(exc, provider) or translate(exc)) from None


# ----------------------------------------------------------------------------------------------
# Tavily


@dataclass(frozen=True)
class SearchCredits:
    """What a search key may still spend this billing cycle, in the service's credits (Tavily's
    `GET /usage`: the key's own usage and limit, and the plan's and pay-as-you-go's of the account)."""

    key_usage: int
    key_limit: int | None  # None: the key has no limit of its own
    plan: str
    plan_usage: int | None
    plan_limit: int | None
    paygo_usage: int | None = None
    paygo_limit: int | None = None

    @property
    def remaining(self) -> int | None:
        """Credits left: the tighter of the key's limit and the account's (plan plus pay-as-you-go); None
        when neither has a limit."""
        left = []
        if self.key_limit is not None:
            left.append(self.key_limit - self.key_usage)
        if self.plan_limit is not None and self.plan_usage is not None:
            paygo = (self.paygo_limit - (self.paygo_usage or 0)) if self.paygo_limit is not None else 0
            left.append(self.plan_limit - self.plan_usage + max(0, paygo))
        return max(0, min(left)) if left else None


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SearchServiceError(f"Tavily's usage record has {what} {str(value)[:40]!r}, not a count",
                                 kind="malformed_response")
    return value


class TavilyProvider:
    name = "tavily"

    def __init__(self, *, api_key: str, base_url: str, client: Any = None) -> None:
        self.session = BoundedSession()
        self._key = api_key
        self._base_url = base_url.rstrip("/")
        if client is None:
            client = TavilyClient(api_key=api_key, api_base_url=base_url.rstrip("/"), session=self.session)
            # tavily-python only sets headers a caller's session lacks; ours has none of its own.
        self._client = client

    def close(self) -> None:
        self.session.close()

    def search(self, request: SearchQuery, *, bounds: CallBounds, timeout_s: float) -> list[Hit]:
        with self.session.within(bounds, "Tavily search"):
            payload = _translated("Tavily", self.translate, lambda: self._client.search(
                query=request.query, search_depth=request.depth, max_results=request.max_results,
                include_domains=list(request.include_domains) or None,
                exclude_domains=list(request.exclude_domains) or None, timeout=timeout_s))
        results = (payload or {}).get("results") if isinstance(payload, dict) else None
        return [Hit(url=str(r["url"]), title=str(r.get("title") or ""), snippet=str(r.get("content") or ""))
                for r in results or [] if isinstance(r, dict) and r.get("url")]

    def extract(self, urls: list[str], *, bounds: CallBounds, timeout_s: float) -> Pages:
        low, high = TAVILY_EXTRACT_TIMEOUT_RANGE
        server_timeout = min(high, max(low, timeout_s))
        with self.session.within(bounds, "Tavily extract", read_margin_s=READ_MARGIN_S):
            payload = _translated("Tavily", self.translate, lambda: self._client.extract(
                urls=urls, extract_depth="basic", format="markdown", timeout=server_timeout))
        pages = Pages()
        body = payload if isinstance(payload, dict) else {}
        for result in body.get("results") or []:
            if isinstance(result, dict) and result.get("url") and str(result.get("raw_content") or "").strip():
                pages.texts[str(result["url"])] = str(result["raw_content"])
        for result in body.get("failed_results") or []:
            if isinstance(result, dict) and result.get("url"):
                pages.failed[str(result["url"])] = str(result.get("error") or "failed")
        return pages

    def usage(self, *, bounds: CallBounds, timeout_s: float) -> SearchCredits:
        """Tavily's `GET /usage` (api-facts §3.0): the key checked and its credits read without spending
        one. tavily-python has no method for it, so it goes on this provider's bounded session with the
        same bearer key; a refused key is `key_rejected`, as it is for a search."""

        def get() -> Any:
            response = self.session.get(f"{self._base_url}/usage", timeout=timeout_s,
                                        headers={"Authorization": f"Bearer {self._key}"})
            if response.status_code == 401:
                raise SearchServiceError("search key rejected (HTTP 401)", kind="key_rejected", status=401,
                                         fatal=True)
            response.raise_for_status()
            return response.json()

        with self.session.within(bounds, "Tavily usage"):
            payload = _translated("Tavily", self.translate, get)
        key = payload.get("key") if isinstance(payload, dict) else None
        account = payload.get("account") if isinstance(payload, dict) else None
        if not isinstance(key, dict) or not isinstance(account, dict):
            raise SearchServiceError("Tavily's usage record has no `key` and `account` objects",
                                     kind="malformed_response")
        return SearchCredits(key_usage=_count(key.get("usage"), "key.usage") or 0,
                             key_limit=_count(key.get("limit"), "key.limit"),
                             plan=sanitize.one_line(str(account.get("current_plan") or "unknown"), 60),
                             plan_usage=_count(account.get("plan_usage"), "account.plan_usage"),
                             plan_limit=_count(account.get("plan_limit"), "account.plan_limit"),
                             paygo_usage=_count(account.get("paygo_usage"), "account.paygo_usage"),
                             paygo_limit=_count(account.get("paygo_limit"), "account.paygo_limit"))

    @staticmethod
    def translate(exc: Exception) -> SearchServiceError:
        def detail() -> str:
            return sanitize.one_line(str(exc), 160)

        if isinstance(exc, tavily_errors.UsageLimitExceededError):
            return SearchServiceError(f"search rate limit (HTTP 429): {detail()}", kind="rate_limit", status=429,
                                      retryable=True)
        if isinstance(exc, tavily_errors.ForbiddenError):  # the client does not say which of 403/432/433
            return SearchServiceError(f"search plan or usage limit, or access forbidden (HTTP 403/432/433): "
                                      f"{detail()}", kind="plan_limit", status=403, fatal=True)
        if isinstance(exc, tavily_errors.InvalidAPIKeyError):
            return SearchServiceError("search key rejected (HTTP 401)", kind="key_rejected", status=401, fatal=True)
        if isinstance(exc, tavily_errors.BadRequestError):
            return SearchServiceError(f"search rejected the request (HTTP 400): {detail()}", kind="bad_request",
                                      status=400)
        if isinstance(exc, tavily_errors.TimeoutError):
            return SearchServiceError("search timed out", kind="timeout", retryable=True)
        transport = _transport_error(exc, "search")
        if transport is not None:
            return transport
        if isinstance(exc, ValueError):  # a 200 whose body is not JSON
            return SearchServiceError("search service returned a malformed response", kind="malformed_response",
                                      retryable=True)
        return SearchServiceError(f"search failed: {type(exc).__name__}", kind="failed")


# ----------------------------------------------------------------------------------------------
# Exa

_EXA_STATUS = re.compile(r"^Request failed with status code (\d{3}): ?(.*)$", re.DOTALL)


def _exa_client_class() -> Any:
    class _BoundedExa(Exa):
        """exa-py's `Exa`, sending its POSTs through a bounded session (see the module docstring)."""

        def __init__(self, *, api_key: str, base_url: str, session: BoundedSession) -> None:
            super().__init__(api_key=api_key, base_url=base_url)
            self._bounded_session = session

        def request(self, endpoint: str, data: Any = None, method: str = "POST", params: Any = None,
                    headers: dict[str, str] | None = None, timeout: float | None = None,
                    extra_headers: Any = None, extra_query: Any = None, extra_body: Any = None) -> Any:
            streaming = isinstance(data, dict) and data.get("stream")
            if method.upper() != "POST" or params or extra_query or extra_body or extra_headers or streaming:
                raise NotImplementedError("research-dispatch uses exa-py's search and get_contents only")
            body = data if isinstance(data, str) else json.dumps(data, cls=ExaJSONEncoder)
            response = self._bounded_session.post(self.base_url + endpoint, data=body,
                                                  headers={**self.headers, **(headers or {})},
                                                  timeout=timeout if timeout is not None else self.timeout)
            if response.status_code >= 400:  # exa-py's own error for an HTTP error status
                raise ValueError(f"Request failed with status code {response.status_code}: {response.text}")
            return response.json()

    return _BoundedExa


class ExaProvider:
    name = "exa"

    def __init__(self, *, api_key: str, base_url: str) -> None:
        self.session = BoundedSession()
        self._client = _exa_client_class()(api_key=api_key, base_url=base_url.rstrip("/"), session=self.session)

    def close(self) -> None:
        self.session.close()

    def search(self, request: SearchQuery, *, bounds: CallBounds, timeout_s: float) -> list[Hit]:
        with self.session.within(bounds, "Exa search"):
            response = _translated("Exa", self.translate, lambda: self._client.search(
                request.query, num_results=request.max_results, type="auto",
                include_domains=list(request.include_domains) or None,
                exclude_domains=list(request.exclude_domains) or None,
                contents={"highlights": {"max_characters": EXA_SNIPPET_CHARACTERS}}, timeout=timeout_s))
        hits = []
        for result in getattr(response, "results", None) or []:
            url = getattr(result, "url", None)
            if not url:
                continue
            highlights = getattr(result, "highlights", None) or []
            snippet = " … ".join(str(h) for h in highlights if h) or str(getattr(result, "text", None) or "")
            hits.append(Hit(url=str(url), title=str(getattr(result, "title", None) or ""), snippet=snippet))
        return hits

    def extract(self, urls: list[str], *, bounds: CallBounds, timeout_s: float) -> Pages:
        with self.session.within(bounds, "Exa contents"):
            response = _translated("Exa", self.translate, lambda: self._client.get_contents(
                urls, text={"max_characters": EXA_PAGE_CHARACTERS}, timeout=timeout_s))
        pages = Pages()
        for result in getattr(response, "results", None) or []:
            text = str(getattr(result, "text", None) or "")
            url = getattr(result, "url", None) or getattr(result, "id", None)
            if url and text.strip():
                pages.texts[str(url)] = text
        for status in getattr(response, "statuses", None) or []:
            if getattr(status, "status", None) == "error":
                error = getattr(status, "error", None)
                tag = getattr(error, "tag", None) or "error"
                pages.failed[str(getattr(status, "id", ""))] = str(tag)
        return pages

    @staticmethod
    def translate(exc: Exception) -> SearchServiceError:
        match = _EXA_STATUS.match(str(exc)) if isinstance(exc, ValueError) else None
        if match is not None:
            status = int(match.group(1))
            detail = _exa_error_detail(match.group(2))
            if status == 401:
                return SearchServiceError("Exa key rejected (HTTP 401)", kind="key_rejected", status=401, fatal=True)
            if status == 402:
                return SearchServiceError(f"Exa credits exhausted or key budget exceeded (HTTP 402): {detail}",
                                          kind="plan_limit", status=402, fatal=True)
            if status == 429:
                return SearchServiceError(f"Exa rate limit (HTTP 429): {detail}", kind="rate_limit", status=429,
                                          retryable=True)
            if status == 400:
                return SearchServiceError(f"Exa rejected the request (HTTP 400): {detail}", kind="bad_request",
                                          status=400)
            return SearchServiceError(f"Exa service error (HTTP {status}): {detail}", kind=f"http_{status}",
                                      status=status, retryable=status >= 500)
        transport = _transport_error(exc, "Exa")
        if transport is not None:
            return transport
        if isinstance(exc, ValueError | KeyError | TypeError):  # a 200 whose body is not Exa's shape
            return SearchServiceError("Exa returned a malformed response", kind="malformed_response", retryable=True)
        return SearchServiceError(f"Exa search failed: {type(exc).__name__}", kind="failed")


def _exa_error_detail(body: str) -> str:
    """Exa's error body is `{"requestId", "error", "tag"}`; show the message and tag, never more."""
    try:
        data = json.loads(body)
    except ValueError:
        return sanitize.one_line(body, 160)
    if isinstance(data, dict):
        parts = [str(data.get(k)) for k in ("error", "tag") if data.get(k)]
        return sanitize.one_line(" — ".join(parts) or body, 160)
    return sanitize.one_line(body, 160)


def names(providers: Iterable[SearchProvider]) -> list[str]:
    return [p.name for p in providers]


# ----------------------------------------------------------------------------------------------
# Prices: a leg's search spend counts in its dollars and its cap (`SearchPriceSettings`)

EXA_RESULTS_IN_BASE_PRICE = 10


def search_cost(provider: str, request: SearchQuery, results: int, prices: SearchPriceSettings) -> float:
    """What one answered search costs: Tavily by its depth's credits, Exa by request (up to 10 results,
    more billed per result). Any other provider (a scripted one in tests) is priced as Tavily."""
    if provider == "exa":
        extra = max(0, min(results, request.max_results) - EXA_RESULTS_IN_BASE_PRICE)
        return prices.exa_search_usd + extra * prices.exa_extra_result_usd
    credits = prices.tavily_search_credits["advanced" if request.depth == "advanced" else "basic"]
    return credits * prices.tavily_credit_usd


def extract_cost(provider: str, pages: int, prices: SearchPriceSettings, *, depth: str = "basic") -> float:
    """What reading `pages` pages successfully costs (a failed URL is free): Exa per page, Tavily per five
    pages at its depth (pro rata: the credit is charged on every fifth page a key reads, across calls)."""
    if provider == "exa":
        return pages * prices.exa_page_usd
    credits = prices.tavily_extract_credits_per_5_urls["advanced" if depth == "advanced" else "basic"]
    return pages / 5 * credits * prices.tavily_credit_usd
