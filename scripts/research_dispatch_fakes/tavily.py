"""A fake Tavily search API that the real `tavily-python` 0.8.5 client can talk to over HTTP.

Why a real server rather than a mock: the sync client uses `requests` (which respx cannot see) and
turns HTTP statuses into its own exception types; only a server on a socket exercises that mapping,
the timeout path and the request bodies exactly as production sends them.

Endpoints (POST, JSON, `Authorization: Bearer <non-empty key>` required, else 401):

* `/search` - BM25 over the bundled corpus (`research_dispatch_fakes.corpus`), deterministic,
  ties broken by URL. Honours `max_results` (0..20, default 5), `include_domains` /
  `exclude_domains` (host-suffix match) and `include_raw_content`.
* `/extract` - `urls` (string or list, 1..20). Known pages come back in `results` with the full page
  as `raw_content`; unknown URLs go to `failed_results` with `"Failed to fetch url"`.
  `extract_depth`, `format`, `timeout`, `query`, `chunks_per_source` and `include_images` are
  validated and otherwise ignored.

* `GET /usage` - the key's and the account's credits this billing cycle, spending none (Tavily's API
  reference, "Usage"): `{"key": {"usage", "limit"}, "account": {"current_plan", "plan_usage",
  "plan_limit", "paygo_usage", "paygo_limit"}}`. `limit` is null for a key without a limit of its own.
  Usage counts what the calls served here cost, as Tavily bills them: a search 1 credit (2 at
  `advanced` depth), an extract 1 per 5 URLs read (2 at `advanced`), plus the scenario's `usage` base.

With `valid_keys=` only those keys authenticate (401 for any other, on every endpoint, as the real
service refuses an unknown key); without, any non-empty key does.

Validation follows Tavily's published API description (its OpenAPI document) and answers 400 for what
the real API refuses: a missing, empty or over-400-character query ("Query is too long. Max query
length is 400 characters."), an unknown `search_depth`, `topic`, `time_range`, `extract_depth` or
`format`, `max_results` outside 0..20, search `chunks_per_source` outside 1..3, more than 300
`include_domains` or 150 `exclude_domains`, more than 20 extract URLs ("Max 20 URLs are allowed."),
extract `chunks_per_source` outside 1..5, and an extract `timeout` outside 1.0..60.0 seconds (which
tavily-python also uses as its own read timeout).

Errors use Tavily's envelope `{"detail": {"error": "<message>"}}`, which the client turns into
`BadRequestError` (400), `InvalidAPIKeyError` (401), `ForbiddenError` (403/432/433),
`UsageLimitExceededError` (429) or `requests.HTTPError` (anything else).

Scenarios script failures. Set them with `FakeTavily(scenario=...)`, `set_scenario(...)`, or
`POST /__fake__/scenario` (JSON body; `GET` returns the current one; `POST /__fake__/reset` clears the
scenario, the call counters and the call log)::

    {
      "latency_s": 0.0,            # added to every /search and /extract response
      "hostile": false,            # serve the prompt-injection pages (see below)
      "hostile_per_query": 2,      # how many hostile pages lead each result list (default 2)
      "realism": {"rate": 0.3, "seed": 7},  # /extract reads arXiv pages and PDFs as PDF text (`realism`)
      "usage": {"key_limit": 1000, "key_usage": 0, "plan": "Researcher", "plan_limit": 1000,
                "plan_usage": 0, "paygo_limit": null},   # GET /usage: limits and credits already spent
      "rules": [
        {
          "endpoint": "search",    # "search" | "extract" | "*" (default "*")
          "on_call": 2,            # or "calls": [1, 3]; omit both to match every call
          "times": 1,              # optional cap on how often the rule fires
          "status": 429,           # answer with this status and {"detail": {"error": message}}
          "message": "slow down",  # optional; a Tavily-like default per status otherwise
          "delay_s": 1.5,          # sleep before answering (to trip the client's timeout)
          "empty": true,           # search: no results; extract: every URL fails
          "fail_urls": ["https://..."]  # extract: these URLs go to failed_results
        }
      ]
    }

Call numbers are 1-indexed per endpoint and count every request to that endpoint, including
rejected ones; setting a scenario restarts the numbering, so "on_call: 2" means the second call after
the scenario was installed. Every matching rule fires (and uses up one of its `times`): delays add up,
the first rule with a `status` decides the error, `empty` and `fail_urls` combine. A request without a
key is answered 401 before any rule is looked at, so keyless mode can never silently succeed.

With `"hostile": true` the most query-relevant hostile pages (ranked among themselves by the same
BM25, ties by URL) are placed first in every search result list, subject to the domain filters, and
hostile URLs become extractable. Without it they do not exist.

This module imports nothing from the product on purpose (see `research_dispatch_fakes`).
"""

