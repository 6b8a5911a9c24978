"""A fake OpenRouter gateway over real HTTP, so the real `openai` client is exercised end to end.

Why a real server with OpenRouter's wire format (docs/REAL-SERVICES.md § OpenRouter) rather than a mock: the
product's route-fidelity checks read fields the OpenAI schema does not have (`provider`,
`openrouter_metadata`, `usage.cost`, the `X-Generation-Id` header, `/generation` records, errors inside
HTTP 200s), and the only honest test of that parsing is the real client against real bytes.

Endpoints (base `/api/v1`): `POST /chat/completions` (non-streaming), `GET /generation?id=`,
`GET /models`, `GET /models/{author}/{slug}/endpoints`, `GET /providers`, `GET /key`, `GET /credits`.
Control endpoints: `GET|POST /__fake__/scenario`, `POST /__fake__/reset`, `GET /__fake__/calls`.

The assistant's words come from `script_researcher` (the scripted researcher) and `script_structured`
(structured output); this module adds routing, accounting and the scripted faults.

Routing. Every `author/name` slug exists. Each author has a catalogue of endpoints (display name,
tag, `supported_parameters`; the scenario's `endpoints` replaces it per model glob); `provider.order[0]`
(base slug before any `/`) selects one, `only`/`ignore` filter, and a pinned tag absent from the
catalogue with `allow_fallbacks: false` is a 404 `no_endpoints` envelope. Otherwise the first catalogue
entry serves. `models` lists, `~aliases`, `openrouter/*` routers and `stream: true` are answered 400.

Strict like the real services (module `strict`, docs/REAL-SERVICES.md):
  * `provider.require_parameters: true` keeps only endpoints listing every parameter sent; none left is
    OpenRouter's 404 "No endpoints found that can handle the requested parameters." (`error_type`
    not_found, `availability.code` constraint_filtered, `excluded_by: ["require_parameters"]`). DeepSeek's
    own endpoint lists the output cap as `max_tokens` only; a `json_schema` response_format needs
    `structured_outputs`;
  * the serving provider answers 400 "Provider returned error" (the reason in `error.metadata.raw`) to an
    assistant turn with `content: null`, an unknown or deprecated field (`function_call`, ...), no content
    and no tool calls, tool-call arguments that are not a string, an empty text-only turn for
    `anthropic/*`, tool results that do not answer the turn before them, and — for `google/gemini-3*` —
    tool-call turns without the `reasoning_details` thought signatures it returned (or with altered ones);
  * `google/gemini-3*` tool-call turns carry `reasoning_details` (one `reasoning.encrypted` signature per
    call, id = the call's id);
  * `google/*` models refuse tool `parameters` with a keyword outside Google's `Schema` subset
    (`additionalProperties`, `exclusiveMinimum`, `$ref`, ...), a `type` list, a non-string `enum` or a
    `format` other than `enum`/`date-time`: 400, Google's "Invalid JSON payload received. Unknown name"
    lines in `error.metadata.raw`.

Accounting (what the benchmarks rely on):
  * prompt_tokens = ceil(chars / 4) over every message `content` string, every tool-call `arguments`
    string, and `canonical_json(tools)` and `canonical_json(response_format)` when present;
  * completion_tokens = max(1, ceil(chars of output content + tool-call arguments) / 4));
  * cached_tokens, for models that cache by themselves (OpenAI, DeepSeek, Moonshot, Gemini...): per
    `session_id` (else per requested model), the longest common prefix in characters of
    `canonical_json(messages)` of this request and of the previous successful one, // 4, counted only
    when >= 1024 tokens (and never above prompt_tokens); read at 0.25x the input price;
  * `anthropic/*` caches only at `cache_control` breakpoints (at most four count): a request reads the
    longest prefix the session cached ending at one of its breakpoints or up to 20 messages before one
    (0.1x the input price, `cached_tokens`), and writes the prefix up to each breakpoint that reaches the
    model's minimum (1,024 tokens for Sonnet 4.x; 1.25x for what goes beyond the read,
    `cache_write_tokens`); without breakpoints nothing is cached. The listing says so (`input_cache_read`,
    `input_cache_write`);
  * cost = uncached prompt x price + cached x price x read factor + written x price x write factor +
    completion x price, rounded to 8 decimals;
    default prices $1/M prompt and $4/M completion, overridable per model glob in the scenario; past an
    override's `min_prompt_tokens` its prices apply (google/* models: 2x prompt, 1.5x completion past
    200k tokens, as listed in `pricing.overrides`);
  * with `"byok": true` the provider's charge is `usage.cost_details.upstream_inference_cost` and
    `usage.cost` is OpenRouter's 5% fee, `is_byok: true`.
  * `max_completion_tokens` (or `max_tokens`) is honoured: longer output is cut (finish_reason `length`);
  * reasoning tokens share that cap and are billed as completion tokens (`completion_tokens_details.
    reasoning_tokens`, the generation's `native_tokens_reasoning`): `thinking_tokens` — the budget of
    `reasoning` (`max_tokens`, or the effort's share of the cap), or the whole cap for a model that
    reasons by default (`REASONING_BY_DEFAULT`), spent up to what the turn needs (`THINKING_NEED`). What
    the reasoning leaves is the room for the answer: a small cap yields `length` with little or no
    content (a tool call that does not fit is dropped).
`canonical_json` is `json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`.

Scenario format (constructor `scenario=`, `set_scenario()`, or `POST /__fake__/scenario`)::

    {"latency_s": 0.0,                       # added delay on every completion
     "hold": false,                          # true: every completion waits until a scenario without it
     "script": {"searches": 2, "per_turn": 2, "extract_top": 3, "reads": 1,  # scripted researcher knobs
                "gullible": false},                                 # a misbehaviour: see script_researcher
     "pricing": {"<model glob>": {"prompt": 1.0, "completion": 4.0,     # USD per 1M tokens
                                  "overrides": [{"min_prompt_tokens": 1000, "prompt": 10.0}]}},
     "endpoints": {"<model glob>": [{"provider": "Acme", "tag": "acme",
                                     "supported_parameters": ["max_tokens", "tools"]}]},
     "byok": false,
     "models": ["x-ai/grok-4"],              # more ids for `GET /models` to list (besides KNOWN_MODELS)
     "retired": ["google/gemini-3.1-pro-preview"],  # no longer listed: `GET /models` omits them, their
                                             # endpoints listing is a 404 and a chat call a 400 "not a valid
                                             # model ID", as OpenRouter answers for a model it has withdrawn
     "key": {"limit": 20.0, "usage": 19.5},  # `GET /key`: the key's credit limit (null: none) and what it had
                                             # spent before this server's own calls (which add to it)
     "response_formats": ["text", "json_object"],  # a local server: other response_format types are 422
     "realism": {"rate": 0.3, "seed": 7},    # the synthesis answers slip as real models' do (`realism`)
     "rules": [{"match": {"model": "<glob>", "session": "<glob>", "kind": "<glob>", "schema": "<glob>"},
                "on_call": k | "calls": [k, ...] | (omitted: every call),
                "times": n,                  # apply at most n times
                ...actions...}]}

Call numbers are 1-indexed per `session_id` (else per requested model) and count every completion
request that passed authentication and validation (each also gets a `completions` record). The first
matching rule (with `times` left) applies. `kind` is the scripted turn: search | extract | write |
revise | continue | structured; `schema` is the json_schema name.

Actions (combinable where sensible):
  * `status`: 400|401|402|403|404|408|429|500|502|503 error envelope (+ `retry_after` header value,
    `message`); 404 carries `availability.code` "no_endpoints".
  * `reset`: close the connection without answering (the client sees a connection error).
  * `raw_body`: answer HTTP 200 with exactly this text as a JSON-typed body (garbage, truncated JSON).
  * `answer`: a whole chat completion (a dict) to answer with, as is — streamed as its chunks when the
    request streams (the fake's own routing, accounting and records are skipped).
  * `error_in_200`: "choice" (finish_reason "error" + `choices[0].error`) or "top_level" (`error`, no
    `choices`); `code` default 502, `metadata.error_type` "provider_unavailable"; usage is zero.
  * `serve_model: SLUG`, `dated_model` (serve `<requested>-20260401`), `serve_provider: DISPLAY NAME`.
  * `fallback_attempt`: attempt 2; the first attempt (another endpoint of the model) failed with 502; the
    served provider is unchanged, so only the attempts record shows the fallback.
  * `cache_hit`: `X-OpenRouter-Cache-Status: HIT`, zero usage and cost, no `openrouter_metadata`, and the
    generation's `response_cache_source_id` names the session's previous generation.
  * `no_metadata`: no `openrouter_metadata` and no top-level `provider`.
  * `delay_s`: extra delay.
  * `usage_fields: {NAME: VALUE}`: those `usage` fields are VALUE as is (a key where a count belongs...);
  * `bad_chunk: KIND` (a streamed request): one malformed chunk (`sse.BAD_CHUNKS`: `tool_call_index`,
    `tool_calls`, `choices`, `usage`) halfway through the stream, or (`second_usage`) a second, tiny usage
    chunk after the real one; the generation is billed as usual (for what was streamed, if the client
    stops reading).
  * `usage_cost: VALUE`: `usage.cost` is VALUE as is (a broken or hostile gateway): "NaN" and
    "Infinity" go out as those JSON number tokens, any other value verbatim.
  * `overstate` (claim extraction: the first claim's quote is not in the report), `misquote` (citation
    check: every judge quote is not in its passage), `agreeable` (a judge that says yes to everything)
    and `obedient` (a judge that obeys an instruction planted in a passage): structured-output
    misbehaviours, see `script_synthesis`.

With `RESEARCH_DISPATCH_FAKE_GATEWAY_LOG=<file>` in its environment (or `request_log=`), the fake appends
every chat request body, as sent, as one JSON line (how a demo run's requests are checked against
OpenRouter's published schema).

`set_scenario` resets the rules' `times` counters but not the per-session call numbers;
`reset()` clears everything and restores the constructor's scenario.

What the research loop and the synthesis do with a reply (finish reasons, empty replies, broken tool
calls, drafts outside the band, invalid structured output) is not scripted here: those rules are tested
at the model seam with an in-process scripted model (tests/seam.py). The actions above are the wire's:
what a real gateway can answer, and how.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from research_dispatch_fakes import sse, strict
from research_dispatch_fakes.http import FakeRequest, FakeResponse, FakeServer
from research_dispatch_fakes.realism import Realism
from research_dispatch_fakes.script_researcher import Turn, classify, plan_turn
from research_dispatch_fakes.script_structured import STRUCTURED_QUIRKS, structured_name

REQUEST_LOG_VARIABLE = "RESEARCH_DISPATCH_FAKE_GATEWAY_LOG"
KEEPALIVE_S = 0.25  # a `: OPENROUTER PROCESSING` comment this often while a streamed answer waits
GENERATION_404S = 1  # `/generation` answers 404 this many times per id before the record shows
NON_CANCELLING_PROVIDERS = frozenset({"Google", "Google AI Studio", "Google Vertex"})
"""Providers that do not support stream cancellation (OpenRouter's streaming docs list Google's): an
abandoned stream is billed in full."""
EPOCH = 1767225600  # 2026-01-01T00:00:00Z: `created` = EPOCH + generation number, never the wall clock
DATED_SUFFIX = "-20260401"
DEFAULT_PRICE_PROMPT = 1.0  # USD per 1M tokens
DEFAULT_PRICE_COMPLETION = 4.0
CACHED_PRICE_FACTOR = 0.25
CACHE_MIN_TOKENS = 1024

_STD = strict.STANDARD_PARAMETERS
CATALOGUE: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "google": (("Google", "google-vertex", _STD), ("Google AI Studio", "google-ai-studio", _STD)),
    # DeepSeek's own endpoints list the output cap only as `max_tokens` (docs/REAL-SERVICES.md § OpenRouter)
    "deepseek": (("DeepSeek", "deepseek", strict.MAX_TOKENS_ONLY_PARAMETERS), ("DeepInfra", "deepinfra", _STD)),
    "openai": (("OpenAI", "openai", _STD), ("Azure", "azure", _STD)),
    "anthropic": (("Anthropic", "anthropic", _STD), ("Amazon Bedrock", "amazon-bedrock", _STD)),
    "moonshotai": (("Moonshot AI", "moonshotai", _STD), ("Together", "together", _STD)),
}
# Long-context prices, like Gemini's published ones: past 200k prompt tokens, 2x prompt and 1.5x completion.
LONG_CONTEXT_OVERRIDES: dict[str, list[dict[str, float]]] = {
    "google/*": [{"min_prompt_tokens": 200_000, "prompt_factor": 2.0, "completion_factor": 1.5}],
}
BYOK_FEE_SHARE = 0.05  # OpenRouter's fee on a BYOK call, as a share of the provider's charge
KNOWN_MODELS = (  # what `GET /models` lists (plus the scenario's `models`): a slug it lacks is a typo
    "google/gemini-3.1-pro-preview",
    "google/gemini-3-flash",
    "deepseek/deepseek-v4-pro",
    "deepseek/deepseek-v4",
    "deepseek/deepseek-v3",
    "deepseek/deepseek-v3.2",
    "openai/gpt-5",
    "openai/gpt-5.1",
    "openai/gpt-5-mini",
    "anthropic/claude-sonnet-4.6",
    "anthropic/claude-sonnet-4.5",
    "anthropic/claude-haiku-4.5",
    "moonshotai/kimi-k2-thinking",
    "x-ai/grok-4",
    "qwen/qwen3-max",
    "qwen/qwen3-8b",
    "mistralai/mistral-large",
)
_STATUS_DEFAULTS: dict[int, tuple[str, str]] = {
    400: ("Invalid request (scripted by the fake)", "invalid_request"),
    401: ("User not found.", "authentication"),
    402: ("Insufficient credits. Add more using https://openrouter.ai/settings/credits", "payment_required"),
    403: ("Input was flagged by moderation", "content_policy_violation"),
    404: ("No endpoints found that can handle the requested parameters.", "not_found"),
    408: ("Request timed out", "timeout"),
    409: ("Conflict", "invalid_request"),
    422: ("Unprocessable request", "unprocessable"),
    429: ("Rate limit exceeded: too many requests", "rate_limit_exceeded"),
    500: ("Internal Server Error", "server"),
    502: ("Provider returned error", "provider_unavailable"),
    503: ("No available providers for this model at the moment", "provider_overloaded"),
}
_ENDPOINTS_PATH = re.compile(r"^/api/v1/models/([^/]+)/([^/]+)/endpoints$")


REASONING_BY_DEFAULT = ("openai/gpt-5*", "openai/o[0-9]*", "google/gemini-2.5-pro*", "google/gemini-3*",
                        "moonshotai/kimi-k2-thinking*", "deepseek/deepseek-r1*")
"""Models that reason without being asked (their reasoning is mandatory or on by default)."""
THINKING_NEED = {"search": 512, "extract": 512, "mcp": 512, "structured": 1024, "write": 2048, "revise": 2048,
                 "continue": 2048}
"""Reasoning tokens the fake model wants per kind of turn; it thinks that much, or its budget if smaller."""
EFFORT_SHARE = {"max": 0.95, "xhigh": 0.95, "high": 0.8, "medium": 0.5, "low": 0.2, "minimal": 0.1, "none": 0.0}
"""OpenRouter's documented share of `max_tokens` each `reasoning.effort` gives to reasoning."""


