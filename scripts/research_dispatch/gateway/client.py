"""The one OpenAI-compatible gateway client, returning a typed `CallRecord` per call.

Two kinds of gateway (docs/ARCHITECTURE.md § Gateways — FIXED, `[tool.research-dispatch.gateway] kind`):

* `openrouter` (default). Requests pin the route (concrete slug, `provider.order` + `allow_fallbacks:
  false` when a provider is pinned, `require_parameters: true`) and ask for router metadata
  (`X-OpenRouter-Metadata: enabled`). Because `require_parameters` routes only to endpoints that list
  EVERY parameter sent, a request carries only what the pinned endpoints list in the endpoints listing
  (`endpoints.request_shape`; the listing is fetched once per model for the gateway's life: a leg, or
  the whole synthesis): the output cap as `max_tokens` or
  `max_completion_tokens`, whichever they list. Prices come from the same listing, long-context
  `overrides` included. With a BYOK key `usage.cost` is only OpenRouter's fee and the provider's charge
  is `usage.cost_details.upstream_inference_cost`: both are recorded and their sum is the call's cost.
* `openai-compatible` (LiteLLM, vLLM, llama.cpp, Ollama...): OPENAI_API_KEY / OPENAI_BASE_URL, no
  OpenRouter-only fields or headers, no `/generation` or endpoints look-ups, the output cap as
  `max_tokens`; the response's `model` is recorded as served, and the verdict is `self_reported`.

For both:

* assistant turns come back in a canonical form (`canonical_assistant_turn`, docs/ARCHITECTURE.md § Route
  verdicts): `role`, `content` only when it is a non-empty string, `tool_calls` (id, type, function),
  and `reasoning_details` verbatim — never `content: null`, `function_call` or other fields a strict
  server refuses, and never without the thought signatures Gemini 3 demands back;
* every request is held to a `CallBounds` (`bounded_http`): a wall-clock deadline around the WHOLE
  request (capped by the leg's), a maximum response size, and the run's interrupt event, checked between
  chunks and on every socket read;
* only retryable failures are retried (429, 408, 5xx, timeouts, resets, or what `error.availability
  .retryable` / `x-should-retry` say), honouring `Retry-After`, within the caller's deadline; 401 and 402
  stop at once; a `Retry-After` longer than `max_retry_after_s` is not waited out;
* an HTTP-200 body with `choices[].error` or a top-level `error` is raised as `ErrorInResponse`; a 200
  body that is not a chat completion (an HTML page, truncated JSON) is a retryable `malformed response`;
  usage the product cannot account for (a cost that is NaN, negative or not a number) is `UnusableUsage`;
* every completed call yields a frozen `CallRecord` — the provenance contract.

The `openai` client's TLS context is built once per process and shared by every leg's client.
"""

from __future__ import annotations

import functools
import json
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import openai
from httpx2 import create_ssl_context  # the HTTP library of openai >= 3

from research_dispatch.config import environment
from research_dispatch.config.environment import Credentials
from research_dispatch.config.settings import GatewaySettings
from research_dispatch.core.bounded_http import bounded, bounded_client
from research_dispatch.core.bounds import CallBounds
from research_dispatch.core.errors import (
    AuthenticationFailed,
    CallBoundExceeded,
    CallTimedOut,
    ErrorInResponse,
    GatewayCallTimedOut,
    GatewayError,
    GatewayInterrupted,
    GatewayResponseTooLarge,
    InsufficientCredits,
    Interrupted,
    MissingKey,
    RetryableGatewayError,
    UnusableUsage,
)
from research_dispatch.core.records import record
from research_dispatch.core.redact import register_secrets
from research_dispatch.gateway import endpoints as listing
from research_dispatch.gateway import route
from research_dispatch.gateway.endpoints import Pricing