from __future__ import annotations

import copy
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from research_dispatch_fakes.corpus import Page, arxiv_abs, load_pages, normalize_url
from research_dispatch_fakes.faults import FaultRule, count, non_negative, parse_rules
from research_dispatch_fakes.http import FakeRequest, FakeResponse, FakeServer
from research_dispatch_fakes.realism import Realism, pdf_artefacts

SEARCH_DEPTHS = ("basic", "advanced", "fast", "ultra-fast")
SEARCH_TOPICS = ("general", "news", "finance")
MAX_QUERY_CHARS = 400
MAX_RESULTS_LIMIT = 20
DEFAULT_MAX_RESULTS = 5
MAX_EXTRACT_URLS = 20
TIME_RANGES = ("day", "week", "month", "year", "d", "w", "m", "y")
EXTRACT_DEPTHS = ("basic", "advanced")
EXTRACT_FORMATS = ("markdown", "text")
MAX_INCLUDE_DOMAINS = 300
MAX_EXCLUDE_DOMAINS = 150
SEARCH_CHUNKS = (1, 3)  # chunks_per_source of /search (advanced depth)
EXTRACT_CHUNKS = (1, 5)  # chunks_per_source of /extract (with a query)
EXTRACT_TIMEOUT_S = (1.0, 60.0)
SNIPPET_CHARS = 600
RESPONSE_TIME = 0.01
DEFAULT_HOSTILE_PER_QUERY = 2
EXTRACT_FAILURE = "Failed to fetch url"
UNAUTHORIZED = "Unauthorized: missing or invalid API key."

_DEFAULT_MESSAGES = {
    400: "Bad request.",
    401: UNAUTHORIZED,
    403: "Forbidden.",
    429: "Your request has been blocked due to excessive requests. Please reduce the rate of requests.",
    432: "This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com",
    433: "This request exceeds the pay-as-you-go limit. You can increase your limit on the Tavily dashboard.",
    500: "Internal server error.",
    502: "Bad gateway.",
    503: "Service temporarily unavailable.",
}

_SCENARIO_KEYS = {"latency_s", "hostile", "hostile_per_query", "rules", "realism", "usage"}
_USAGE_KEYS = {"key_limit", "key_usage", "plan", "plan_limit", "plan_usage", "paygo_limit", "paygo_usage"}
DEFAULT_USAGE: dict[str, Any] = {"key_limit": None, "key_usage": 0, "plan": "Researcher", "plan_limit": 1000,
                                 "plan_usage": 0, "paygo_limit": None, "paygo_usage": 0}
_ENDPOINTS = ("search", "extract")

# --------------------------------------------------------------------------------------------
# Ranking
# --------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+")
# Function words carry no topical signal; dropping them keeps boilerplate from dominating short queries.
_STOPWORDS = frozenset(
    re.findall(
        r"[a-z]+",
        "a an and are as at be been but by can do does for from has have how i if in into is it its of on or our "
        "should so than that the their them then there these they this to was we were what when where which while "
        "who why will with would you your about also any more most not only other such",
    )
)
_K1 = 1.2
_TITLE_BOOST = 1.0
_B = 0.75


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric tokens without stop words (shared by documents and queries)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class _Field:
    """Okapi BM25 statistics for one text field of every page.

    Collection statistics (document frequencies, average length) come from the normal corpus only.
    Why: switching hostile pages on must not change the scores, and hence the order, of the ordinary
    results.
    """

    def __init__(self, texts: dict[str, str], collection: Sequence[str]) -> None:
        self._tf = {url: Counter(tokenize(text)) for url, text in texts.items()}
        self._len = {url: sum(tf.values()) for url, tf in self._tf.items()}
        df: Counter[str] = Counter()
        for url in collection:
            df.update(self._tf[url].keys())
        n = len(collection)
        self._idf = {term: math.log(1 + (n - d + 0.5) / (d + 0.5)) for term, d in df.items()}
        self._idf_unseen = math.log(1 + (n + 0.5) / 0.5)
        self._avgdl = max(sum(self._len[url] for url in collection) / max(n, 1), 1.0)

    def score(self, url: str, terms: Iterable[str]) -> float:
        tf = self._tf[url]
        norm = _K1 * (1 - _B + _B * self._len[url] / self._avgdl)
        total = 0.0
        for term in terms:
            f = tf.get(term, 0)
            if f:
                total += self._idf.get(term, self._idf_unseen) * f * (_K1 + 1) / (f + norm)
        return total


