"""A fake OpenRouter gateway over real HTTP, so the real `openai` client is exercised end to end.

Why a real server with OpenRouter's wire format (reference/api-facts.md §1) rather than a mock: the
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
    call, id = the call's id).

Accounting (what the benchmarks rely on):
  * prompt_tokens = ceil(chars / 4) over every message `content` string, every tool-call `arguments`
    string, and `canonical_json(tools)` and `canonical_json(response_format)` when present;
  * completion_tokens = max(1, ceil(chars of output content + tool-call arguments) / 4));
  * cached_tokens: per `session_id` (else per requested model), the longest common prefix in characters
    of `canonical_json(messages)` of this request and of the previous successful one, // 4, counted only
    when >= 1024 tokens (and never above prompt_tokens);
  * cost = uncached prompt x price + cached x price x 0.25 + completion x price, rounded to 8 decimals;
    default prices $1/M prompt and $4/M completion, overridable per model glob in the scenario; past an
    override's `min_prompt_tokens` its prices apply (google/* models: 2x prompt, 1.5x completion past
    200k tokens, as listed in `pricing.overrides`);
  * with `"byok": true` the provider's charge is `usage.cost_details.upstream_inference_cost` and
    `usage.cost` is OpenRouter's 5% fee, `is_byok: true`.
  * `max_completion_tokens` (or `max_tokens`) is honoured: longer output is cut (finish_reason `length`).
`canonical_json` is `json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`.

Scenario format (constructor `scenario=`, `set_scenario()`, or `POST /__fake__/scenario`)::

    {"latency_s": 0.0,                       # added delay on every completion
     "script": {"searches": 2, "per_turn": 2, "extract_top": 3, "reads": 1,  # scripted researcher knobs
                "gullible": false},                                 # a misbehaviour: see script_researcher
     "pricing": {"<model glob>": {"prompt": 1.0, "completion": 4.0,     # USD per 1M tokens
                                  "overrides": [{"min_prompt_tokens": 1000, "prompt": 10.0}]}},
     "endpoints": {"<model glob>": [{"provider": "Acme", "tag": "acme",
                                     "supported_parameters": ["max_tokens", "tools"]}]},
     "byok": false,
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
  * `error_in_200`: "choice" (finish_reason "error" + `choices[0].error`) or "top_level" (`error`, no
    `choices`); `code` default 502, `metadata.error_type` "provider_unavailable"; usage is zero.
  * `serve_model: SLUG`, `dated_model` (serve `<requested>-20260401`), `serve_provider: DISPLAY NAME`.
  * `fallback_attempt`: attempt 2; the first attempt (another endpoint of the model) failed with 502; the
    served provider is unchanged, so only the attempts record shows the fallback.
  * `cache_hit`: `X-OpenRouter-Cache-Status: HIT`, zero usage and cost, no `openrouter_metadata`, and the
    generation's `response_cache_source_id` names the session's previous generation.
  * `no_metadata`: no `openrouter_metadata` and no top-level `provider`.
  * `delay_s`: extra delay.
  * `usage_cost: VALUE`: `usage.cost` is VALUE as is (a broken or hostile gateway): "NaN" and
    "Infinity" go out as those JSON number tokens, any other value verbatim.

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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from research_dispatch_fakes import strict
from research_dispatch_fakes.http import FakeRequest, FakeResponse, FakeServer
from research_dispatch_fakes.script_researcher import Turn, classify, plan_turn
from research_dispatch_fakes.script_structured import structured_name

REQUEST_LOG_VARIABLE = "RESEARCH_DISPATCH_FAKE_GATEWAY_LOG"
EPOCH = 1767225600  # 2026-01-01T00:00:00Z: `created` = EPOCH + generation number, never the wall clock
DATED_SUFFIX = "-20260401"
DEFAULT_PRICE_PROMPT = 1.0  # USD per 1M tokens
DEFAULT_PRICE_COMPLETION = 4.0
CACHED_PRICE_FACTOR = 0.25
CACHE_MIN_TOKENS = 1024

_STD = strict.STANDARD_PARAMETERS
CATALOGUE: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "google": (("Google", "google-vertex", _STD), ("Google AI Studio", "google-ai-studio", _STD)),
    # DeepSeek's own endpoints list the output cap only as `max_tokens` (api-facts §0.0)
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
KNOWN_MODELS = (
    "google/gemini-3.1-pro-preview",
    "deepseek/deepseek-v4-pro",
    "openai/gpt-5",
    "openai/gpt-5-mini",
    "anthropic/claude-sonnet-4.6",
    "moonshotai/kimi-k2-thinking",
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


class FakeGateway(FakeServer):
    """Fake OpenRouter: scripted researcher answers, OpenRouter metadata, and scripted faults."""

    def __init__(self, scenario: dict[str, Any] | None = None, valid_keys: set[str] | None = None,
                 host: str = "127.0.0.1", port: int = 0, request_log: str | os.PathLike[str] | None = None) -> None:
        super().__init__(host, port)
        log = request_log if request_log is not None else os.environ.get(REQUEST_LOG_VARIABLE)
        self.request_log = Path(log) if log else None
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
        self.reset()

    # -- public API ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """What OPENROUTER_BASE_URL should be: the root plus `/api/v1`, as on openrouter.ai."""
        return self.root_url + "/api/v1"

    def set_scenario(self, scenario: dict[str, Any] | None) -> None:
        """Replace the scenario; rule `times` counters restart, per-session call numbers do not."""
        with self._state:
            self.scenario = copy.deepcopy(scenario or {})
            self._rule_uses = {}

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

    # -- dispatch --------------------------------------------------------------------------
    def handle(self, request: FakeRequest) -> FakeResponse:
        """Route one request; unknown paths get OpenRouter's 404 envelope so client errors stay typed."""
        path = request.path.rstrip("/") or "/"
        method = request.method
        if path == "/__fake__/scenario":
            if method == "POST":
                self.set_scenario(request.json() or {})
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
            if path == "/api/v1/models":
                return FakeResponse.json({"data": [self._model_entry(m) for m in self._listed_models()]})
            match = _ENDPOINTS_PATH.match(path)
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
        with self._state:
            return self._chat_locked(request, body)

    @staticmethod
    def _validate(body: dict[str, Any]) -> FakeResponse | None:
        if body.get("stream"):
            return FakeResponse.json(error_envelope(400, "streaming not supported by the fake"), 400)
        if body.get("models"):
            return FakeResponse.json(error_envelope(400, "a `models` fallback list is not supported by the fake"),
                                     400)
        model = body.get("model")
        if not isinstance(model, str) or not re.fullmatch(r"[a-z0-9][\w.-]*/[\w.:-]+", model, re.IGNORECASE) \
                or model.startswith("openrouter/"):
            envelope = error_envelope(400, f"{model!r} is not a valid model ID (the fake takes author/name slugs "
                                           "only; no aliases or routers)")
            envelope["error"]["availability"] = {"code": "model_not_found", "retryable": False,
                                                 "requested_models": [model]}
            return FakeResponse.json(envelope, 400)
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return FakeResponse.json(error_envelope(400, "messages must be a non-empty array"), 400)
        return None

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

        if rule.get("reset"):
            record["status"] = "reset"
            return FakeResponse(reset_connection=True, delay_s=delay)
        if rule.get("raw_body") is not None:
            record["status"] = "raw"
            return FakeResponse(status=200, body=str(rule["raw_body"]).encode("utf-8"),
                                headers={"Content-Type": "application/json"}, delay_s=delay)
        if rule.get("status"):
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
                                                     "requested_models": [requested]}
            return FakeResponse.json(envelope, status, headers=headers, delay_s=delay)

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

        turn, finish_reason = self._output_cap(plan_turn(body, script), body)
        native = "max_tokens" if finish_reason == "length" else finish_reason

        self._gen_counter += 1
        n = self._gen_counter
        gen_id = f"gen-{n:010d}"
        created = EPOCH + n
        cache_hit = bool(rule.get("cache_hit"))
        error_mode = rule.get("error_in_200")
        # A failed generation is not billed and does not warm the prompt cache.
        usage = self._zero_usage() if error_mode else self._usage(body, turn, served_model, counter_key, cache_hit,
                                                                   rule)
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
            message: dict[str, Any] = {"role": "assistant", "content": turn.content, "refusal": None,
                                       "reasoning": None}
            if turn.tool_calls:
                message["tool_calls"] = [
                    {"id": call.id, "type": "function", "index": i,
                     "function": {"name": call.name, "arguments": call.arguments}}
                    for i, call in enumerate(turn.tool_calls)]
                if strict.requires_thought_signatures(served_model):
                    message["reasoning_details"] = strict.reasoning_details_for(
                        (call.id, call.name, call.arguments) for call in turn.tool_calls)
            choice: dict[str, Any] = {"index": 0, "logprobs": None, "message": message}
            if error_mode:
                message["content"] = ""
                message.pop("tool_calls", None)
                choice.update(finish_reason="error", native_finish_reason="error", error=error_obj)
            else:
                choice.update(finish_reason=finish_reason, native_finish_reason=native)
            payload["choices"] = [choice]
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

        latency_ms = 400 + int(delay * 1000) + usage["completion_tokens"] // 10
        self.generations[gen_id] = self._generation_record(
            gen_id, n, body, request, served_model, served_provider, attempts, cache_source,
            "error" if error_mode else finish_reason, "error" if error_mode else native, usage, latency_ms)
        headers = {"X-Generation-Id": gen_id, "X-OpenRouter-Cache-Status": "HIT" if cache_hit else "MISS"}
        if cache_hit:
            headers.update({"X-OpenRouter-Cache-Age": "42", "X-OpenRouter-Cache-TTL": "300",
                            "X-OpenRouter-Cache-Source-Id": cache_source or ""})
        return FakeResponse.json(payload, 200, headers=headers, delay_s=delay)

    @staticmethod
    def _refuse_conversation(body: dict[str, Any], model: str, provider: str) -> FakeResponse | None:
        """The serving provider's 400 for a conversation a strict server refuses (module `strict`):
        unknown or deprecated assistant fields, `content: null`, unanswered tool calls, and for
        `google/gemini-3*` tool-call turns without their thought signatures."""
        problem = strict.message_problem(body["messages"], model)
        if problem is None and strict.requires_thought_signatures(model):
            problem = strict.signature_problem(body["messages"])
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

    def _output_cap(self, turn: Turn, body: dict[str, Any]) -> tuple[Turn, str]:
        """The turn and its finish reason: text past `max_completion_tokens` (or `max_tokens`) is cut, on a
        space so a continuation splices exactly, and finishes with `length`, as a real provider's does."""
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if turn.tool_calls:
            return turn, "tool_calls"
        if isinstance(limit, int) and limit > 0 and turn.content and math.ceil(len(turn.content) / 4) > limit:
            return Turn(turn.kind, self._cut(turn.content, limit * 4), [], turn.plan_text), "length"
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
               rule: dict[str, Any] | None = None) -> dict[str, Any]:
        if cache_hit:
            return self._zero_usage()
        prompt_tokens = max(1, math.ceil(prompt_chars(body) / 4))
        out_chars = len(turn.content or "") + sum(len(call.arguments) for call in turn.tool_calls)
        completion_tokens = max(1, math.ceil(out_chars / 4))
        serial = canonical_json(body.get("messages") or [])
        previous = self._last_prompt.get(cache_key, "")
        common = common_prefix_len(serial, previous) // 4
        cached = min(common, prompt_tokens) if common >= CACHE_MIN_TOKENS else 0
        self._last_prompt[cache_key] = serial
        price_in, price_out = self._prices_at(model, prompt_tokens)
        prompt_cost = ((prompt_tokens - cached) * price_in + cached * price_in * CACHED_PRICE_FACTOR) / 1e6
        completion_cost = completion_tokens * price_out / 1e6
        usage = self._zero_usage()
        usage.update(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                     total_tokens=prompt_tokens + completion_tokens,
                     cost=round(prompt_cost + completion_cost, 8))
        usage["prompt_tokens_details"]["cached_tokens"] = cached
        usage["cost_details"].update(upstream_inference_prompt_cost=round(prompt_cost, 8),
                                     upstream_inference_completions_cost=round(completion_cost, 8))
        if self.scenario.get("byok"):  # the provider bills the user's own key; OpenRouter charges a fee
            upstream = round(prompt_cost + completion_cost, 8)
            usage.update(is_byok=True, cost=round(upstream * BYOK_FEE_SHARE, 8))
            usage["cost_details"]["upstream_inference_cost"] = upstream
        if rule and "usage_cost" in rule:  # a hostile or broken gateway's cost
            value = rule["usage_cost"]
            usage["cost"] = float(value) if value in ("NaN", "Infinity", "-Infinity") else value
        return usage

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
            "native_tokens_reasoning": 0, "native_tokens_cached": usage["prompt_tokens_details"]["cached_tokens"],
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
        with self._state:
            record = self.generations.get(gen_id)
            if record is None:
                return FakeResponse.json(error_envelope(404, f"Generation {gen_id} not found"), 404)
            return FakeResponse.json({"data": record})

    # -- catalogue endpoints ---------------------------------------------------------------
    def _listed_models(self) -> list[str]:
        with self._state:
            return sorted(set(KNOWN_MODELS) | self._seen_models)

    @staticmethod
    def _usd_per_token(per_million: float) -> str:
        return f"{per_million / 1e6:.12f}".rstrip("0").rstrip(".") or "0"

    def _pricing_entry(self, model: str) -> dict[str, Any]:
        """`PublicEndpoint.pricing`: USD per token as decimal strings, with any `overrides`."""
        price_in, price_out = self._prices(model)
        pricing: dict[str, Any] = {
            "prompt": self._usd_per_token(price_in), "completion": self._usd_per_token(price_out),
            "input_cache_read": self._usd_per_token(price_in * CACHED_PRICE_FACTOR), "request": "0", "image": "0"}
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
            "supported_parameters": parameters,
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
        with self._state:
            used = round(sum(g["total_cost"] for g in self.generations.values()), 8)
        return {"label": "fake-key-" + self._bearer(request)[-4:], "limit": None, "usage": used,
                "limit_remaining": None, "limit_reset": None, "is_free_tier": False,
                "is_provisioning_key": False}