__all__ = ["CallRecord", "Completion", "Gateway", "Pricing", "RetryPolicy", "canonical_assistant_turn",
           "credentials"]

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
OPENROUTER = "openrouter"
OPENAI_COMPATIBLE = "openai-compatible"
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
LOOKUP_TIMEOUT_S = 30.0
"""Wall-clock cap of one endpoints-listing or `/generation` look-up (within the leg's deadline too)."""

_ASSISTANT_KEYS = ("role", "content", "tool_calls", "reasoning_details")


@record
@dataclass(frozen=True)
class CallRecord:
    """Provenance of one gateway call. Serialised one per line into `<stem>.calls.jsonl`.

    `cost_usd` is everything the call cost. With a BYOK key it is OpenRouter's fee (`gateway_fee_usd`)
    plus the provider's charge (`provider_cost_usd`); otherwise both are None and `cost_usd` is what
    OpenRouter charged. Fields after `verdict` have defaults so older call logs still load.
    """

    generation_id: str | None
    requested_model: str
    requested_provider: str | None
    served_model: str | None
    served_provider: str | None
    metadata_present: bool
    attempt: int | None
    attempts_recorded: int
    strategy: str | None
    cached: bool
    finish_reason: str | None
    native_finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float
    latency_s: float
    retries: int
    purpose: str
    verdict: str
    gateway_kind: str = OPENROUTER
    is_byok: bool = False
    provider_cost_usd: float | None = None
    gateway_fee_usd: float | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Completion:
    """The assistant message of one call, in canonical form, ready to append to the history."""

    message: dict[str, Any]
    finish_reason: str | None
    record: CallRecord

    @property
    def content(self) -> str:
        content = self.message.get("content")
        return content if isinstance(content, str) else ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def canonical_assistant_turn(message: Mapping[str, Any], *, tool_turn_content: str | None = None
                             ) -> dict[str, Any]:
    """The assistant turn as it goes back into the history (docs/ARCHITECTURE.md § Route verdicts).

    `content` only when it is a non-empty string (null is refused by strict servers, an empty text block
    by some providers; a turn that only calls tools has no content key — or, with `tool_turn_content=""`,
    an empty string: llama-cpp-python's chat templates read `message.content` of every assistant turn
    and fail on a missing key, so the `openai-compatible` gateway sends ""); `tool_calls` reduced to `id`,
    `type` and `function` {`name`, `arguments`}; `reasoning_details` verbatim (Gemini 3 refuses the next
    call without its thought signatures). Nothing else: no `function_call`, `refusal`, `annotations`,
    `audio` or `index` — fields a strict server rejects as unknown or deprecated. An empty reply (no
    text, no tool call) is just `{"role": "assistant"}`: no server accepts it back, so callers do not
    append it to the history.
    """
    turn: dict[str, Any] = {"role": "assistant"}
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        turn["content"] = content
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = _mapping(call.get("function"))
        arguments = function.get("arguments")
        calls.append({"id": str(call.get("id") or ""), "type": str(call.get("type") or "function"),
                      "function": {"name": str(function.get("name") or ""),
                                   "arguments": arguments if isinstance(arguments, str) else
                                   json.dumps(arguments if arguments is not None else {})}})
    if calls:
        turn["tool_calls"] = calls
        if "content" not in turn and tool_turn_content is not None:
            turn["content"] = tool_turn_content
    details = message.get("reasoning_details")
    if isinstance(details, list) and details:
        turn["reasoning_details"] = details
    return turn


@dataclass
class RetryPolicy:
    """Bounded retries: exponential back-off with jitter, or exactly the server's `Retry-After`.

    `sleep` is injectable so tests can record the waits instead of waiting them.
    """

    max_retries: int = 3
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    max_retry_after_s: float = 120.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_retry_after_s)
        base = min(self.backoff_base_s * (2 ** attempt), self.backoff_max_s)
        return float(base * (1 + random.random() * 0.25))


def credentials(env: Mapping[str, str], settings: GatewaySettings | None = None) -> Credentials:
    """The checked key and base URL of the configured gateway kind (before any network call)."""
    kind = settings.kind if settings is not None else OPENROUTER
    service = environment.OPENAI_COMPATIBLE if kind == OPENAI_COMPATIBLE else environment.OPENROUTER
    return environment.require(env, service)