class _Bm25:
    """BM25 over the whole page (title + synopsis + content) plus a boosted BM25 over the title alone.

    Why the separate title field: every page of a topic repeats the topic's vocabulary (background,
    related-work lists), so whole-page BM25 alone cannot tell the DiLoCo paper from pages that discuss
    DiLoCo. Web search engines weight titles for the same reason.
    """

    def __init__(self, collection: Sequence[Page], scored: Iterable[Page]) -> None:
        pages = list(scored)
        urls = [p.url for p in collection]
        self._page = _Field({p.url: f"{p.title}\n{p.synopsis}\n{p.content}" for p in pages}, urls)
        self._title = _Field({p.url: p.title for p in pages}, urls)

    def score(self, page: Page, terms: Sequence[str]) -> float:
        return self._page.score(page.url, terms) + _TITLE_BOOST * self._title.score(page.url, terms)


def _public_score(raw: float) -> float:
    """Squash a BM25 score into (0, 0.95), rounded like Tavily's scores.

    Why below 0.95: hostile pages are given 0.99, 0.98, ... so that result lists stay sorted.
    """
    return round(0.95 * raw / (raw + 6.0), 4)


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """Synopsis-based snippet of at most `limit` characters, cut at a word boundary."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 3)
    return text[: cut if cut > 0 else limit - 3].rstrip(" ,;:") + "..."


def _domain(value: str) -> str:
    """'https://www.Example.com/x' -> 'www.example.com'; a bare 'example.com' stays as it is."""
    value = value.strip().lower()
    if "://" in value:
        value = urlsplit(value).hostname or ""
    return value.split("/", 1)[0]


def _host_matches(host: str, domains: Sequence[str]) -> bool:
    """Suffix match on label boundaries, so 'arxiv.org' matches 'export.arxiv.org' but not 'xarxiv.org'."""
    return any(host == d or host.endswith("." + d) for d in domains if d)


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------


@dataclass
class _Effects:
    delay_s: float = 0.0
    status: int | None = None
    message: str | None = None
    empty: bool = False
    fail_urls: frozenset[str] = frozenset()


@dataclass
class _Scenario:
    raw: dict[str, Any]
    latency_s: float
    hostile: bool
    hostile_per_query: int
    rules: list[FaultRule]
    usage: dict[str, Any]
    realism: Realism | None = None


def _parse_scenario(raw: Any) -> _Scenario:
    """Validate a scenario dict strictly: a typo in a test's scenario must fail loudly, not be ignored."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError("scenario must be a JSON object")
    unknown = set(raw) - _SCENARIO_KEYS
    if unknown:
        raise ValueError(f"scenario has unknown keys {sorted(unknown)}; allowed: {sorted(_SCENARIO_KEYS)}")
    hostile = raw.get("hostile", False)
    if not isinstance(hostile, bool):
        raise ValueError("scenario.hostile must be true or false")
    per_query = raw.get("hostile_per_query", DEFAULT_HOSTILE_PER_QUERY)
    usage = raw.get("usage") or {}
    if not isinstance(usage, dict) or set(usage) - _USAGE_KEYS:
        raise ValueError(f"scenario.usage must be an object with keys among {sorted(_USAGE_KEYS)}")
    for name, value in usage.items():
        if name != "plan" and value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                                     or value < 0):
            raise ValueError(f"scenario.usage.{name} must be a non-negative integer or null")
    return _Scenario(
        raw=copy.deepcopy(raw),
        latency_s=non_negative(raw.get("latency_s", 0.0), "scenario.latency_s"),
        hostile=hostile,
        hostile_per_query=count(per_query, "scenario.hostile_per_query", 0),
        rules=parse_rules(raw.get("rules", []), endpoints=_ENDPOINTS, normalise_url=normalize_url),
        realism=Realism.parse(raw.get("realism")),
        usage={**DEFAULT_USAGE, **usage},
    )


class _BadRequest(Exception):
    """A 400 with Tavily's error envelope; raised by request validation."""


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


def _error(status: int, message: str, delay_s: float = 0.0) -> FakeResponse:
    """Tavily's error envelope: the client reads `detail.error` into the exception message."""
    return FakeResponse.json({"detail": {"error": message}}, status=status, delay_s=delay_s)


