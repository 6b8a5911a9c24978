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
  stop at once; a `Retry-After` longer than `max_retry_after_s` is not waited out. The policy is the one
  of every outbound call (`core/retry.py`); this client records each attempt it decides on;
* an HTTP-200 body with `choices[].error` or a top-level `error` is raised as `ErrorInResponse`; a 200
  body that is not a chat completion (an HTML page, truncated JSON) is a retryable `malformed response`;
  usage the product cannot account for (a cost that is NaN, negative or not a number) is `UnusableUsage`;
* every completed call yields a frozen `CallRecord` — the provenance contract.

The `openai` client's TLS context is built once per process and shared by every leg's client.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
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
    BadInput,
    CallBoundExceeded,
    CallTimedOut,
    DeadlineReached,
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
from research_dispatch.core.redact import register_secrets
from research_dispatch.core.retry import Failure, GiveUp, RetryPolicy
from research_dispatch.gateway import caching, reasoning, route, schemas, stream, structured
from research_dispatch.gateway import endpoints as listing
from research_dispatch.gateway.endpoints import Pricing
from research_dispatch.gateway.provenance import OPENAI_COMPATIBLE, OPENROUTER, CallRecord, Completion

__all__ = ["Gateway", "Pricing", "canonical_assistant_turn", "credentials", "generation_gateway"]

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
LOOKUP_TIMEOUT_S = 30.0
"""Wall-clock cap of one endpoints-listing or `/generation` look-up (within the leg's deadline too)."""

_ASSISTANT_KEYS = ("role", "content", "tool_calls", "reasoning_details")
ABANDONED_LOOKUP_S = 8.0
"""How long the `/generation` record of an abandoned attempt is waited for (it 404s for a while)."""
INTERRUPTED_LOOKUP_S = 1.5
"""The same after Ctrl-C: the run promised to stop within a few seconds."""
LOOKUP_POLL_S = 0.1
"""The first wait between two look-ups of a given-up call's record (doubling: 0.1, 0.2, 0.4... s)."""
MAX_LOOKUPS = 12
WORST_CHARS_PER_TOKEN = 3
"""Prompt characters per token for a worst-case cost: fewer than any tokenizer averages on prose or JSON."""
COST_TOLERANCE = 0.02
"""How far below the listed prices a reported cost may be before it is replaced by the priced figure
(rounding of per-token prices and of the reported cost, never a real discount)."""


@dataclass
class _Attempt:
    """How far one attempt got: its generation id once the gateway accepted it (the header, or the
    stream's first chunk). Without one the request never reached a provider, so it cost nothing."""

    generation_id: str | None = None


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


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


def gateway_service(settings: GatewaySettings | None = None) -> environment.Service:
    """Whose key and base URL the configured gateway kind reads: OPENROUTER_* or OPENAI_*."""
    kind = settings.kind if settings is not None else OPENROUTER
    return environment.OPENAI_COMPATIBLE if kind == OPENAI_COMPATIBLE else environment.OPENROUTER


def credentials(env: Mapping[str, str], settings: GatewaySettings | None = None) -> Credentials:
    """The checked key and base URL of the configured gateway kind (before any network call)."""
    return environment.require(env, gateway_service(settings))


def generation_gateway(settings: GatewaySettings, env: Mapping[str, str]) -> Gateway:
    """The gateway `verify --online` asks for `/generation` records, or one `BadInput` line when the
    configured kind keeps none (an openai-compatible server reports only itself)."""
    if settings.kind == OPENAI_COMPATIBLE:
        raise BadInput("cannot re-check an openai-compatible gateway: it keeps no /generation record, so its "
                       "routes are self-reported and only the call logs can be checked (run verify without "
                       "--online)", path="--online")
    creds = credentials(env, settings)
    return Gateway(api_key=creds.key, base_url=creds.base_url, settings=settings)


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
    detail = body.get("detail")  # FastAPI-based servers (llama-cpp-python): pydantic's list of problems
    if "message" not in body and isinstance(detail, list) and detail and isinstance(detail[0], Mapping):
        where = ".".join(str(p) for p in detail[0].get("loc") or [])
        return _ErrorFacts(f"{where}: {detail[0].get('msg')}"[:700], "invalid_request", False)
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