def thinking_tokens(body: dict[str, Any], model: str, kind: str) -> int:
    """How many reasoning tokens the fake model spends on this request (before the cap cuts them).

    The budget is `reasoning.max_tokens`, else the effort's share of the output cap (`enabled: true` is
    medium, effort `none` is no reasoning), else — without a `reasoning` object — the whole cap for a
    model that reasons by default and nothing for any other; the model thinks what its turn needs
    (`THINKING_NEED`) up to that budget. The cap then holds reasoning and answer together.
    """
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    cap = limit if isinstance(limit, int) and limit > 0 else 32768
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict):
        if isinstance(reasoning.get("max_tokens"), int):
            budget = int(reasoning["max_tokens"])
        elif reasoning.get("effort") in EFFORT_SHARE:
            budget = int(cap * EFFORT_SHARE[str(reasoning["effort"])])
        else:
            budget = int(cap * EFFORT_SHARE["medium"]) if reasoning.get("enabled") else 0
    elif any(fnmatch.fnmatchcase(model.split(":", 1)[0], glob) for glob in REASONING_BY_DEFAULT):
        budget = cap
    else:
        return 0
    return max(0, min(budget, THINKING_NEED.get(kind, 512), cap))


ANTHROPIC_CACHE_READ_FACTOR = 0.1
ANTHROPIC_CACHE_WRITE_FACTOR = 1.25
CACHE_LOOKBACK = 20
"""Anthropic looks for a cached prefix at each breakpoint and up to 20 blocks before it."""