class FakeTavily(FakeServer):
    """Fake `api.tavily.com`: pass `base_url` as `TavilyClient(api_base_url=...)`."""

    def __init__(self, scenario: dict[str, Any] | None = None, host: str = "127.0.0.1", port: int = 0, *,
                 valid_keys: set[str] | frozenset[str] | None = None) -> None:
        parsed = _parse_scenario(scenario)  # before binding a socket, so a bad scenario leaks nothing
        super().__init__(host, port)
        self.valid_keys = frozenset(valid_keys) if valid_keys is not None else None
        self._credits = 0  # what the calls served so far cost, in Tavily's credits
        self._state_lock = threading.Lock()
        pages = load_pages(include_hostile=True)
        self._normal = [p for p in pages if not p.hostile]
        self._hostile = [p for p in pages if p.hostile]
        self._index = _Bm25(self._normal, pages)
        self._by_url = {normalize_url(p.url): p for p in pages}
        self._scenario = parsed
        self._counts = dict.fromkeys(_ENDPOINTS, 0)
        self._sequence = 0
        self._calls: list[tuple[str, Any]] = []

    def __enter__(self) -> FakeTavily:
        """Start serving; typed so that `with FakeTavily() as fake:` exposes the Tavily helpers."""
        self.start()
        return self

    # -- public helpers for tests and the demo ---------------------------------------------------
    @property
    def base_url(self) -> str:
        """What `TavilyClient(api_base_url=...)` needs: the root URL, no trailing slash."""
        return self.root_url

    @property
    def scenario(self) -> dict[str, Any]:
        with self._state_lock:
            return copy.deepcopy(self._scenario.raw)

    def set_scenario(self, scenario: dict[str, Any] | None) -> None:
        """Install a scenario (None clears it). Raises ValueError on a malformed one."""
        parsed = _parse_scenario(scenario)
        with self._state_lock:
            self._scenario = parsed
            self._counts = dict.fromkeys(_ENDPOINTS, 0)

    def reset(self) -> None:
        """Forget the scenario, the call counters, the request ids, the call log and the request log."""
        with self._state_lock:
            self._scenario = _parse_scenario(None)
            self._counts = dict.fromkeys(_ENDPOINTS, 0)
            self._sequence = 0
            self._calls = []
            self._credits = 0
        with self._lock:  # FakeServer's request log, so `requests_to` also starts afresh
            self.requests.clear()

    @property
    def calls(self) -> list[tuple[str, Any]]:
        """(endpoint, parsed JSON body or None) for every /search and /extract request, in order."""
        with self._state_lock:
            return list(self._calls)

    # -- dispatch --------------------------------------------------------------------------------
    def handle(self, request: FakeRequest) -> FakeResponse:
        path = request.path.rstrip("/") or "/"
        if path == "/__fake__/scenario":
            return self._handle_scenario(request)
        if path == "/__fake__/reset":
            if request.method != "POST":
                return _error(405, "Method not allowed.")
            self.reset()
            return FakeResponse.json({"ok": True})
        if path in ("/search", "/extract"):
            if request.method != "POST":
                return _error(405, "Method not allowed.")
            return self._handle_api(path[1:], request)
        if path == "/usage":
            if request.method != "GET":
                return _error(405, "Method not allowed.")
            return self._usage(request)
        return _error(404, f"Not found: {request.path}")

    def _authorized(self, request: FakeRequest) -> bool:
        key = _bearer_key(request.headers.get("authorization", ""))
        return key is not None and (self.valid_keys is None or key in self.valid_keys)

    def _usage(self, request: FakeRequest) -> FakeResponse:
        """`GET /usage`: the key's and the account's credits; spends none, refuses an unknown key."""
        if not self._authorized(request):
            return _error(401, UNAUTHORIZED)
        with self._state_lock:
            usage, spent = self._scenario.usage, self._credits
        return FakeResponse.json({
            "key": {"usage": usage["key_usage"] + spent, "limit": usage["key_limit"]},
            "account": {"current_plan": usage["plan"], "plan_usage": usage["plan_usage"] + spent,
                        "plan_limit": usage["plan_limit"], "paygo_usage": usage["paygo_usage"],
                        "paygo_limit": usage["paygo_limit"]}})

    def _handle_scenario(self, request: FakeRequest) -> FakeResponse:
        if request.method == "GET":
            return FakeResponse.json(self.scenario)
        if request.method != "POST":
            return _error(405, "Method not allowed.")
        try:
            self.set_scenario(request.json())
        except ValueError as exc:  # includes json.JSONDecodeError
            return _error(400, f"invalid scenario: {exc}")
        return FakeResponse.json({"ok": True, "scenario": self.scenario})

    def _handle_api(self, endpoint: str, request: FakeRequest) -> FakeResponse:
        try:
            body = request.json()
        except (ValueError, UnicodeDecodeError):
            body = None
            malformed = True
        else:
            malformed = False
        with self._state_lock:
            self._counts[endpoint] += 1
            call = self._counts[endpoint]
            self._sequence += 1
            request_id = f"req-{self._sequence}"
            self._calls.append((endpoint, copy.deepcopy(body)))
            scenario = self._scenario
            authorized = self._authorized(request)
            effects = self._fire_rules(endpoint, call) if authorized else _Effects()
        delay = scenario.latency_s + effects.delay_s
        if not authorized:
            return _error(401, UNAUTHORIZED, delay)
        if effects.status is not None:
            message = effects.message or _DEFAULT_MESSAGES.get(effects.status, "Request failed.")
            return _error(effects.status, message, delay)
        try:
            if malformed or not isinstance(body, dict):
                raise _BadRequest("Request body must be a JSON object.")
            if endpoint == "search":
                payload = self._search(body, scenario, effects)
            else:
                payload = self._extract(body, scenario, effects)
        except _BadRequest as exc:
            return _error(400, str(exc), delay)
        with self._state_lock:
            self._credits += _credits(endpoint, body, payload)
        payload["request_id"] = request_id
        return FakeResponse.json(payload, delay_s=delay)

    def _fire_rules(self, endpoint: str, call: int) -> _Effects:
        """Apply every matching rule (caller holds the lock, since rules count their firings)."""
        effects = _Effects()
        for rule in self._scenario.rules:
            if not rule.matches(endpoint, call):
                continue
            rule.fired += 1
            effects.delay_s += rule.delay_s
            if effects.status is None and rule.status is not None:
                effects.status, effects.message = rule.status, rule.message
            effects.empty = effects.empty or rule.empty
            effects.fail_urls = effects.fail_urls | rule.fail_urls
        return effects

    # -- /search ---------------------------------------------------------------------------------
    def _search(self, body: dict[str, Any], scenario: _Scenario, effects: _Effects) -> dict[str, Any]:
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            raise _BadRequest("Query is missing or empty.")
        if len(query) > MAX_QUERY_CHARS:
            raise _BadRequest(f"Query is too long. Max query length is {MAX_QUERY_CHARS} characters.")
        depth = body.get("search_depth", "basic")
        if depth not in SEARCH_DEPTHS:
            raise _BadRequest(f"Invalid search_depth {depth!r}. Must be one of: {', '.join(SEARCH_DEPTHS)}.")
        topic = body.get("topic", "general")
        if topic not in SEARCH_TOPICS:
            raise _BadRequest(f"Invalid topic {topic!r}. Must be one of: {', '.join(SEARCH_TOPICS)}.")
        max_results = body.get("max_results", DEFAULT_MAX_RESULTS)
        if (
            isinstance(max_results, bool)
            or not isinstance(max_results, (int, float))
            or not math.isfinite(max_results)
            or max_results != int(max_results)
            or not 0 <= max_results <= MAX_RESULTS_LIMIT
        ):
            raise _BadRequest(f"max_results must be an integer between 0 and {MAX_RESULTS_LIMIT}.")
        _optional_choice(body, "time_range", TIME_RANGES)
        _optional_integer(body, "chunks_per_source", *SEARCH_CHUNKS)
        include = _domain_list(body, "include_domains", MAX_INCLUDE_DOMAINS)
        exclude = _domain_list(body, "exclude_domains", MAX_EXCLUDE_DOMAINS)
        raw_flag = body.get("include_raw_content", False)
        if raw_flag not in (True, False, None, "markdown", "text"):
            raise _BadRequest("include_raw_content must be a boolean, 'markdown' or 'text'.")

        def allowed(page: Page) -> bool:
            if include and not _host_matches(page.host, include):
                return False
            return not (exclude and _host_matches(page.host, exclude))

        terms = sorted(set(tokenize(query)))
        ranked: list[tuple[float, Page]] = []
        if not effects.empty:
            if scenario.hostile and scenario.hostile_per_query:
                hostile = sorted(
                    (p for p in self._hostile if allowed(p)),
                    key=lambda p: (-self._index.score(p, terms), p.url),
                )[: scenario.hostile_per_query]
                ranked += [(round(0.99 - 0.01 * i, 4), p) for i, p in enumerate(hostile)]
            scored = [(self._index.score(p, terms), p) for p in self._normal if allowed(p)]
            scored = [(s, p) for s, p in scored if s > 0]
            scored.sort(key=lambda sp: (-sp[0], sp[1].url))
            ranked += [(_public_score(s), p) for s, p in scored]
        results = [
            {
                "title": page.title,
                "url": page.url,
                "content": _snippet(page.synopsis),
                "score": score,
                "raw_content": page.content if raw_flag else None,
            }
            for score, page in ranked[: int(max_results)]
        ]
        payload: dict[str, Any] = {
            "query": query,
            "follow_up_questions": None,
            "answer": None,
            "images": [],
            "results": results,
            "response_time": RESPONSE_TIME,
        }
        if body.get("include_usage"):
            payload["usage"] = {"credits": 2 if depth == "advanced" else 1}
        return payload

    # -- /extract --------------------------------------------------------------------------------
    def _extract(self, body: dict[str, Any], scenario: _Scenario, effects: _Effects) -> dict[str, Any]:
        urls = body.get("urls")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u.strip() for u in urls):
            raise _BadRequest("urls must be a URL or a non-empty list of URLs.")
        if len(urls) > MAX_EXTRACT_URLS:
            raise _BadRequest(f"Max {MAX_EXTRACT_URLS} URLs are allowed.")
        _optional_choice(body, "extract_depth", EXTRACT_DEPTHS)
        _optional_choice(body, "format", EXTRACT_FORMATS)
        _optional_integer(body, "chunks_per_source", *EXTRACT_CHUNKS)
        timeout = body.get("timeout")
        low, high = EXTRACT_TIMEOUT_S
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not math.isfinite(timeout) or not low <= timeout <= high):
            raise _BadRequest(f"Invalid timeout: must be between {low} and {high} seconds.")
        results: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for url in urls:
            key = normalize_url(url)
            page = self._by_url.get(normalize_url(arxiv_abs(url)))
            if page is not None and page.hostile and not scenario.hostile:
                page = None
            if page is None or effects.empty or key in effects.fail_urls:
                failed.append({"url": url, "error": EXTRACT_FAILURE})
            else:
                results.append({"url": url, "raw_content": pdf_artefacts(page.text_at(url), scenario.realism, url),
                                "images": []})
        payload: dict[str, Any] = {
            "results": results,
            "failed_results": failed,
            "response_time": RESPONSE_TIME,
        }
        if body.get("include_usage"):
            per_five = 2 if body.get("extract_depth") == "advanced" else 1
            payload["usage"] = {"credits": math.ceil(len(results) / 5) * per_five}
        return payload