def _error_in_body(body: Any, fallback: str) -> GatewayError:
    """The one reading of an error object inside an HTTP 200 (docs/ARCHITECTURE.md § Route verdicts: an
    HTTP-200 body carrying an error is an error): a top-level `error`, a `choices[].error` with
    `finish_reason: error`, or an `error` chunk mid-stream. Its `code` is the status the provider would have
    answered: a retryable one (429, 5xx...) is retried like that status, anything else is `ErrorInResponse`."""
    facts = _error_facts(body, fallback)
    status = _status_of(body.get("code")) if isinstance(body, Mapping) else None
    cls = RetryableGatewayError if status in _RETRYABLE_STATUS else ErrorInResponse
    return cls(f"gateway returned an error in an HTTP 200 body: {facts.message}", status=status,
               error_type=facts.error_type)


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
    usage = getattr(completion, "usage", None)
    if usage is not None and not hasattr(usage, "model_extra"):
        return f"usage is a {type(usage).__name__}, not an object"
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


def _shared_tls_context() -> Any:
    """The TLS context the openai client's HTTP library builds by default, made once per CA setting.

    Each `openai.OpenAI()` otherwise loads the CA bundle again. The context is the library's own default
    (same CA paths, same `SSL_CERT_FILE`/`SSL_CERT_DIR` handling), only built once for the values those
    variables have now: a later command in the same process with another CA bundle gets its own, never the
    first command's. An `ssl.SSLContext` is safe to share between threads and clients.
    """
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_context_for(cert_file: str | None, cert_dir: str | None) -> Any:
    """`create_ssl_context()`, which reads the two variables itself: they are the cache's key."""
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
        self.retry = retry or self.settings.retry_policy()
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
        self.forms = structured.FormMemory(self.settings.structured_output, openrouter=self.kind == OPENROUTER)

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
            return self._timed_out(str(exc), deadline)
        return GatewayResponseTooLarge(str(exc), error_type="response_too_large")

    def _timed_out(self, what: str, deadline: float | None) -> GatewayError:
        """A call that ran out of time: `DeadlineReached` when the caller's own deadline (the leg's time
        cap) has passed — a cap, never retried — else an ordinary timeout of `gateway.timeout_s`, worth
        another attempt. Both the wall-clock bound and the HTTP client's read timeout (never set past the
        deadline) end here, so the two can never be told apart by accident."""
        leg = self._leg_deadline(deadline)
        if leg is not None and time.monotonic() >= leg:
            return DeadlineReached(f"{what}; the caller's own time limit was reached", status=None,
                                   error_type="deadline")
        return GatewayCallTimedOut(f"{what} (gateway.timeout_s = {self.settings.timeout_s:g} s)", status=408,
                                   error_type="timeout")

    def complete_structured(self, *, model: str, messages: list[dict[str, Any]], name: str, schema: dict[str, Any],
                            provider: str | None = None, session_id: str | None = None,
                            max_completion_tokens: int | None = None, purpose: str = "structured",
                            deadline: float | None = None,
                            spent: Callable[[CallRecord], None] | None = None) -> Completion:
        """One structured-output call in the form this gateway's server takes for `model` (`structured.py`):
        the configured form, else the learnt one, else each untried form in turn — a form the server
        refuses is recorded and never sent again. The completion's `content` is the answer's JSON text
        whatever the form (for a forced tool call, its arguments); pydantic validation is the caller's."""
        # while no form is known for the model, the first call learns and parallel ones wait for it
        probing = self.forms.probe_lock(model) if self.forms.probing(model) else contextlib.nullcontext()
        with probing:
            return self._structured_in(self.forms.candidates(model), model=model, messages=messages, name=name,
                                       schema=schema, provider=provider, session_id=session_id,
                                       max_completion_tokens=max_completion_tokens, purpose=purpose, deadline=deadline,
                                       spent=spent)

    def _structured_in(self, forms: list[structured.StructuredForm], *, model: str, messages: list[dict[str, Any]],
                       name: str, schema: dict[str, Any], provider: str | None, session_id: str | None,
                       max_completion_tokens: int | None, purpose: str, deadline: float | None,
                       spent: Callable[[CallRecord], None] | None) -> Completion:
        """The structured call in the first of `forms` the server takes (see `complete_structured`)."""
        refusals: list[str] = []
        for form in forms:
            try:
                completion = self.complete(model=model, messages=messages, provider=provider, session_id=session_id,
                                           max_completion_tokens=max_completion_tokens, purpose=purpose,
                                           deadline=deadline, probe=form if self.forms.probing(model) else None,
                                           spent=spent, **structured.request_for(form, name, schema))
            except structured.StructuredFormRefused as exc:
                self.forms.refused(model, form)
                refusals.append(str(exc))
                continue
            self.forms.accepted(model, form)
            text = structured.answer_text(form, name, completion.content, completion.tool_calls)
            return replace(completion, message={**completion.message, "content": text})
        why = f" ({'; '.join(refusals)})" if refusals else " (each form was refused earlier in this run)"
        raise GatewayError(f"{model}: the server took no form of structured output{why}; set "
                           "[tool.research-dispatch.gateway] structured_output to the form it takes",
                           error_type="structured_output_refused")

    def complete(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: str | dict[str, Any] | None = None, provider: str | None = None,
                 session_id: str | None = None, response_format: dict[str, Any] | None = None,
                 max_completion_tokens: int | None = None, purpose: str = "research", deadline: float | None = None,
                 probe: structured.StructuredForm | None = None,
                 spent: Callable[[CallRecord], None] | None = None, cache_boundary: int | None = None) -> Completion:
        """One chat completion with retries; raises a `GatewayError` subclass when it cannot succeed.

        `max_completion_tokens` is the whole output cap, reasoning included (what the call may bill; None:
        the route's reasoning plan, `reasoning_plan`); it goes out under the name the endpoints list.
        `probe`: the request tries this structured-output form on a server not yet known to take it; a
        refusal of its shape is `StructuredFormRefused` at once — never retried unchanged.
        `spent` receives, as it happens, the record of every attempt that was accepted by the gateway but
        not used — abandoned at a deadline, on Ctrl-C, cut by an error mid-stream, or retried — with its
        cost looked up at `/generation` (or its worst case when the record does not show in time): money
        spent on the way to the answer, or to the failure, is never hidden (`aborted: true`).
        `cache_boundary`: the last message of the history that stays byte-identical for the next calls
        (the last compacted one), where a model that caches only at breakpoints gets one (`caching.py`).
        """
        leg_deadline = self._leg_deadline(deadline)
        try:
            kwargs = self._request(model=model, messages=messages, tools=tools, tool_choice=tool_choice,
                                   provider=provider, session_id=session_id, response_format=response_format,
                                   output_cap=max_completion_tokens, deadline=leg_deadline,
                                   cache_boundary=cache_boundary)
        except CallBoundExceeded as exc:
            raise self._bound_error(exc, leg_deadline) from None
        attempt = 0
        while True:
            started = time.monotonic()
            tried = _Attempt()
            try:
                if leg_deadline is not None and leg_deadline - started <= 0:
                    raise CallTimedOut(f"model call to {model}: the leg's deadline was reached before the call")
                bounds = self._bounds(self.settings.timeout_s, leg_deadline)
                bounds.check(f"model call to {model}")
                raw, completion = self._send(kwargs, bounds, model, tried)
                return self._finish(completion, raw.headers, model, provider, purpose,
                                    time.monotonic() - started, attempt)
            except CallBoundExceeded as exc:
                error: GatewayError = self._bound_error(exc, leg_deadline)
            except GatewayError as exc:
                error = exc
            except self._openai.APIError as exc:
                error = self._translate(exc, leg_deadline)
            if tried.generation_id is not None and spent is not None:
                spent(self._abandoned(tried.generation_id, kwargs, model=model, provider=provider, purpose=purpose,
                                      latency=time.monotonic() - started, retries=attempt,
                                      interrupted=isinstance(error, GatewayInterrupted)))
            error.attempts = attempt + 1
            if probe is not None and structured.refuses_form(error):
                raise structured.StructuredFormRefused(probe, error) from None
            decision = self.retry.decide(attempt, Failure(error.retryable, getattr(error, "retry_after_s", None)),
                                         deadline=leg_deadline)
            if decision.give_up is GiveUp.WAIT_TOO_LONG:
                raise type(error)(f"{error}; the gateway asked to retry after {decision.wait_s:g} s, more than the "
                                  f"{self.retry.max_wait_s:g} s a leg may wait", status=error.status,
                                  error_type=error.error_type, attempts=error.attempts)
            if not decision.retry:
                raise error
            self._wait(decision.wait_s, model, error.attempts)
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

    def _send(self, kwargs: dict[str, Any], bounds: CallBounds, model: str, tried: _Attempt) -> tuple[Any, Any]:
        """One attempt on the wire, held to `bounds`. OpenRouter calls stream (`stream.py`: an abandoned
        stream stops being billed, and the generation id is known from the first byte); an
        openai-compatible server gets the plain request its interop test proves."""

        with bounded(bounds, f"model call to {model}"):
            if self.kind == OPENROUTER:
                return self._stream(kwargs, bounds, tried)
            raw = self._client.chat.completions.with_raw_response.create(
                **kwargs, timeout=bounds.read_timeout(self.settings.timeout_s))
            try:
                completion = raw.parse()
            except ValueError as exc:  # not JSON at all (json.JSONDecodeError is a ValueError)
                raise _malformed(f"not JSON ({type(exc).__name__})") from None
        return raw, completion

    def _stream(self, kwargs: dict[str, Any], bounds: CallBounds, tried: _Attempt) -> tuple[Any, Any]:
        """The streamed call read to its end (inside the caller's `bounded` block: every chunk is held to
        the deadline, the size cap and the interrupt) and assembled into a completion."""
        raw = self._client.chat.completions.with_raw_response.create(
            **kwargs, stream=True, timeout=bounds.read_timeout(self.settings.timeout_s))
        tried.generation_id = raw.headers.get("x-generation-id") or None
        assembler = stream.Assembler()
        events = raw.parse()
        try:
            for chunk in events:  # a hostile value (a string for a count) is ours to refuse, not to warn about
                assembler.add(chunk.to_dict(warnings=False))
                tried.generation_id = tried.generation_id or assembler.generation_id
        except stream.MalformedChunk as exc:  # the attempt was accepted: it is recorded at its cost, and retried
            raise _malformed(str(exc)) from None
        finally:
            events.close()
        if not assembler.chunks:  # a 200 whose body held no event: an HTML page, a truncated stream
            raise _malformed("the stream held no event")
        return raw, self._openai.types.chat.ChatCompletion.construct(**assembler.completion())

    def _abandoned(self, generation_id: str, kwargs: dict[str, Any], *, model: str, provider: str | None,
                   purpose: str, latency: float, retries: int, interrupted: bool) -> CallRecord:
        """The record of an attempt the gateway accepted but the call did not use, with its cost: what
        `/generation` says (looked up through its 404-for-a-while lag, within a small budget of its own —
        the leg's deadline may be what ended the attempt; shorter after Ctrl-C), else the worst case the
        request could have cost (its prompt and its whole output cap at the endpoint's prices, overrides
        included), marked `cost_estimated`."""
        try:
            data: dict[str, Any] | None = self.generation(
                generation_id, within_s=INTERRUPTED_LOOKUP_S if interrupted else ABANDONED_LOOKUP_S)
        except GatewayError:
            data = None
        try:
            return self._abandoned_record(generation_id, kwargs, data, model=model, provider=provider,
                                          purpose=purpose, latency=latency, retries=retries)
        except UnusableUsage:  # the record's numbers cannot be counted: the worst case is
            return self._abandoned_record(generation_id, kwargs, None, model=model, provider=provider,
                                          purpose=purpose, latency=latency, retries=retries)

    def _abandoned_record(self, generation_id: str, kwargs: dict[str, Any], data: dict[str, Any] | None, *,
                          model: str, provider: str | None, purpose: str, latency: float,
                          retries: int) -> CallRecord:
        """The abandoned attempt's record from its `/generation` data, or (None) at its worst case."""
        common: dict[str, Any] = dict(
            generation_id=generation_id, requested_model=model, requested_provider=provider, metadata_present=False,
            attempt=None, attempts_recorded=0, strategy=None, cached=False, latency_s=round(latency, 3),
            retries=retries, purpose=purpose, verdict=route.ABORTED, gateway_kind=self.kind, aborted=True)
        if data is None:
            return CallRecord(served_model=None, served_provider=None, finish_reason=None, native_finish_reason=None,
                              prompt_tokens=0, completion_tokens=0, cached_tokens=0, reasoning_tokens=0,
                              cost_usd=self._worst_case(kwargs, model, provider), cost_estimated=True, **common)
        byok = data.get("is_byok") is True
        fee = _money(data.get("total_cost"), "generation total_cost", generation_id) or 0.0
        upstream = (_money(data.get("upstream_inference_cost"), "generation upstream_inference_cost",
                           generation_id) or 0.0) if byok else None
        return self._at_least_listed(CallRecord(
            served_model=_text(data.get("model")), served_provider=_text(data.get("provider_name")),
            finish_reason=_text(data.get("finish_reason")),
            native_finish_reason=_text(data.get("native_finish_reason")),
            prompt_tokens=_tokens(data.get("tokens_prompt"), "generation tokens_prompt", generation_id),
            completion_tokens=_tokens(data.get("tokens_completion"), "generation tokens_completion", generation_id),
            cached_tokens=_tokens(data.get("native_tokens_cached"), "generation native_tokens_cached", generation_id),
            reasoning_tokens=_tokens(data.get("native_tokens_reasoning"), "generation native_tokens_reasoning",
                                     generation_id),
            cost_usd=round(fee + (upstream or 0.0), 10), is_byok=byok, provider_cost_usd=upstream,
            gateway_fee_usd=fee if byok else None, **common), model, provider)

    def _worst_case(self, kwargs: dict[str, Any], model: str, provider: str | None) -> float:
        """What the request could have cost at most: its prompt (characters / `WORST_CHARS_PER_TOKEN`) and
        its whole output cap, at the dearest candidate endpoint's prices for a prompt that long."""
        pricing = self.pricing(model, provider)
        if pricing is None:
            return 0.0
        prompt = len(json.dumps([kwargs.get("messages"), kwargs.get("tools")], ensure_ascii=False))
        prompt_tokens = prompt // WORST_CHARS_PER_TOKEN + 1
        cap = next((kwargs[name] for name in listing.OUTPUT_CAPS if isinstance(kwargs.get(name), int)),
                   self.settings.max_completion_tokens)
        price = pricing.at(prompt_tokens)
        return round(prompt_tokens * price.prompt + cap * price.completion, 10)

    def _request(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 tool_choice: str | dict[str, Any] | None, provider: str | None, session_id: str | None,
                 response_format: dict[str, Any] | None, output_cap: int | None,
                 deadline: float | None, cache_boundary: int | None = None) -> dict[str, Any]:
        """The keyword arguments of `create()`: only what this gateway (and, on OpenRouter, the pinned
        endpoints' `supported_parameters`) accepts; the output cap and `reasoning` from the route's
        reasoning plan (`reasoning.py`). `output_cap`: the caller's whole cap (None: the plan's)."""
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            tools = schemas.tools_for_route(model, tools)  # Google's function declarations take a subset
        if self.kind == OPENAI_COMPATIBLE:
            kwargs["max_tokens"] = output_cap or self.settings.max_completion_tokens
            if tools:
                kwargs["tools"] = tools
                kwargs["tool_choice"] = tool_choice or "auto"
            if response_format:
                kwargs["response_format"] = response_format
            return kwargs
        if self.settings.cache_breakpoints:  # Anthropic (and Gemini explicitly) cache only where told
            kwargs["messages"] = caching.with_breakpoints(model, messages, tools, stable_until=cache_boundary)
        required: set[str] = set()
        if tools:
            required.add("tools")
            if isinstance(tool_choice, dict):  # a forced call cannot do without it
                required.add("tool_choice")
        if response_format:
            required.add("response_format")
            if response_format.get("type") == "json_schema":
                required.add("structured_outputs")
        shape = self._shape(model, provider, frozenset(required), deadline=deadline)
        plan = self._reasoning(model, shape, output_cap)
        if shape.output_cap:
            kwargs[shape.output_cap] = plan.output_cap
        if tools:
            kwargs["tools"] = tools
            if isinstance(tool_choice, dict) or "tool_choice" in shape.optional:
                kwargs["tool_choice"] = tool_choice or "auto"
        if response_format:
            kwargs["response_format"] = response_format
        extra_body: dict[str, Any] = {
            "provider": ({"order": [provider], "allow_fallbacks": False, "require_parameters": True}
                         if provider else {"require_parameters": True}),
        }
        if plan.parameter is not None:
            extra_body["reasoning"] = plan.parameter
        if session_id:
            extra_body["session_id"] = session_id[:256]
        kwargs["extra_body"] = extra_body
        return kwargs

    def _shape(self, model: str, provider: str | None, required: frozenset[str], *,
               deadline: float | None = None) -> listing.RequestShape:
        """What a request needing `required` may carry on this route (OpenRouter's listing)."""
        endpoints = listing.candidates(self._endpoints(model, deadline=deadline), provider)
        return listing.request_shape(endpoints, required=required,
                                     wanted=frozenset({"tool_choice", "reasoning"}), model=model)

    def _reasoning(self, model: str, shape: listing.RequestShape, total_cap: int | None) -> reasoning.ReasoningPlan:
        return reasoning.plan(model, visible_cap=self.settings.max_completion_tokens,
                              steerable="reasoning" in shape.optional, reasons=shape.reasons,
                              budget_tokens=self.settings.reasoning_max_tokens, effort=self.settings.reasoning_effort,
                              total_cap=total_cap)

    def reasoning_plan(self, model: str, provider: str | None = None) -> reasoning.ReasoningPlan:
        """The reasoning plan of a tool-calling call on this route at its full cap: the output cap to
        price a call with, and the reasoning tokens on top of the answer. Never raises (an interrupt is
        noticed by the next call); a plain plan when the route cannot be looked up."""
        if self.kind == OPENAI_COMPATIBLE:
            return reasoning.ReasoningPlan(None, self.settings.max_completion_tokens, 0)
        try:
            shape = self._shape(model, provider, frozenset({"tools"}))
        except (Interrupted, GatewayError):
            return reasoning.ReasoningPlan(None, self.settings.max_completion_tokens, 0)
        return self._reasoning(model, shape, None)

    def _translate(self, exc: Exception, deadline: float | None = None) -> GatewayError:
        openai = self._openai
        if isinstance(exc, openai.APITimeoutError):
            return self._timed_out("gateway request timed out", deadline)
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
        if isinstance(exc, openai.APIError):  # a mid-stream `error` chunk, after the HTTP 200: no status code
            return _error_in_body(getattr(exc, "body", None), str(exc))
        return GatewayError(f"gateway error: {exc}")  # pragma: no cover

    def _finish(self, completion: Any, headers: Any, model: str, provider: str | None, purpose: str,
                latency: float, retries: int) -> Completion:
        problem = _shape_problem(completion)
        if problem:
            raise _malformed(problem)
        extras = completion.model_extra or {}
        top_error = extras.get("error")
        if top_error or not completion.choices:
            raise _error_in_body(top_error if isinstance(top_error, dict) else {}, "response had no choices")
        choice = completion.choices[0]
        choice_extras = choice.model_extra or {}
        if choice.finish_reason == "error" or choice_extras.get("error"):
            raise _error_in_body(choice_extras.get("error") or {}, "finish_reason=error")

        if choice.message is None:
            raise _malformed("choices[0] has no message")
        record = self._record(completion, headers, model, provider, purpose, latency, retries)
        message = canonical_assistant_turn(choice.message.to_dict(warnings=False),
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
            "cache_write_tokens": _tokens(getattr(prompt_details, "cache_write_tokens", None),
                                          "usage.prompt_tokens_details.cache_write_tokens", generation_id),
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
        return self._at_least_listed(CallRecord(
            served_provider=served_provider, metadata_present=metadata is not None, attempt=attempt,
            attempts_recorded=attempts_recorded, strategy=metadata.get("strategy") if metadata else None,
            cached=cached, verdict=verdict, **common), model, provider)

    def _at_least_listed(self, record: CallRecord, model: str, provider: str | None) -> CallRecord:
        """The record with a cost the listed prices allow. A gateway that reports `cost: 0` (or a few cents)
        for thousands of tokens of a priced endpoint would let every dollar cap pass; a cost below the
        least the endpoint lists for the tokens counted (`endpoints.least_cost`: the served endpoint, else
        the cheapest candidate; cached prompt tokens free) is replaced by that priced figure, and the
        gateway's own figure kept as `reported_cost_usd` (the flag). A response-cache hit, a BYOK call
        (the provider bills the key) and a gateway without prices are taken as reported."""
        if self.kind != OPENROUTER or record.cached or record.is_byok or record.cost_estimated:
            return record
        try:
            endpoints = self._endpoints(model)
        except Interrupted:
            return record
        pool = listing.candidates(endpoints, provider) or endpoints
        served = [e for e in pool if record.served_provider and e.provider_name == record.served_provider]
        floor = listing.least_cost(served or pool, prompt_tokens=record.prompt_tokens,
                                   cached_tokens=record.cached_tokens, completion_tokens=record.completion_tokens)
        if floor is None or record.cost_usd >= floor * (1 - COST_TOLERANCE):
            return record
        return replace(record, cost_usd=round(floor, 10), reported_cost_usd=record.cost_usd)

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

    def endpoints(self, model: str) -> list[listing.Endpoint]:
        """The endpoints listing of a model, as the requests are shaped from it (empty when unavailable)."""
        return self._endpoints(model)

    def listing(self, path: str, what: str) -> Any:
        """`GET <base><path>` with the key (`/models`, `/key`): one bounded look-up, errors typed like a call's
        (an authentication failure is `AuthenticationFailed`, an unreachable gateway a `GatewayError`)."""

        if self.kind != OPENROUTER:
            raise GatewayError(f"an openai-compatible gateway publishes no {what}", error_type="unsupported")
        bounds = self._bounds(min(self.settings.timeout_s, LOOKUP_TIMEOUT_S), None)
        try:
            with bounded(bounds, what):
                return self._client.get(path, cast_to=object,
                                        options={"timeout": bounds.read_timeout(self.settings.timeout_s)})
        except CallBoundExceeded as exc:
            raise self._bound_error(exc, None) from None
        except self._openai.APIError as exc:
            raise self._translate(exc) from None

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

    def context_window(self, model: str, provider_slug: str | None = None) -> int | None:
        """Tokens of prompt and output a call on this route may hold: the smallest `context_length` of the
        endpoints that may serve it. None when unknown (an `openai-compatible` gateway publishes no listing).
        Never raises: an interrupt is noticed by the next call."""
        if self.kind != OPENROUTER:
            return None
        try:
            endpoints = self._endpoints(model)
        except (Interrupted, GatewayError):
            return None
        pinned = listing.candidates(endpoints, provider_slug) if provider_slug else endpoints
        return listing.context_of(pinned or endpoints)

    def generation(self, generation_id: str, *, attempts: int = 4, within_s: float | None = None) -> dict[str, Any]:
        """`GET /generation?id=`: the gateway's own record of a call (polled briefly: it 404s for a while).

        `within_s`: the whole look-up (polls and waits) ends within this many seconds, bounded by nothing
        else — not the leg's deadline, not the interrupt: the books of a call already given up are kept
        even after the cap or Ctrl-C that gave it up, but never for long."""
        if self.kind != OPENROUTER:
            raise GatewayError("an openai-compatible gateway keeps no /generation record; its calls are "
                               "self-reported and cannot be re-checked online", error_type="unsupported")

        ends = None if within_s is None else time.monotonic() + within_s
        last: GatewayError | None = None
        for attempt in range(attempts if ends is None else MAX_LOOKUPS):
            if ends is None:
                bounds = self._bounds(min(self.settings.timeout_s, LOOKUP_TIMEOUT_S), None)
            else:
                bounds = CallBounds(deadline=ends)
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
            if ends is not None:  # a given-up call's record: polled in real time until its budget ends
                wait = min(LOOKUP_POLL_S * 2 ** attempt, ends - time.monotonic())
                if wait <= 0:
                    break
                time.sleep(wait)
            elif attempt + 1 < attempts:
                self.retry.sleep(min(0.5 * 2 ** attempt, self.retry.backoff_max_s))
        assert last is not None
        raise last