def _parse_retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    for name in ("retry-after-ms", "retry-after"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        if not math.isfinite(seconds):
            continue
        return seconds / 1000 if name.endswith("-ms") else seconds
    return None


@dataclass(frozen=True)
class _ErrorFacts:
    message: str
    error_type: str | None
    retryable: bool | None  # what `error.availability.retryable` says, when it says it


def _error_facts(body: Any, fallback: str) -> _ErrorFacts:
    """Message, type and retry hint from an OpenRouter error object, never raising.

    `error_type` is where the docs put it: `error.error_type` (availability errors) or
    `error.metadata.error_type` (provider errors); `error.availability.code` names the availability
    condition and `availability.retryable` decides whether an identical retry can succeed; a provider's
    own message is in `error.metadata.raw`.
    """
    if not isinstance(body, Mapping):
        return _ErrorFacts(fallback[:500], None, None)
    message = str(body.get("message") or fallback)
    metadata = _mapping(body.get("metadata"))
    raw = metadata.get("raw")
    if isinstance(raw, str) and raw.strip():  # "Provider returned error": the provider's own words are here
        message = f"{message}: {' '.join(raw.split())[:400]}"
    error_type = body.get("error_type") or metadata.get("error_type")
    availability = _mapping(body.get("availability"))
    retryable = availability.get("retryable") if isinstance(availability.get("retryable"), bool) else None
    if availability.get("code"):
        message = f"{message} (availability: {availability['code']})"
        error_type = error_type or str(availability["code"])
    return _ErrorFacts(message[:700], str(error_type) if error_type else None, retryable)


def _status_of(code: Any) -> int | None:
    if isinstance(code, bool):
        return None
    try:
        return int(code)
    except (TypeError, ValueError):
        return None


def _malformed(problem: str) -> RetryableGatewayError:
    return RetryableGatewayError(f"gateway returned a malformed response: {problem}", status=None,
                                 error_type="malformed_response")


def _shape_problem(completion: Any) -> str | None:
    """Why a parsed 200 body is not a chat completion, or None. The openai client does not validate
    (strict validation breaks on OpenRouter's extra finish reasons), so we check what we read."""
    if not hasattr(completion, "model_extra"):
        return f"body is a {type(completion).__name__}, not an object"
    choices = getattr(completion, "choices", None)
    if choices is None or (isinstance(choices, list) and not choices):
        return None  # an error envelope or no choices: reported as an error in an HTTP 200 body
    if not isinstance(choices, list) or not all(hasattr(c, "message") and hasattr(c, "model_extra")
                                                for c in choices):
        return "choices is not a list of choice objects"
    message = choices[0].message
    if message is not None and not hasattr(message, "to_dict"):
        return "choices[0].message is not an object"
    return None


def _money(value: Any, what: str, generation_id: str | None) -> float | None:
    """A reported amount of USD: None when absent, else a finite non-negative number or `UnusableUsage`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UnusableUsage(f"gateway reported an unusable {what} ({str(value)[:40]!r}) for generation "
                            f"{generation_id or 'without id'}; the leg's dollar cap cannot be enforced, so it "
                            "stops instead of guessing", error_type="unusable_usage")
    return float(value)


def _tokens(value: Any, what: str, generation_id: str | None) -> int:
    """A reported token count: 0 when absent, else a non-negative integer or `UnusableUsage`."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or value != int(value):
        raise UnusableUsage(f"gateway reported an unusable {what} ({str(value)[:40]!r}) for generation "
                            f"{generation_id or 'without id'}", error_type="unusable_usage")
    return int(value)


@functools.cache
def _shared_tls_context() -> Any:
    """The TLS context the openai client's HTTP library builds by default, made once per process.

    Each `openai.OpenAI()` otherwise loads the CA bundle again. The context is the library's own default
    (same CA paths, same `SSL_CERT_FILE`/`SSL_CERT_DIR` handling), only built once; an `ssl.SSLContext`
    is safe to share between threads and clients.
    """
    return create_ssl_context()


class Gateway:
    """A chat client with provenance for one gateway kind. One per leg or per synthesis run.

    `interrupt` is the run's Ctrl-C event: a call in flight stops between chunks (and on a silent socket
    within `bounded_http.POLL_S`). `deadline` (a `time.monotonic()` value) is the leg's: no call and no
    look-up of this gateway runs past it.
    """

    def __init__(self, *, api_key: str | None, base_url: str | None, settings: GatewaySettings | None = None,
                 retry: RetryPolicy | None = None, http_client: Any = None,
                 interrupt: threading.Event | None = None, deadline: float | None = None) -> None:
        self.settings = settings or GatewaySettings()
        self.kind = self.settings.kind
        if not api_key:
            variable = "OPENAI_API_KEY" if self.kind == OPENAI_COMPATIBLE else "OPENROUTER_API_KEY"
            raise MissingKey(variable, "call the model gateway")
        register_secrets([api_key])  # whoever holds a key makes sure it is redacted
        self._openai = openai
        self.interrupt = interrupt
        self.deadline = deadline
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.retry = retry or RetryPolicy(self.settings.max_retries, self.settings.backoff_base_s,
                                          self.settings.backoff_max_s,
                                          max_retry_after_s=self.settings.max_retry_after_s)
        if http_client is None:
            http_client = bounded_client(verify=_shared_tls_context(), timeout=self.settings.timeout_s,
                                         follow_redirects=True)
        headers = ({"HTTP-Referer": self.settings.referer, "X-OpenRouter-Title": self.settings.title,
                    "X-OpenRouter-Metadata": "enabled"} if self.kind == OPENROUTER else {})
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=self.base_url,
            max_retries=0,  # retries are ours: bounded, typed, and visible in the record
            timeout=self.settings.timeout_s,
            default_headers=headers,
            http_client=http_client,
        )
        self._listings: dict[str, list[listing.Endpoint]] = {}  # per model; [] when unavailable

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------
    def _leg_deadline(self, deadline: float | None) -> float | None:
        candidates = [d for d in (deadline, self.deadline) if d is not None]
        return min(candidates) if candidates else None

    def _bounds(self, seconds: float, deadline: float | None) -> CallBounds:
        return CallBounds.within(seconds, leg_deadline=self._leg_deadline(deadline), interrupt=self.interrupt)

    def _bound_error(self, exc: CallBoundExceeded, deadline: float | None) -> GatewayError:
        """A crossed bound as a typed gateway error (both kinds of handler catch it)."""
        if isinstance(exc, Interrupted):
            return GatewayInterrupted(str(exc), error_type="interrupted")
        if isinstance(exc, CallTimedOut):
            error: GatewayError = GatewayCallTimedOut(str(exc), status=None, error_type="timeout")
            leg = self._leg_deadline(deadline)
            error.retryable = leg is None or time.monotonic() < leg
            return error
        return GatewayResponseTooLarge(str(exc), error_type="response_too_large")

    def complete(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: str | None = None, provider: str | None = None, session_id: str | None = None,
                 response_format: dict[str, Any] | None = None, max_completion_tokens: int | None = None,
                 purpose: str = "research", deadline: float | None = None) -> Completion:
        """One chat completion with retries; raises a `GatewayError` subclass when it cannot succeed.

        `max_completion_tokens` is the output cap; it goes out under the name the endpoints list.
        """
        leg_deadline = self._leg_deadline(deadline)
        try:
            kwargs = self._request(model=model, messages=messages, tools=tools, tool_choice=tool_choice,
                                   provider=provider, session_id=session_id, response_format=response_format,
                                   output_cap=max_completion_tokens or self.settings.max_completion_tokens,
                                   deadline=leg_deadline)
        except CallBoundExceeded as exc:
            raise self._bound_error(exc, leg_deadline) from None
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                if leg_deadline is not None and leg_deadline - started <= 0:
                    raise CallTimedOut(f"model call to {model}: the leg's deadline was reached before the call")
                bounds = self._bounds(self.settings.timeout_s, leg_deadline)
                bounds.check(f"model call to {model}")
                raw, completion = self._send(kwargs, bounds, model)
                return self._finish(completion, raw.headers, model, provider, purpose,
                                    time.monotonic() - started, attempt)
            except CallBoundExceeded as exc:
                error: GatewayError = self._bound_error(exc, leg_deadline)
            except GatewayError as exc:
                error = exc
            except self._openai.APIError as exc:
                error = self._translate(exc)
            error.attempts = attempt + 1
            if not error.retryable or attempt >= self.retry.max_retries:
                raise error
            retry_after = getattr(error, "retry_after_s", None)
            if retry_after is not None and retry_after > self.retry.max_retry_after_s:
                raise type(error)(f"{error}; the gateway asked to retry after {retry_after:g} s, more than the "
                                  f"{self.retry.max_retry_after_s:g} s a leg may wait", status=error.status,
                                  error_type=error.error_type, attempts=error.attempts)
            wait = self.retry.delay(attempt, retry_after)
            if leg_deadline is not None and time.monotonic() + wait >= leg_deadline:
                raise error
            self._wait(wait, model, error.attempts)
            attempt += 1

    def _wait(self, seconds: float, model: str, attempts: int) -> None:
        """Wait before a retry; an interrupt ends the wait (and the call) at once."""
        if self.interrupt is not None and self.retry.sleep is time.sleep:
            interrupted = self.interrupt.wait(seconds)
        else:
            self.retry.sleep(seconds)
            interrupted = self.interrupt is not None and self.interrupt.is_set()
        if interrupted:
            raise GatewayInterrupted(f"model call to {model}: interrupted while waiting to retry",
                                     error_type="interrupted", attempts=attempts)

    def _send(self, kwargs: dict[str, Any], bounds: CallBounds, model: str) -> tuple[Any, Any]:
        with bounded(bounds, f"model call to {model}"):
            raw = self._client.chat.completions.with_raw_response.create(
                **kwargs, timeout=bounds.read_timeout(self.settings.timeout_s))
            try:
                completion = raw.parse()
            except ValueError as exc:  # not JSON at all (json.JSONDecodeError is a ValueError)
                raise _malformed(f"not JSON ({type(exc).__name__})") from None
        return raw, completion

    def _request(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 tool_choice: str | None, provider: str | None, session_id: str | None,
                 response_format: dict[str, Any] | None, output_cap: int,
                 deadline: float | None) -> dict[str, Any]:
        """The keyword arguments of `create()`: only what this gateway (and, on OpenRouter, the pinned
        endpoints' `supported_parameters`) accepts."""
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if self.kind == OPENAI_COMPATIBLE:
            kwargs["max_tokens"] = output_cap
            if tools:
                kwargs["tools"] = tools
                kwargs["tool_choice"] = tool_choice or "auto"
            if response_format:
                kwargs["response_format"] = response_format
            return kwargs
        required: set[str] = set()
        wanted: set[str] = set()
        if tools:
            required.add("tools")
            wanted.add("tool_choice")
        if response_format:
            required.add("response_format")
            if response_format.get("type") == "json_schema":
                required.add("structured_outputs")
        endpoints = listing.candidates(self._endpoints(model, deadline=deadline), provider)
        shape = listing.request_shape(endpoints, required=frozenset(required), wanted=frozenset(wanted),
                                      model=model)
        if shape.output_cap:
            kwargs[shape.output_cap] = output_cap
        if tools:
            kwargs["tools"] = tools
            if "tool_choice" in shape.optional:
                kwargs["tool_choice"] = tool_choice or "auto"
        if response_format:
            kwargs["response_format"] = response_format
        extra_body: dict[str, Any] = {
            "provider": ({"order": [provider], "allow_fallbacks": False, "require_parameters": True}
                         if provider else {"require_parameters": True}),
        }
        if session_id:
            extra_body["session_id"] = session_id[:256]
        kwargs["extra_body"] = extra_body
        return kwargs

    def _translate(self, exc: Exception) -> GatewayError:
        openai = self._openai
        if isinstance(exc, openai.APITimeoutError):
            return RetryableGatewayError("gateway request timed out", status=408, error_type="timeout")
        if isinstance(exc, openai.APIConnectionError):
            return RetryableGatewayError(f"connection to the gateway failed: {type(exc.__cause__).__name__}",
                                         error_type="connection")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            facts = _error_facts(exc.body, f"HTTP {status}")
            headers = exc.response.headers if exc.response is not None else None
            should_retry = headers.get("x-should-retry") if headers is not None else None
            text = f"gateway HTTP {status}: {facts.message}"
            if status == 402:
                return InsufficientCredits(text, status=status, error_type=facts.error_type or "payment_required")
            if status == 401:
                return AuthenticationFailed(text, status=status, error_type=facts.error_type or "authentication")
            if should_retry is not None:
                retryable = should_retry == "true"
            elif facts.retryable is not None:
                retryable = facts.retryable
            else:
                retryable = status in _RETRYABLE_STATUS
            if retryable:
                return RetryableGatewayError(text, status=status, error_type=facts.error_type,
                                             retry_after_s=_parse_retry_after(headers))
            return GatewayError(text, status=status, error_type=facts.error_type)
        if isinstance(exc, openai.APIError):  # e.g. a mid-stream error: no status code
            body = getattr(exc, "body", None)
            facts = _error_facts(body, str(exc))
            status = _status_of(body.get("code")) if isinstance(body, dict) else None
            cls = RetryableGatewayError if status in _RETRYABLE_STATUS else GatewayError
            return cls(f"gateway error: {facts.message}", status=status, error_type=facts.error_type)
        return GatewayError(f"gateway error: {exc}")  # pragma: no cover

    def _finish(self, completion: Any, headers: Any, model: str, provider: str | None, purpose: str,
                latency: float, retries: int) -> Completion:
        problem = _shape_problem(completion)
        if problem:
            raise _malformed(problem)
        extras = completion.model_extra or {}
        top_error = extras.get("error")
        if top_error or not completion.choices:
            body = top_error if isinstance(top_error, dict) else {}
            facts = _error_facts(body, "response had no choices")
            status = _status_of(body.get("code"))
            cls = RetryableGatewayError if status in _RETRYABLE_STATUS else ErrorInResponse
            raise cls(f"gateway returned an error in an HTTP 200 body: {facts.message}", status=status,
                      error_type=facts.error_type)
        choice = completion.choices[0]
        choice_extras = choice.model_extra or {}
        if choice.finish_reason == "error" or choice_extras.get("error"):
            body = choice_extras.get("error") or {}
            facts = _error_facts(body, "finish_reason=error")
            status = _status_of(body.get("code")) if isinstance(body, dict) else None
            if status in _RETRYABLE_STATUS:
                raise RetryableGatewayError(f"gateway returned an error in an HTTP 200 body: {facts.message}",
                                            status=status, error_type=facts.error_type)
            raise ErrorInResponse(f"gateway returned an error in an HTTP 200 body: {facts.message}",
                                  status=status, error_type=facts.error_type)

        if choice.message is None:
            raise _malformed("choices[0] has no message")
        record = self._record(completion, headers, model, provider, purpose, latency, retries)
        message = canonical_assistant_turn(choice.message.to_dict(),
                                           tool_turn_content="" if self.kind == OPENAI_COMPATIBLE else None)
        return Completion(message=message, finish_reason=choice.finish_reason, record=record)

    def _usage_facts(self, usage: Any, generation_id: str | None) -> dict[str, Any]:
        """Tokens and money from `usage`, validated; BYOK cost split into fee and provider charge."""
        extra = (usage.model_extra or {}) if usage is not None else {}
        prompt_details = getattr(usage, "prompt_tokens_details", None)
        completion_details = getattr(usage, "completion_tokens_details", None)
        cost = _money(extra.get("cost"), "usage.cost", generation_id)
        is_byok = extra.get("is_byok") is True
        facts: dict[str, Any] = {
            "prompt_tokens": _tokens(getattr(usage, "prompt_tokens", None), "usage.prompt_tokens", generation_id),
            "completion_tokens": _tokens(getattr(usage, "completion_tokens", None), "usage.completion_tokens",
                                         generation_id),
            "cached_tokens": _tokens(getattr(prompt_details, "cached_tokens", None),
                                     "usage.prompt_tokens_details.cached_tokens", generation_id),
            "reasoning_tokens": _tokens(getattr(completion_details, "reasoning_tokens", None),
                                        "usage.completion_tokens_details.reasoning_tokens", generation_id),
            "is_byok": is_byok, "provider_cost_usd": None, "gateway_fee_usd": None,
            "cost_usd": cost or 0.0,
        }
        if is_byok:
            details = extra.get("cost_details")
            upstream = _money(details.get("upstream_inference_cost") if isinstance(details, Mapping) else None,
                              "usage.cost_details.upstream_inference_cost", generation_id)
            facts.update(gateway_fee_usd=cost or 0.0, provider_cost_usd=upstream or 0.0,
                         cost_usd=round((cost or 0.0) + (upstream or 0.0), 10))
        return facts

    def _record(self, completion: Any, headers: Any, model: str, provider: str | None, purpose: str,
                latency: float, retries: int) -> CallRecord:
        extras = completion.model_extra or {}
        choice = completion.choices[0]
        generation_id = completion.id or (headers.get("x-generation-id") if headers is not None else None)
        usage = self._usage_facts(completion.usage, generation_id)
        common: dict[str, Any] = dict(
            generation_id=generation_id, requested_model=model, requested_provider=provider,
            served_model=completion.model, finish_reason=choice.finish_reason,
            native_finish_reason=(choice.model_extra or {}).get("native_finish_reason"),
            latency_s=round(latency, 3), retries=retries, purpose=purpose, gateway_kind=self.kind, **usage)
        if self.kind == OPENAI_COMPATIBLE:
            verdict = route.self_reported_verdict(requested_model=model, served_model=completion.model)
            return CallRecord(served_provider=None, metadata_present=False, attempt=None, attempts_recorded=0,
                              strategy=None, cached=False, verdict=verdict, **common)
        metadata = extras.get("openrouter_metadata")
        metadata = metadata if isinstance(metadata, dict) else None
        served_provider = extras.get("provider")
        if not served_provider and metadata:
            for endpoint in (metadata.get("endpoints") or {}).get("available") or []:
                if isinstance(endpoint, dict) and endpoint.get("selected"):
                    served_provider = endpoint.get("provider")
        attempts = metadata.get("attempts") if metadata else None
        cache_status = (headers.get("x-openrouter-cache-status") or "") if headers is not None else ""
        cached = cache_status.upper() == "HIT"
        attempt = _status_of(metadata.get("attempt")) if metadata else None
        attempts_recorded = len(attempts) if isinstance(attempts, list) else 0
        display_names = self.provider_display_names(model, provider) if provider else ()
        verdict = route.call_verdict(
            requested_model=model,
            pinned_provider=provider,
            served_model=completion.model,
            served_provider=served_provider,
            metadata_present=metadata is not None,
            attempt=attempt,
            attempts_recorded=attempts_recorded,
            cached=cached,
            provider_display_names=display_names,
        )
        return CallRecord(served_provider=served_provider, metadata_present=metadata is not None, attempt=attempt,
                          attempts_recorded=attempts_recorded, strategy=metadata.get("strategy") if metadata else None,
                          cached=cached, verdict=verdict, **common)

    # ------------------------------------------------------------------------------------------
    def _endpoints(self, model: str, *, deadline: float | None = None) -> list[listing.Endpoint]:
        """The endpoints listing of a model (fetched once per gateway; empty when unavailable or not
        OpenRouter).

        A look-up is bounded like a call (its own wall-clock cap, the leg's deadline, the interrupt). An
        interrupt propagates; any other failure means "no listing" for this gateway, and the request then
        carries what it wants with the cap as `max_tokens`.
        """
        if self.kind != OPENROUTER:
            return []
        if model in self._listings:
            return self._listings[model]

        bounds = self._bounds(min(self.settings.timeout_s, LOOKUP_TIMEOUT_S), deadline)
        try:
            with bounded(bounds, f"endpoints listing of {model}"):
                payload = self._client.get(f"/models/{model}/endpoints", cast_to=object,
                                           options={"timeout": bounds.read_timeout(self.settings.timeout_s)})
        except Interrupted:
            raise
        except (self._openai.APIError, CallBoundExceeded):
            endpoints = []
        else:
            endpoints = listing.parse_endpoints(payload)
        self._listings[model] = endpoints
        return endpoints

    def provider_display_names(self, model: str, provider_slug: str) -> tuple[str, ...]:
        """Display names the gateway uses for a provider slug on a model (empty if unknown)."""
        try:
            endpoints = self._endpoints(model)
        except Interrupted:
            return ()
        base = provider_slug.split("/", 1)[0]
        return tuple(sorted({e.provider_name for e in endpoints if e.base_tag == base and e.provider_name}))

    def pricing(self, model: str, provider_slug: str | None = None) -> Pricing | None:
        """USD per token for prompt and completion: the dearest endpoint that may serve the call, with
        each endpoint's long-context overrides (`Pricing.at(prompt_tokens)` gives the price that applies).

        Used to keep a leg inside its dollar cap *before* a call (by capping its output), instead of
        noticing afterwards. None when the gateway publishes no prices (an `openai-compatible` one never
        does). Never raises: an interrupt is noticed by the next call.
        """
        try:
            endpoints = self._endpoints(model)
        except Interrupted:
            return None
        pinned = listing.candidates(endpoints, provider_slug) if provider_slug else endpoints
        return listing.pricing_of(pinned or endpoints)

    def generation(self, generation_id: str, *, attempts: int = 4) -> dict[str, Any]:
        """`GET /generation?id=`: the gateway's own record of a call (polled briefly: it may lag)."""
        if self.kind != OPENROUTER:
            raise GatewayError("an openai-compatible gateway keeps no /generation record; its calls are "
                               "self-reported and cannot be re-checked online", error_type="unsupported")

        last: GatewayError | None = None
        for attempt in range(attempts):
            bounds = self._bounds(min(self.settings.timeout_s, LOOKUP_TIMEOUT_S), None)
            try:
                with bounded(bounds, f"generation record {generation_id}"):
                    payload = self._client.get("/generation", cast_to=object,
                                               options={"params": {"id": generation_id},
                                                        "timeout": bounds.read_timeout(self.settings.timeout_s)})
                data = (payload or {}).get("data") if isinstance(payload, dict) else None
                if not isinstance(data, dict):
                    raise ErrorInResponse(f"generation {generation_id}: response has no data")
                return data
            except CallBoundExceeded as exc:
                last = self._bound_error(exc, None)
                if not last.retryable:
                    raise last from None
            except self._openai.APIStatusError as exc:
                last = self._translate(exc)
                if exc.status_code != 404 and not last.retryable:
                    raise last from None
            except self._openai.APIError as exc:
                last = self._translate(exc)
                if not last.retryable:
                    raise last from None
            if attempt + 1 < attempts:
                self.retry.sleep(min(0.5 * 2 ** attempt, self.retry.backoff_max_s))
        assert last is not None
        raise last