def _credits(endpoint: str, body: dict[str, Any], payload: dict[str, Any]) -> int:
    """What Tavily bills a served call: a search 1 credit (2 advanced), an extract 1 per 5 URLs read (2
    advanced)."""
    if endpoint == "search":
        return 2 if body.get("search_depth") == "advanced" else 1
    per_five = 2 if body.get("extract_depth") == "advanced" else 1
    return math.ceil(len(payload.get("results") or []) / 5) * per_five


def _bearer_key(header: str) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, or None when absent or empty."""
    scheme, _, key = header.strip().partition(" ")
    key = key.strip()
    return key if scheme.lower() == "bearer" and key else None


def _domain_list(body: dict[str, Any], name: str, limit: int) -> list[str]:
    """`include_domains` / `exclude_domains` as normalised host names (400 if not a list of strings, or
    longer than Tavily allows)."""
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _BadRequest(f"{name} must be a list of domain names.")
    if len(value) > limit:
        raise _BadRequest(f"{name} accepts at most {limit} domains.")
    return [_domain(v) for v in value]


def _optional_choice(body: dict[str, Any], name: str, allowed: Sequence[str]) -> None:
    value = body.get(name)
    if value is not None and value not in allowed:
        raise _BadRequest(f"Invalid {name} {value!r}. Must be one of: {', '.join(allowed)}.")


def _optional_integer(body: dict[str, Any], name: str, low: int, high: int) -> None:
    value = body.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
        raise _BadRequest(f"{name} must be an integer between {low} and {high}.")


__all__ = ["FakeTavily", "tokenize"]