def breakpoint_cached(model: str) -> bool:
    """Does the model cache only at `cache_control` breakpoints (Anthropic's), not by itself?"""
    return model.strip().lower().startswith("anthropic/")


def anthropic_min_tokens(model: str) -> int:
    """The shortest prefix Anthropic caches for a model (its published cache limitations)."""
    name = model.lower()
    if re.search(r"opus-4\.[56]\b|haiku-4\.5\b", name):
        return 4096
    if re.search(r"opus-4\.7\b|haiku-3\.5\b", name):
        return 2048
    if re.search(r"(sonnet|opus|haiku|fable)-5(\.\d+)?\b", name):
        return 512
    return 1024


def has_breakpoint(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and isinstance(p.get("cache_control"), dict)
                                             for p in content)


def plain_message(message: dict[str, Any]) -> dict[str, Any]:
    """The message as the provider caches it: breakpoint markers are not content (a one-block text list is
    the same text as the string)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p for p in content]
    if len(parts) == 1 and isinstance(parts[0], dict) and parts[0].get("type") == "text":
        return {**message, "content": parts[0].get("text")}
    return {**message, "content": parts}


def canonical_json(value: Any) -> str:
    """The serialisation token accounting and the cache prefix are computed on (see module doc)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over slice comparisons, which run in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def prompt_chars(body: dict[str, Any]) -> int:
    """Characters the prompt is billed on (module doc: Accounting)."""
    total = 0
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        total += len(_content_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                total += len(str((call.get("function") or {}).get("arguments") or ""))
    for key in ("tools", "response_format"):
        if body.get(key):
            total += len(canonical_json(body[key]))
    return total


def error_envelope(status: int, message: str | None = None, **extra_metadata: Any) -> dict[str, Any]:
    """OpenRouter's error envelope: `{"error": {"code", "message", "metadata"}}`, code == HTTP status."""
    default_message, error_type = _STATUS_DEFAULTS.get(status, ("Error", "unmapped"))
    metadata: dict[str, Any] = {"error_type": error_type}
    metadata.update(extra_metadata)
    return {"error": {"code": status, "message": message or default_message, "metadata": metadata}}


@dataclass(frozen=True)
class Endpoint:
    name: str  # display name, as responses report it
    tag: str  # routing slug, as requests name it
    parameters: tuple[str, ...] = strict.STANDARD_PARAMETERS  # its `supported_parameters`


def endpoints_for(model: str, scenario: dict[str, Any] | None = None) -> list[Endpoint]:
    """The endpoints serving a model: the scenario's `endpoints` entry for it, else the catalogue by
    author; unknown authors get one endpoint of their own."""
    for glob, entries in ((scenario or {}).get("endpoints") or {}).items():
        if fnmatch.fnmatchcase(model, glob) and isinstance(entries, list):
            return [Endpoint(str(e["provider"]), str(e["tag"]),
                             tuple(e.get("supported_parameters") or strict.STANDARD_PARAMETERS))
                    for e in entries if isinstance(e, dict)]
    author = model.split("/", 1)[0]
    entries = CATALOGUE.get(author) or ((author.replace("-", " ").title(), author, strict.STANDARD_PARAMETERS),)
    return [Endpoint(name, tag, params) for name, tag, params in entries]


def _choice(turn: Turn, served_model: str, finish_reason: str, native: str,
            error: dict[str, Any] | None) -> dict[str, Any]:
    """The one choice of a completion: the turn's message (tool calls with the thought signatures Gemini
    3 requires), or, for an error in an HTTP-200 body, an empty message with `finish_reason: "error"`."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content, "refusal": None, "reasoning": None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": call.id, "type": "function", "index": i,
             "function": {"name": call.name, "arguments": call.arguments}}
            for i, call in enumerate(turn.tool_calls)]
        if strict.requires_thought_signatures(served_model):
            message["reasoning_details"] = strict.reasoning_details_for(
                (call.id, call.name, call.arguments) for call in turn.tool_calls)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "message": message}
    if error is not None:
        message["content"] = ""
        message.pop("tool_calls", None)
        choice.update(finish_reason="error", native_finish_reason="error", error=error)
    else:
        choice.update(finish_reason=finish_reason, native_finish_reason=native)
    return choice


class FakeGateway(FakeServer):
    """Fake OpenRouter: scripted researcher answers, OpenRouter metadata, and scripted faults."""

    def __init__(self, scenario: dict[str, Any] | None = None, valid_keys: set[str] | None = None,
                 host: str = "127.0.0.1", port: int = 0, request_log: str | os.PathLike[str] | None = None) -> None:
        super().__init__(host, port)
        log = request_log if request_log is not None else os.environ.get(REQUEST_LOG_VARIABLE)
        self.request_log = Path(log) if log else None
        Realism.parse((scenario or {}).get("realism"))  # a malformed setting fails here, loudly
        self._initial_scenario: dict[str, Any] = copy.deepcopy(scenario or {})
        self.valid_keys = set(valid_keys) if valid_keys is not None else None
        self._state = threading.RLock()
        self.scenario: dict[str, Any] = {}
        self.completions: list[dict[str, Any]] = []
        self.generations: dict[str, dict[str, Any]] = {}
        self._gen_counter = 0
        self._call_counts: dict[str, int] = {}
        self._rule_uses: dict[int, int] = {}
        self._last_prompt: dict[str, str] = {}
        self._seen_models: set[str] = set()
        self._lookups: dict[str, int] = {}
        self._cost_split: dict[str, tuple[float, float]] = {}
        self._pending: set[str] = set()
        self._breakpoints: dict[str, set[str]] = {}
        self.reset()

    # -- public API ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """What OPENROUTER_BASE_URL should be: the root plus `/api/v1`, as on openrouter.ai."""
        return self.root_url + "/api/v1"

    def set_scenario(self, scenario: dict[str, Any] | None) -> None:
        """Replace the scenario; rule `times` counters restart, per-session call numbers do not. ValueError
        when its `realism` setting is malformed."""
        Realism.parse((scenario or {}).get("realism"))
        with self._state:
            self.scenario = copy.deepcopy(scenario or {})
            self._rule_uses = {}

    def wait_settled(self, timeout_s: float = 30.0) -> bool:
        """Wait until no stream is open (each abandoned one billed): for tests that read the books."""
        ends = time.monotonic() + timeout_s
        while time.monotonic() < ends:
            with self._state:
                if not self._pending:
                    return True
            time.sleep(0.01)
        return False

    def reset(self) -> None:
        """Forget every call, generation and cache prefix, and restore the constructor's scenario."""
        with self._state:
            self.scenario = copy.deepcopy(self._initial_scenario)
            self.completions = []
            self.generations = {}
            self._gen_counter = 0
            self._call_counts = {}
            self._rule_uses = {}
            self._last_prompt = {}
            self._seen_models = set()
            self._lookups = {}
            self._cost_split = {}
            self._pending = set()
            self._breakpoints = {}

    # -- dispatch --------------------------------------------------------------------------
    def handle(self, request: FakeRequest) -> FakeResponse:
        """Route one request; unknown paths get OpenRouter's 404 envelope so client errors stay typed."""
        path = request.path.rstrip("/") or "/"
        method = request.method
        if path == "/__fake__/scenario":
            if method == "POST":
                try:
                    self.set_scenario(request.json() or {})
                except ValueError as exc:
                    return FakeResponse.json(error_envelope(400, f"invalid scenario: {exc}"), 400)
            with self._state:
                return FakeResponse.json({"scenario": self.scenario})
        if path == "/__fake__/reset" and method == "POST":
            self.reset()
            return FakeResponse.json({"ok": True})
        if path == "/__fake__/calls" and method == "GET":
            with self._state:
                return FakeResponse.json({"completions": self.completions})
        if path == "/api/v1/chat/completions" and method == "POST":
            return self._chat(request)
        if method == "GET":
            if path == "/api/v1/models":  # `ModelsListResponse`, the whole list in one page
                listed = [self._model_entry(m) for m in self._listed_models()]
                return FakeResponse.json({"data": listed, "total_count": len(listed), "links": {"next": None}})
            match = _ENDPOINTS_PATH.match(path)
            if match and f"{match.group(1)}/{match.group(2)}" in self._retired():
                return FakeResponse.json(error_envelope(404, f"Model {match.group(1)}/{match.group(2)} not found"),
                                         404)
            if match:
                return FakeResponse.json({"data": self._endpoints_entry(f"{match.group(1)}/{match.group(2)}")})
            if path == "/api/v1/providers":
                return FakeResponse.json({"data": self._providers()})
            denied = self._auth(request)
            if denied is not None:
                return denied
            if path == "/api/v1/generation":
                return self._generation(request.param("id") or "")
            if path == "/api/v1/key":
                return FakeResponse.json({"data": self._key_info(request)})
            if path == "/api/v1/credits":
                with self._state:
                    used = round(sum(g["total_cost"] for g in self.generations.values()), 8)
                return FakeResponse.json({"data": {"total_credits": 100.0, "total_usage": used}})
        return FakeResponse.json(error_envelope(404, f"Not found: {method} {request.path}"), 404)

    # -- auth ------------------------------------------------------------------------------
    @staticmethod
    def _bearer(request: FakeRequest) -> str:
        value = request.headers.get("authorization", "")
        return value[7:].strip() if value[:7].lower() == "bearer " else ""

    def _auth(self, request: FakeRequest) -> FakeResponse | None:
        key = self._bearer(request)
        if not key:
            return FakeResponse.json(error_envelope(401, "No auth credentials found"), 401)
        if self.valid_keys is not None and key not in self.valid_keys:
            return FakeResponse.json(error_envelope(401, "User not found."), 401)
        return None

    # -- chat completions ------------------------------------------------------------------
    def _chat(self, request: FakeRequest) -> FakeResponse:
        if self.request_log is not None:  # every chat request body as sent, one JSON line (module doc)
            with self._state, self.request_log.open("ab") as log:
                log.write(request.body.replace(b"\n", b" ") + b"\n")
        denied = self._auth(request)
        if denied is not None:
            return denied
        try:
            body = request.json()
        except (ValueError, UnicodeDecodeError):
            return FakeResponse.json(error_envelope(400, "Request body is not valid JSON"), 400)
        if not isinstance(body, dict):
            return FakeResponse.json(error_envelope(400, "Request body must be a JSON object"), 400)
        invalid = self._validate(body)
        if invalid is not None:
            return invalid
        self._wait_while_held()
        with self._state:
            return self._chat_locked(request, body)

    def _wait_while_held(self) -> None:
        """With `hold: true` in the scenario every completion waits (before it is counted) until a later
        scenario drops it: a test that needs a run mid-flight — holding the repository lock — for as long as
        its own checks take, whatever the machine's load (a fixed latency was outrun on a loaded machine)."""
        while True:
            with self._state:
                if not self.scenario.get("hold"):
                    return
            time.sleep(0.02)

    def _validate(self, body: dict[str, Any]) -> FakeResponse | None:
        refused = self._refuse_response_format(body)
        if refused is not None:
            return refused
        if "stream" in body and not isinstance(body["stream"], bool):
            return FakeResponse.json(error_envelope(400, "stream must be a boolean"), 400)
        if body.get("models"):
            return FakeResponse.json(error_envelope(400, "a `models` fallback list is not supported by the fake"),
                                     400)
        model = body.get("model")
        if not isinstance(model, str) or not re.fullmatch(r"[a-z0-9][\w.-]*/[\w.:-]+", model, re.IGNORECASE) \
                or model.startswith("openrouter/") or model.split(":", 1)[0] in self._retired():
            envelope = error_envelope(400, f"{model!r} is not a valid model ID (the fake takes author/name slugs "
                                           "only; no aliases or routers)")
            envelope["error"]["availability"] = {"code": "model_not_found", "retryable": False,
                                                 "requested_models": [model]}
            return FakeResponse.json(envelope, 400)
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return FakeResponse.json(error_envelope(400, "messages must be a non-empty array"), 400)
        return None

    def _refuse_response_format(self, body: dict[str, Any]) -> FakeResponse | None:
        """A local server's refusal of a `response_format` type it does not take (scenario
        `response_formats`), as llama-cpp-python's FastAPI request models give it: HTTP 422 with
        pydantic's `detail` list ("Input should be 'text' or 'json_object'")."""
        accepted = self.scenario.get("response_formats")
        response_format = body.get("response_format")
        if not isinstance(accepted, list) or not isinstance(response_format, dict):
            return None
        kind = response_format.get("type")
        if kind in accepted:
            return None
        allowed = " or ".join(f"'{k}'" for k in accepted)
        return FakeResponse.json({"detail": [{"type": "literal_error", "loc": ["body", "response_format", "type"],
                                              "msg": f"Input should be {allowed}", "input": kind,
                                              "ctx": {"expected": allowed}}]}, 422)

    def _match_rule(self, body: dict[str, Any], session: str, call_no: int, kind: str) -> tuple[int, dict[str, Any]]:
        for index, rule in enumerate(self.scenario.get("rules") or []):
            if not isinstance(rule, dict):
                continue
            match = rule.get("match") or {}
            checks = (("model", str(body.get("model"))), ("session", session), ("kind", kind),
                      ("schema", structured_name(body) or ""))
            if any(key in match and not fnmatch.fnmatchcase(value, str(match[key])) for key, value in checks):
                continue
            if "on_call" in rule and rule["on_call"] != call_no:
                continue
            if "calls" in rule and call_no not in (rule["calls"] or []):
                continue
            if "times" in rule and self._rule_uses.get(index, 0) >= int(rule["times"]):
                continue
            self._rule_uses[index] = self._rule_uses.get(index, 0) + 1
            return index, rule
        return -1, {}

    def _scripted(self, body: dict[str, Any], rule: dict[str, Any], record: dict[str, Any],
                  delay: float) -> FakeResponse | None:
        """What a rule answers before any routing — a reset connection, a raw body, a whole scripted
        completion, or an HTTP error in OpenRouter's envelope — or None for a served completion."""
        if rule.get("reset"):
            record["status"] = "reset"
            return FakeResponse(reset_connection=True, delay_s=delay)
        if rule.get("raw_body") is not None:
            record["status"] = "raw"
            return FakeResponse(status=200, body=str(rule["raw_body"]).encode("utf-8"),
                                headers={"Content-Type": "application/json"}, delay_s=delay)
        if isinstance(rule.get("answer"), dict):  # a scripted chat completion, in the form the request asked for
            record["status"] = "answer"
            answer: dict[str, Any] = rule["answer"]
            headers = {"X-Generation-Id": str(answer.get("id") or "")}
            if body.get("stream") is True:
                return self._streamed(answer, headers, str(answer.get("id") or ""), str(answer.get("provider") or ""),
                                      rule, delay, None)
            return FakeResponse.json(answer, 200, headers=headers, delay_s=delay)
        if not rule.get("status"):
            return None
        status = int(rule["status"])
        record["status"] = status
        headers = {}
        if rule.get("retry_after") is not None:
            headers["Retry-After"] = str(rule["retry_after"])
        if status == 429:
            headers.update({"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0",
                            "X-RateLimit-Reset": str((EPOCH + 60) * 1000)})
        envelope = error_envelope(status, rule.get("message"))
        if status == 404:
            envelope["error"]["availability"] = {"code": "no_endpoints", "retryable": False,
                                                 "requested_models": [str(body["model"])]}
        return FakeResponse.json(envelope, status, headers=headers, delay_s=delay)

    def _chat_locked(self, request: FakeRequest, body: dict[str, Any]) -> FakeResponse:
        requested = str(body["model"])
        session = str(body.get("session_id") or "")
        counter_key = session or requested
        self._call_counts[counter_key] = call_no = self._call_counts.get(counter_key, 0) + 1
        script = self.scenario.get("script") or {}
        kind = classify(body, script)
        rule_index, rule = self._match_rule(body, session, call_no, kind)
        delay = float(self.scenario.get("latency_s") or 0.0) + float(rule.get("delay_s") or 0.0)
        record: dict[str, Any] = {
            "seq": len(self.completions) + 1, "session": session or None, "call": call_no, "kind": kind,
            "rule": rule_index if rule_index >= 0 else None, "requested_model": requested,
            "request": body, "metadata_requested": self._metadata_enabled(request),
            "status": 200, "generation_id": None, "served_model": None, "served_provider": None,
            "finish_reason": None, "usage": None, "cache_status": None,
        }
        self.completions.append(record)
        self._seen_models.add(requested.split(":", 1)[0])

        scripted = self._scripted(body, rule, record, delay)
        if scripted is not None:
            return scripted

        route = self._route(body, rule)
        if isinstance(route, FakeResponse):
            record["status"] = route.status
            route.delay_s = delay
            return route
        served_model, served_provider, endpoints, failed_provider = route
        refused = self._refuse_conversation(body, requested, served_provider)
        if refused is not None:
            record["status"] = refused.status
            refused.delay_s = delay
            return refused

        thinking = thinking_tokens(body, requested, kind)
        turn, finish_reason = self._output_cap(
            plan_turn(body, script, quirks=frozenset(q for q in STRUCTURED_QUIRKS if rule.get(q)),
                      realism=Realism.parse(self.scenario.get("realism"))), body, thinking)
        native = "max_tokens" if finish_reason == "length" else finish_reason

        self._gen_counter += 1
        n = self._gen_counter
        gen_id = f"gen-{n:010d}"
        created = EPOCH + n
        cache_hit = bool(rule.get("cache_hit"))
        error_mode = rule.get("error_in_200") or ("choice" if rule.get("mid_stream_error") else None)
        # A failed generation is not billed and does not warm the prompt cache.
        usage = self._zero_usage() if error_mode else self._usage(body, turn, served_model, counter_key, cache_hit,
                                                                   rule, thinking)
        record.update(generation_id=gen_id, served_model=served_model, served_provider=served_provider,
                      finish_reason="error" if error_mode else finish_reason, usage=usage,
                      cache_status="HIT" if cache_hit else "MISS")
        cache_source = self._cache_source(session) if cache_hit else None
        attempts = [{"provider": failed_provider, "model": served_model, "status": 502}] if failed_provider else []
        attempts.append({"provider": served_provider, "model": served_model, "status": 200})

        payload: dict[str, Any] = {"id": gen_id, "object": "chat.completion", "created": created,
                                   "model": served_model}
        if not rule.get("no_metadata"):
            payload["provider"] = served_provider
        payload.update(system_fingerprint=None, service_tier="default")
        error_obj = {"code": int(rule.get("code") or 502),
                     "message": str(rule.get("message") or "Provider returned error"),
                     "metadata": {"error_type": "provider_unavailable", "provider_name": served_provider}}
        if error_mode == "top_level":
            payload["error"] = error_obj
        else:
            payload["choices"] = [_choice(turn, served_model, finish_reason, native,
                                          error_obj if error_mode else None)]
        payload["usage"] = usage
        metadata_enabled = self._metadata_enabled(request)
        if metadata_enabled and not cache_hit and not rule.get("no_metadata"):
            payload["openrouter_metadata"] = {
                "requested": requested, "strategy": "direct", "region": "iad",
                "summary": f"available={len(endpoints)}, selected={served_provider}",
                "attempt": len(attempts), "is_byok": bool(usage.get("is_byok")),
                "endpoints": {"total": len(endpoints), "available": [
                    {"provider": name, "model": served_model, "selected": name == served_provider}
                    for name in endpoints]},
                "attempts": attempts,
            }

        details = usage.get("cost_details") or {}
        self._cost_split[gen_id] = (float(details.get("upstream_inference_prompt_cost") or 0.0),
                                    float(details.get("upstream_inference_completions_cost") or 0.0))
        latency_ms = 400 + int(delay * 1000) + usage["completion_tokens"] // 10
        self.generations[gen_id] = self._generation_record(
            gen_id, n, body, request, served_model, served_provider, attempts, cache_source,
            "error" if error_mode else finish_reason, "error" if error_mode else native, usage, latency_ms)
        headers = {"X-Generation-Id": gen_id, "X-OpenRouter-Cache-Status": "HIT" if cache_hit else "MISS"}
        if cache_hit:
            headers.update({"X-OpenRouter-Cache-Age": "42", "X-OpenRouter-Cache-TTL": "300",
                            "X-OpenRouter-Cache-Source-Id": cache_source or ""})
        if body.get("stream") is True:
            self.generations[gen_id]["streamed"] = True
            self._pending.add(gen_id)  # settled (and shown at /generation) when the stream ends
            return self._streamed(payload, headers, gen_id, served_provider, rule, delay,
                                  error_obj if error_mode else None)
        return FakeResponse.json(payload, 200, headers=headers, delay_s=delay)

    def _streamed(self, payload: dict[str, Any], headers: dict[str, str], gen_id: str, provider: str,
                  rule: dict[str, Any], delay: float, error: dict[str, Any] | None) -> FakeResponse:
        """The completion as OpenRouter streams it (module `sse`): keep-alive comments through the delay,
        the deltas (a `stall_s` halfway), the usage chunk; with an error, the mid-stream error chunk."""
        pieces = list(sse.chunks(payload, delay_s=delay, stall_s=float(rule.get("stall_s") or 0.0),
                                 keepalive_s=float(self.scenario.get("keepalive_s") or KEEPALIVE_S), error=error,
                                 bad=str(rule["bad_chunk"]) if rule.get("bad_chunk") else None))

        def ended(sent: int, completed: bool) -> None:
            self._stream_ended(gen_id, provider, pieces, sent, completed)

        return FakeResponse(status=200, headers={**headers, "Content-Type": "text/event-stream",
                                                 "Cache-Control": "no-cache"}, stream=pieces, on_end=ended)

    def _stream_ended(self, gen_id: str, provider: str, pieces: list[bytes | float], sent: int,
                      completed: bool) -> None:
        """Billing of a stream the client abandoned: a provider that supports cancellation stops at what it
        had streamed (the prompt and the output sent so far); one that does not (Google's) bills it all."""
        try:
            if not completed and provider not in NON_CANCELLING_PROVIDERS:
                self._cancel(gen_id, pieces, sent)
        finally:
            with self._state:
                self._pending.discard(gen_id)

    def _cancel(self, gen_id: str, pieces: list[bytes | float], sent: int) -> None:
        """The generation of an abandoned stream, billed for the prompt and the output streamed so far."""
        events = [p for p in pieces if isinstance(p, bytes) and p.startswith(b"data: {")]
        written = [p for p in pieces if isinstance(p, bytes)][:sent]
        share = sum(1 for p in written if p.startswith(b"data: {")) / max(1, len(events))
        with self._state:
            record = self.generations.get(gen_id)
            split = self._cost_split.get(gen_id)
            if record is None or split is None:
                return
            prompt_cost, completion_cost = split
            record["cancelled"] = True
            record["tokens_completion"] = record["native_tokens_completion"] = int(record["tokens_completion"] * share)
            record["total_cost"] = record["usage"] = round(prompt_cost + completion_cost * share, 8)

    @staticmethod
    def _refuse_conversation(body: dict[str, Any], model: str, provider: str) -> FakeResponse | None:
        """The serving provider's 400 for a conversation a strict server refuses (module `strict`):
        unknown or deprecated assistant fields, `content: null`, unanswered tool calls, for
        `google/gemini-3*` tool-call turns without their thought signatures, and for `google/*` tool
        schemas with keywords Google's function declarations do not take."""
        problem = strict.message_problem(body["messages"], model)
        if problem is None and strict.requires_thought_signatures(model):
            problem = strict.signature_problem(body["messages"])
        if problem is None and strict.takes_gemini_schemas(model):
            problem = strict.gemini_schema_problem(body)
        if problem is None:
            return None
        envelope = error_envelope(400, "Provider returned error", raw=problem, provider_name=provider)
        envelope["error"]["metadata"]["error_type"] = "invalid_request"
        return FakeResponse.json(envelope, 400)

    # -- routing ---------------------------------------------------------------------------
    def _route(self, body: dict[str, Any], rule: dict[str, Any]
               ) -> FakeResponse | tuple[str, str, list[str], str | None]:
        """(served model, served provider, available provider names, failed first attempt) or a 404.

        `provider.require_parameters: true` keeps only endpoints whose `supported_parameters` list every
        parameter sent (module `strict`); when that leaves none of the allowed ones, the answer is
        OpenRouter's 404 "No endpoints found that can handle the requested parameters."
        """
        requested = str(body["model"])
        base_model = requested.split(":", 1)[0]
        raw_prefs = body.get("provider")
        prefs: dict[str, Any] = raw_prefs if isinstance(raw_prefs, dict) else {}

        def tags(key: str) -> list[str]:
            return [str(t).split("/", 1)[0] for t in (prefs.get(key) or [])]

        order, only, ignore = tags("order"), tags("only"), tags("ignore")
        allowed = [e for e in endpoints_for(base_model, self.scenario) if (not only or e.tag in only)
                   and e.tag not in ignore]
        candidates = allowed
        if prefs.get("require_parameters") is True:
            needed = strict.sent_parameters(body)
            candidates = [e for e in allowed if needed <= set(e.parameters)]
        chosen = next((e for tag in order for e in candidates if e.tag == tag), None)
        if chosen is None:
            pinned_only = bool(order) and prefs.get("allow_fallbacks") is False
            pool = [] if pinned_only else candidates
            if not pool:
                before = [e for e in allowed if e.tag in order] if pinned_only else allowed
                if before:  # there were endpoints: require_parameters removed them all
                    return self._no_endpoints_for_parameters(requested, body, before)
                envelope = error_envelope(404, f"No endpoints found for {requested} matching your provider "
                                               "routing constraints", previous_errors=[])
                envelope["error"]["availability"] = {
                    "code": "no_endpoints", "retryable": False, "requested_models": [requested],
                    "affected_providers": order or only, "excluded_by": ["allowed_providers"],
                    "docs_url": "https://openrouter.ai/docs/errors#no_endpoints"}
                envelope["error"]["error_type"] = "not_found"
                envelope["error"]["http_status"] = 404
                return FakeResponse.json(envelope, 404)
            chosen = pool[0]

        served_model = str(rule.get("serve_model") or base_model)
        if rule.get("dated_model"):
            served_model += DATED_SUFFIX
        served_catalogue = endpoints_for(served_model, self.scenario)
        if all(e.tag != chosen.tag for e in served_catalogue):
            chosen = served_catalogue[0]
        served_provider = str(rule.get("serve_provider") or chosen.name)
        names = [e.name for e in served_catalogue]
        if served_provider not in names:
            names.append(served_provider)
        failed = None
        if rule.get("fallback_attempt"):
            failed = next((name for name in names if name != served_provider), served_provider)
        return served_model, served_provider, names, failed

    @staticmethod
    def _no_endpoints_for_parameters(requested: str, body: dict[str, Any], endpoints: list[Endpoint]
                                     ) -> FakeResponse:
        """OpenRouter's answer when `require_parameters` leaves no endpoint (availability `constraint_filtered`)."""
        needed = strict.sent_parameters(body)
        missing = sorted({p for e in endpoints for p in needed - set(e.parameters)})
        envelope = error_envelope(404, strict.NO_ENDPOINTS_FOR_PARAMETERS, previous_errors=[])
        envelope["error"]["error_type"] = "not_found"
        envelope["error"]["http_status"] = 404
        envelope["error"]["availability"] = {
            "code": "constraint_filtered", "retryable": False, "requested_models": [requested],
            "affected_providers": sorted({e.tag for e in endpoints}), "excluded_by": ["require_parameters"],
            "constraint": {"field": "require_parameters",
                           "detail": f"no endpoint supports every parameter sent (missing: {', '.join(missing)})"},
            "docs_url": "https://openrouter.ai/docs/errors#constraint_filtered"}
        return FakeResponse.json(envelope, 404)

    @staticmethod
    def _metadata_enabled(request: FakeRequest) -> bool:
        for header in ("x-openrouter-metadata", "x-openrouter-experimental-metadata"):
            if request.headers.get(header, "").strip().lower() == "enabled":
                return True
        return False

    # -- scripted effects ------------------------------------------------------------------
    @staticmethod
    def _cut(text: str, limit: int) -> str:
        """Cut at or before `limit` characters, on a space so the continuation splices exactly."""
        if len(text) <= limit:
            return text
        space = text.rfind(" ", 0, limit)
        return text[:space if space > 0 else limit]

    def _output_cap(self, turn: Turn, body: dict[str, Any], thinking: int = 0) -> tuple[Turn, str]:
        """The turn and its finish reason: text past `max_completion_tokens` (or `max_tokens`) is cut, on a
        space so a continuation splices exactly, and finishes with `length`, as a real provider's does.
        Reasoning tokens (`thinking`) share the cap with the answer, and a tool call cut short is no call."""
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if not (isinstance(limit, int) and limit > 0):
            return turn, "tool_calls" if turn.tool_calls else "stop"
        room = max(0, limit - thinking)
        if turn.tool_calls:
            if math.ceil(sum(len(c.arguments) for c in turn.tool_calls) / 4) > room:
                return Turn(turn.kind, "", [], turn.plan_text), "length"
            return turn, "tool_calls"
        if turn.content and math.ceil(len(turn.content) / 4) > room:
            return Turn(turn.kind, self._cut(turn.content, room * 4) if room else "", [], turn.plan_text), "length"
        return turn, "stop"

    # -- accounting ------------------------------------------------------------------------
    def _prices(self, model: str) -> tuple[float, float]:
        for glob, price in (self.scenario.get("pricing") or {}).items():
            if fnmatch.fnmatchcase(model, glob) and isinstance(price, dict):
                return (float(price.get("prompt", DEFAULT_PRICE_PROMPT)),
                        float(price.get("completion", DEFAULT_PRICE_COMPLETION)))
        return DEFAULT_PRICE_PROMPT, DEFAULT_PRICE_COMPLETION

    def _overrides(self, model: str) -> list[dict[str, float]]:
        """`pricing.overrides` (USD per 1M tokens): the scenario's for the model, else the catalogue's
        long-context ones (factors of the base price)."""
        for glob, price in (self.scenario.get("pricing") or {}).items():
            if fnmatch.fnmatchcase(model, glob) and isinstance(price, dict) and "overrides" in price:
                return [dict(o) for o in price["overrides"] or [] if isinstance(o, dict)]
        base_in, base_out = self._prices(model)
        for glob, entries in LONG_CONTEXT_OVERRIDES.items():
            if fnmatch.fnmatchcase(model, glob):
                return [{"min_prompt_tokens": e["min_prompt_tokens"], "prompt": base_in * e["prompt_factor"],
                         "completion": base_out * e["completion_factor"]} for e in entries]
        return []

    def _prices_at(self, model: str, prompt_tokens: int) -> tuple[float, float]:
        """USD per 1M tokens for a prompt of this size: overrides whose `min_prompt_tokens` is strictly
        exceeded apply, later entries winning per price key."""
        price_in, price_out = self._prices(model)
        for entry in self._overrides(model):
            if prompt_tokens > float(entry.get("min_prompt_tokens", 0)):
                price_in = float(entry.get("prompt", price_in))
                price_out = float(entry.get("completion", price_out))
        return price_in, price_out

    @staticmethod
    def _zero_usage() -> dict[str, Any]:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0, "audio_tokens": 0,
                                          "video_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
                "cost": 0.0, "is_byok": False,
                "cost_details": {"upstream_inference_cost": None, "upstream_inference_prompt_cost": 0.0,
                                 "upstream_inference_completions_cost": 0.0}}

    def _usage(self, body: dict[str, Any], turn: Turn, model: str, cache_key: str, cache_hit: bool,
               rule: dict[str, Any] | None = None, thinking: int = 0) -> dict[str, Any]:
        if cache_hit:
            return self._zero_usage()
        prompt_tokens = max(1, math.ceil(prompt_chars(body) / 4))
        out_chars = len(turn.content or "") + sum(len(call.arguments) for call in turn.tool_calls)
        visible = math.ceil(out_chars / 4)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        thinking = min(thinking, limit) if isinstance(limit, int) and limit > 0 else thinking
        completion_tokens = max(1, visible + thinking)  # reasoning tokens are output tokens, billed alike
        if breakpoint_cached(model):
            cached, written = self._breakpoint_cache(body, cache_key, prompt_tokens)
            read_factor, write_factor = ANTHROPIC_CACHE_READ_FACTOR, ANTHROPIC_CACHE_WRITE_FACTOR
        else:
            serial = canonical_json(body.get("messages") or [])
            previous = self._last_prompt.get(cache_key, "")
            common = common_prefix_len(serial, previous) // 4
            cached = min(common, prompt_tokens) if common >= CACHE_MIN_TOKENS else 0
            self._last_prompt[cache_key] = serial
            written, read_factor, write_factor = 0, CACHED_PRICE_FACTOR, 1.0
        price_in, price_out = self._prices_at(model, prompt_tokens)
        plain = prompt_tokens - cached - written
        prompt_cost = (plain * price_in + cached * price_in * read_factor + written * price_in * write_factor) / 1e6
        completion_cost = completion_tokens * price_out / 1e6
        usage = self._zero_usage()
        usage.update(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                     total_tokens=prompt_tokens + completion_tokens,
                     cost=round(prompt_cost + completion_cost, 8))
        usage["prompt_tokens_details"]["cached_tokens"] = cached
        usage["prompt_tokens_details"]["cache_write_tokens"] = written
        usage["completion_tokens_details"]["reasoning_tokens"] = thinking
        usage["cost_details"].update(upstream_inference_prompt_cost=round(prompt_cost, 8),
                                     upstream_inference_completions_cost=round(completion_cost, 8))
        if self.scenario.get("byok"):  # the provider bills the user's own key; OpenRouter charges a fee
            upstream = round(prompt_cost + completion_cost, 8)
            usage.update(is_byok=True, cost=round(upstream * BYOK_FEE_SHARE, 8))
            usage["cost_details"]["upstream_inference_cost"] = upstream
        for key, field_value in ((rule or {}).get("usage_fields") or {}).items():  # a hostile gateway's usage
            usage[str(key)] = field_value
        if rule and "usage_cost" in rule:  # a hostile or broken gateway's cost
            value = rule["usage_cost"]
            usage["cost"] = float(value) if value in ("NaN", "Infinity", "-Infinity") else value
        return usage

    def _breakpoint_cache(self, body: dict[str, Any], cache_key: str, prompt_tokens: int) -> tuple[int, int]:
        """(read, written) prompt tokens of a model that caches only at breakpoints (Anthropic's rules):
        the longest prefix cached earlier in the session that ends at one of this request's breakpoints or
        up to `CACHE_LOOKBACK` messages before one is read; the prefix up to each breakpoint that reaches
        the model's minimum is written (billed for what goes beyond the read). No breakpoint, no cache."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        marks = [i for i, m in enumerate(messages) if has_breakpoint(m)][-4:]  # at most four count
        if not marks:
            return 0, 0
        tools = body.get("tools")
        plain_messages = [plain_message(m) for m in messages]
        cached_prefixes = self._breakpoints.setdefault(cache_key, set())

        def prefix(end: int) -> tuple[str, int]:
            part = plain_messages[:end + 1]
            return canonical_json([tools, part]), math.ceil(prompt_chars({"messages": part, "tools": tools}) / 4)

        read = 0
        for mark in marks:
            for end in range(mark, max(-1, mark - CACHE_LOOKBACK), -1):
                key, tokens = prefix(end)
                if key in cached_prefixes:
                    read = max(read, tokens)
                    break
        longest = 0
        for mark in marks:
            key, tokens = prefix(mark)
            if tokens >= anthropic_min_tokens(str(body.get("model"))):
                cached_prefixes.add(key)
                longest = max(longest, tokens)
        read = min(read, prompt_tokens)
        return read, min(max(0, longest - read), prompt_tokens - read)

    def _cache_source(self, session: str) -> str:
        """The generation a response-cache hit claims to replay: the session's latest, else a fixed id."""
        for gen_id in sorted(self.generations, reverse=True):
            if not session or self.generations[gen_id].get("session_id") == session:
                return gen_id
        return "gen-0000000000"

    # -- generation records ----------------------------------------------------------------
    def _generation_record(self, gen_id: str, n: int, body: dict[str, Any], request: FakeRequest,
                           served_model: str, served_provider: str, attempts: list[dict[str, Any]],
                           cache_source: str | None, finish_reason: str, native: str, usage: dict[str, Any],
                           latency_ms: int) -> dict[str, Any]:
        byok = bool(usage.get("is_byok"))
        tags = {e.name: e.tag for e in endpoints_for(served_model, self.scenario)}
        responses = [{"provider_name": a["provider"], "model_permaslug": a["model"],
                      "endpoint_id": f"ep-{tags.get(a['provider'], 'unknown')}", "id": f"chatcmpl-fake-{n}-{i}",
                      "status": a["status"], "latency": latency_ms if a["status"] == 200 else 150,
                      "is_byok": byok} for i, a in enumerate(attempts)]
        created_at = datetime.fromtimestamp(EPOCH + n, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
        cost = usage["cost"]
        return {
            "id": gen_id, "upstream_id": f"chatcmpl-fake-{n}", "request_id": f"req-fake-{n:010d}",
            "model": served_model, "router": None, "provider_name": served_provider,
            "provider_responses": None if cache_source else responses,
            "response_cache_source_id": cache_source, "streamed": False, "cancelled": False, "is_byok": byok,
            "finish_reason": finish_reason, "native_finish_reason": native, "service_tier": "default",
            "tokens_prompt": usage["prompt_tokens"], "tokens_completion": usage["completion_tokens"],
            "native_tokens_prompt": usage["prompt_tokens"], "native_tokens_completion": usage["completion_tokens"],
            "native_tokens_reasoning": usage["completion_tokens_details"]["reasoning_tokens"],
            "native_tokens_cached": usage["prompt_tokens_details"]["cached_tokens"],
            "native_tokens_completion_images": 0, "total_cost": cost, "usage": cost,
            "upstream_inference_cost": usage["cost_details"].get("upstream_inference_cost") if byok else None,
            "cache_discount": None, "latency": latency_ms,
            "generation_time": max(0, latency_ms - 100), "moderation_latency": 0, "created_at": created_at,
            "num_search_results": 0, "num_fetches": 0, "web_search_engine": None, "origin": "",
            "http_referer": request.headers.get("http-referer"), "user_agent": request.headers.get("user-agent"),
            "app_id": None, "external_user": body.get("user"), "session_id": body.get("session_id"),
            "preset_id": None, "api_type": "completions", "data_region": "global", "workspace_id": None,
        }

    def _generation(self, gen_id: str) -> FakeResponse:
        """`GET /generation?id=`: like OpenRouter's, 404 for a while after the call — while its stream is
        still open, and for the first `generation_404s` look-ups of each id (default 1: counted, not timed)."""
        with self._state:
            record = self.generations.get(gen_id)
            self._lookups[gen_id] = seen = self._lookups.get(gen_id, 0) + 1
            lag = self.scenario.get("generation_404s", GENERATION_404S)
            if record is None or seen <= int(lag) or gen_id in self._pending:
                return FakeResponse.json(error_envelope(404, f"Generation {gen_id} not found"), 404)
            return FakeResponse.json({"data": record})

    # -- catalogue endpoints ---------------------------------------------------------------
    def _listed_models(self) -> list[str]:
        """`GET /models`: the known models, the scenario's `models` (more ids to list) and any model served,
        less the scenario's `retired` ones."""
        with self._state:
            extra = {str(m) for m in self.scenario.get("models") or []}
            return sorted((set(KNOWN_MODELS) | extra | self._seen_models) - self._retired())

    def _retired(self) -> set[str]:
        with self._state:
            return {str(m) for m in self.scenario.get("retired") or []}

    @staticmethod
    def _usd_per_token(per_million: float) -> str:
        return f"{per_million / 1e6:.12f}".rstrip("0").rstrip(".") or "0"

    def _pricing_entry(self, model: str) -> dict[str, Any]:
        """`PublicEndpoint.pricing`: USD per token as decimal strings, with any `overrides`."""
        price_in, price_out = self._prices(model)
        pricing: dict[str, Any] = {
            "prompt": self._usd_per_token(price_in), "completion": self._usd_per_token(price_out),
            "input_cache_read": self._usd_per_token(price_in * CACHED_PRICE_FACTOR), "request": "0", "image": "0"}
        if breakpoint_cached(model):
            pricing.update(input_cache_read=self._usd_per_token(price_in * ANTHROPIC_CACHE_READ_FACTOR),
                           input_cache_write=self._usd_per_token(price_in * ANTHROPIC_CACHE_WRITE_FACTOR))
        overrides = []
        for entry in self._overrides(model):
            override: dict[str, Any] = {"min_prompt_tokens": entry.get("min_prompt_tokens", 0)}
            for key in ("prompt", "completion"):
                if key in entry:
                    override[key] = self._usd_per_token(float(entry[key]))
            overrides.append(override)
        if overrides:
            pricing["overrides"] = overrides
        return pricing

    def _model_entry(self, model: str) -> dict[str, Any]:
        name = model.split("/", 1)[1].replace("-", " ").title()
        parameters = sorted({p for e in endpoints_for(model, self.scenario) for p in e.parameters})
        return {
            "id": model, "canonical_slug": model + DATED_SUFFIX, "name": name, "created": EPOCH,
            "description": f"{name} (served by the research-dispatch fake gateway)", "context_length": 200000,
            "architecture": {"modality": "text->text", "input_modalities": ["text"],
                             "output_modalities": ["text"], "tokenizer": "Other"},
            "pricing": self._pricing_entry(model),
            "top_provider": {"context_length": 200000, "max_completion_tokens": 32768, "is_moderated": False},
            "supported_parameters": parameters, "per_request_limits": None, "default_parameters": None,
            "supported_voices": None, "links": {"details": f"/api/v1/models/{model}/endpoints"},
        }

    def _endpoints_entry(self, model: str) -> dict[str, Any]:
        """`GET /models/{author}/{slug}/endpoints` data: every `PublicEndpoint` field, with each endpoint's
        own `supported_parameters` (what `require_parameters` routing checks)."""
        entry = self._model_entry(model.split(":", 1)[0])
        stats = {"p50": 40.0, "p75": 55.0, "p90": 70.0, "p99": 120.0}
        return {
            "id": entry["id"], "name": entry["name"], "created": EPOCH, "description": entry["description"],
            "architecture": entry["architecture"],
            "endpoints": [
                {"name": f"{e.name} | {entry['id']}", "model_id": entry["id"], "model_name": entry["name"],
                 "context_length": 200000, "pricing": entry["pricing"], "provider_name": e.name, "tag": e.tag,
                 "quantization": "bf16", "max_completion_tokens": 32768, "max_prompt_tokens": None,
                 "supported_parameters": list(e.parameters), "status": 0, "uptime_last_30m": 100.0,
                 "uptime_last_5m": 100.0, "uptime_last_1d": 99.9, "supports_implicit_caching": True,
                 "latency_last_30m": dict(stats), "throughput_last_30m": dict(stats)}
                for e in endpoints_for(entry["id"], self.scenario)],
        }

    def _providers(self) -> list[dict[str, str | None]]:
        with self._state:
            authors = sorted(set(CATALOGUE) | {m.split("/", 1)[0] for m in self._seen_models})
        seen: dict[str, str] = {}
        for author in authors:
            for e in endpoints_for(author + "/x", self.scenario):
                seen.setdefault(e.tag, e.name)
        return [{"name": name, "slug": slug, "privacy_policy_url": None, "terms_of_service_url": None,
                 "status_page_url": None} for slug, name in sorted(seen.items())]

    def _key_info(self, request: FakeRequest) -> dict[str, Any]:
        """`GET /key`: the key's record (OpenRouter's `data` of it): its limit, usage and what is left."""
        with self._state:
            used = round(sum(g["total_cost"] for g in self.generations.values()), 8)
            key = dict(self.scenario.get("key") or {})
        limit = key.get("limit")
        usage = round(float(key.get("usage") or 0.0) + used, 8)
        remaining = None if limit is None else round(max(0.0, float(limit) - usage), 8)
        return {"label": "fake-key-" + self._bearer(request)[-4:], "limit": limit, "usage": usage,
                "limit_remaining": remaining, "limit_reset": None, "is_free_tier": False,
                "is_provisioning_key": False}
