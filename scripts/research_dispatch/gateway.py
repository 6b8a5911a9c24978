"""The one OpenAI-compatible gateway client (OpenRouter), returning a typed `CallRecord` per call.

Why a wrapper at all: the `openai` client happily returns an HTTP-200 body that carries an error,
retries some errors and not others, and throws away the routing facts we must keep. Here:

* requests pin the route (concrete slug, `provider.order` + `allow_fallbacks: false` when a provider is
  pinned, `require_parameters: true`) and ask for router metadata (`X-OpenRouter-Metadata: enabled`);
* only retryable failures are retried (429, 408, 5xx, timeouts, resets), honouring `Retry-After`,
  within the caller's deadline; 401 and 402 stop at once; a `Retry-After` longer than
  `max_retry_after_s` is not waited out (the call fails at once and says how long it was asked to wait);
* an HTTP-200 body with `choices[].error` or a top-level `error` is raised as `ErrorInResponse`; a
  200 body that is not a chat completion at all (an HTML error page from a proxy, truncated JSON) is a
  retryable `malformed response`, never an unexplained crash of the leg;
* every completed call yields a frozen `CallRecord` (requested vs served model and provider,
  generation id, tokens, cost, finish reason, latency, retries, verdict) — the provenance contract.

The `openai` package is imported lazily so that `research-dispatch --help` stays fast. Its TLS context
(the CA bundle, ~15 ms of CPU to load) is built once per process and shared by every leg's client, so
that starting many legs at once costs no more CPU than the legs themselves.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from research_dispatch import route
from research_dispatch.config import GatewaySettings
from research_dispatch.errors import (
    AuthenticationFailed,
    ErrorInResponse,
    GatewayError,
    InsufficientCredits,
    MissingKey,
    RetryableGatewayError,
)
from research_dispatch.redact import register_secrets

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}


@dataclass(frozen=True)
class CallRecord:
    """Provenance of one gateway call. Serialised one per line into `<stem>.calls.jsonl`."""

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

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Pricing:
    """USD per token, as the gateway's endpoints listing publishes it."""

    prompt: float
    completion: float


@dataclass
class Completion:
    """The assistant message of one call, as a plain dict ready to append to the history."""

    message: dict[str, Any]
    finish_reason: str | None
    record: CallRecord

    @property
    def content(self) -> str:
        return self.message.get("content") or ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])


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
        return base * (1 + random.random() * 0.25)


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
        return seconds / 1000 if name.endswith("-ms") else seconds
    return None


def _error_message(body: Any, fallback: str) -> tuple[str, str | None]:
    """(message, error_type) from an OpenRouter error object, never raising."""
    if isinstance(body, dict):
        message = body.get("message") or fallback
        metadata = body.get("metadata") or {}
        error_type = metadata.get("error_type") if isinstance(metadata, dict) else None
        availability = body.get("availability")
        if isinstance(availability, dict) and availability.get("code"):
            error_type = error_type or str(availability["code"])
        return str(message)[:500], error_type
    return fallback[:500], None


def _status_of(code: Any) -> int | None:
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


@functools.cache
def _shared_tls_context() -> Any:
    """The TLS context the openai client's HTTP library builds by default, made once per process.

    Each `openai.OpenAI()` otherwise loads the CA bundle again. The context is the library's own default
    (same CA paths, same `SSL_CERT_FILE`/`SSL_CERT_DIR` handling), only built once; an `ssl.SSLContext`
    is safe to share between threads and clients. None when the library is not the expected one (the
    client then builds its own, as before).
    """
    try:
        from httpx2 import create_ssl_context  # the HTTP library of openai >= 3.5
    except ImportError:  # pragma: no cover - older openai releases use httpx
        try:
            from httpx import create_ssl_context
        except ImportError:
            return None
    return create_ssl_context()


class Gateway:
    """An OpenRouter-compatible chat client with provenance. One per leg or per synthesis run."""

    def __init__(self, *, api_key: str | None, base_url: str | None, settings: GatewaySettings | None = None,
                 retry: RetryPolicy | None = None, http_client: Any = None) -> None:
        if not api_key:
            raise MissingKey("OPENROUTER_API_KEY", "call the model gateway")
        register_secrets([api_key])  # whoever holds a key makes sure it is redacted
        import openai  # lazy: keeps CLI start-up fast

        self._openai = openai
        self.settings = settings or GatewaySettings()
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.retry = retry or RetryPolicy(self.settings.max_retries, self.settings.backoff_base_s,
                                          self.settings.backoff_max_s,
                                          max_retry_after_s=self.settings.max_retry_after_s)
        if http_client is None and (tls := _shared_tls_context()) is not None:
            http_client = openai.DefaultHttpxClient(verify=tls)
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=self.base_url,
            max_retries=0,  # retries are ours: bounded, typed, and visible in the record
            timeout=self.settings.timeout_s,
            default_headers={
                "HTTP-Referer": self.settings.referer,
                "X-OpenRouter-Title": self.settings.title,
                "X-OpenRouter-Metadata": "enabled",
            },
            http_client=http_client,
        )
        self._endpoint_cache: dict[str, list[dict[str, Any]]] = {}

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------
    def complete(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: str | None = None, provider: str | None = None, session_id: str | None = None,
                 response_format: dict[str, Any] | None = None, max_completion_tokens: int | None = None,
                 purpose: str = "research", deadline: float | None = None) -> Completion:
        """One chat completion with retries; raises a `GatewayError` subclass when it cannot succeed."""
        extra_body: dict[str, Any] = {
            "provider": ({"order": [provider], "allow_fallbacks": False, "require_parameters": True}
                         if provider else {"require_parameters": True}),
        }
        if session_id:
            extra_body["session_id"] = session_id[:256]
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_completion_tokens": max_completion_tokens or self.settings.max_completion_tokens,
            "extra_body": extra_body,
        }
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = tool_choice or "auto"
        if response_format:
            kwargs["response_format"] = response_format
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                if deadline is not None:
                    remaining = deadline - started
                    if remaining <= 0:
                        raise RetryableGatewayError("leg deadline reached before the call", status=None)
                    kwargs["timeout"] = min(self.settings.timeout_s, remaining)
                raw = self._client.chat.completions.with_raw_response.create(**kwargs)
                try:
                    completion = raw.parse()
                except ValueError as exc:  # not JSON at all (json.JSONDecodeError is a ValueError)
                    raise _malformed(f"not JSON ({type(exc).__name__})") from None
                return self._finish(completion, raw.headers, model, provider, purpose,
                                    time.monotonic() - started, attempt)
            except GatewayError as exc:
                error: GatewayError = exc
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
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise error
            self.retry.sleep(wait)
            attempt += 1

    def _translate(self, exc: Exception) -> GatewayError:
        openai = self._openai
        if isinstance(exc, openai.APITimeoutError):
            return RetryableGatewayError("gateway request timed out", status=408, error_type="timeout")
        if isinstance(exc, openai.APIConnectionError):
            return RetryableGatewayError(f"connection to the gateway failed: {type(exc.__cause__).__name__}",
                                         error_type="connection")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message, error_type = _error_message(exc.body, f"HTTP {status}")
            headers = exc.response.headers if exc.response is not None else None
            should_retry = headers.get("x-should-retry") if headers is not None else None
            text = f"gateway HTTP {status}: {message}"
            if status == 402:
                return InsufficientCredits(text, status=status, error_type=error_type or "payment_required")
            if status == 401:
                return AuthenticationFailed(text, status=status, error_type=error_type or "authentication")
            retryable = status in _RETRYABLE_STATUS if should_retry is None else should_retry == "true"
            if retryable:
                return RetryableGatewayError(text, status=status, error_type=error_type,
                                             retry_after_s=_parse_retry_after(headers))
            return GatewayError(text, status=status, error_type=error_type)
        if isinstance(exc, openai.APIError):  # e.g. a mid-stream error: no status code
            body = getattr(exc, "body", None)
            message, error_type = _error_message(body, str(exc))
            status = _status_of(body.get("code")) if isinstance(body, dict) else None
            cls = RetryableGatewayError if status in _RETRYABLE_STATUS else GatewayError
            return cls(f"gateway error: {message}", status=status, error_type=error_type)
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
            message, error_type = _error_message(body, "response had no choices")
            status = _status_of(body.get("code"))
            cls = RetryableGatewayError if status in _RETRYABLE_STATUS else ErrorInResponse
            raise cls(f"gateway returned an error in an HTTP 200 body: {message}", status=status,
                      error_type=error_type)
        choice = completion.choices[0]
        choice_extras = choice.model_extra or {}
        if choice.finish_reason == "error" or choice_extras.get("error"):
            body = choice_extras.get("error") or {}
            message, error_type = _error_message(body, "finish_reason=error")
            status = _status_of(body.get("code")) if isinstance(body, dict) else None
            if status in _RETRYABLE_STATUS:
                raise RetryableGatewayError(f"gateway returned an error in an HTTP 200 body: {message}",
                                            status=status, error_type=error_type)
            raise ErrorInResponse(f"gateway returned an error in an HTTP 200 body: {message}",
                                  status=status, error_type=error_type)

        if choice.message is None:
            raise _malformed("choices[0] has no message")
        record = self._record(completion, headers, model, provider, purpose, latency, retries)
        message = choice.message.to_dict()
        message.setdefault("role", "assistant")
        for key in ("refusal", "annotations", "audio", "function_call"):
            if message.get(key) is None:
                message.pop(key, None)
        return Completion(message=message, finish_reason=choice.finish_reason, record=record)

    def _record(self, completion: Any, headers: Any, model: str, provider: str | None, purpose: str,
                latency: float, retries: int) -> CallRecord:
        extras = completion.model_extra or {}
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
        usage = completion.usage
        usage_extra = (usage.model_extra or {}) if usage is not None else {}
        prompt_details = getattr(usage, "prompt_tokens_details", None)
        completion_details = getattr(usage, "completion_tokens_details", None)
        choice = completion.choices[0]
        generation_id = completion.id or (headers.get("x-generation-id") if headers is not None else None)
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
        return CallRecord(
            generation_id=generation_id,
            requested_model=model,
            requested_provider=provider,
            served_model=completion.model,
            served_provider=served_provider,
            metadata_present=metadata is not None,
            attempt=attempt,
            attempts_recorded=attempts_recorded,
            strategy=metadata.get("strategy") if metadata else None,
            cached=cached,
            finish_reason=choice.finish_reason,
            native_finish_reason=(choice.model_extra or {}).get("native_finish_reason"),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_tokens=int(getattr(prompt_details, "cached_tokens", 0) or 0),
            reasoning_tokens=int(getattr(completion_details, "reasoning_tokens", 0) or 0),
            cost_usd=float(usage_extra.get("cost") or 0.0),
            latency_s=round(latency, 3),
            retries=retries,
            purpose=purpose,
            verdict=verdict,
        )

    # ------------------------------------------------------------------------------------------
    def _endpoints(self, model: str) -> list[dict[str, Any]]:
        """The gateway's endpoints listing for a model (cached per client; empty when unavailable)."""
        if model not in self._endpoint_cache:
            endpoints: list[dict[str, Any]] = []
            try:
                payload = self._client.get(f"/models/{model}/endpoints", cast_to=object)
                listed = ((payload or {}).get("data") or {}).get("endpoints") or []
                endpoints = [e for e in listed if isinstance(e, dict)]
            except self._openai.APIError:
                endpoints = []
            self._endpoint_cache[model] = endpoints
        return self._endpoint_cache[model]

    def provider_display_names(self, model: str, provider_slug: str) -> tuple[str, ...]:
        """Display names the gateway uses for a provider slug on a model (empty if unknown)."""
        base = provider_slug.split("/", 1)[0]
        return tuple(sorted({str(e["provider_name"]) for e in self._endpoints(model)
                             if str(e.get("tag", "")).split("/", 1)[0] == base and e.get("provider_name")}))

    def pricing(self, model: str, provider_slug: str | None = None) -> Pricing | None:
        """USD per token for prompt and completion: the dearest endpoint that may serve the call.

        Used to keep a leg inside its dollar cap *before* a call (by capping its output), instead of
        noticing afterwards. None when the gateway publishes no prices.
        """
        endpoints = self._endpoints(model)
        if provider_slug:
            base = provider_slug.split("/", 1)[0]
            endpoints = [e for e in endpoints if str(e.get("tag", "")).split("/", 1)[0] == base] or endpoints
        prices: list[tuple[float, float]] = []
        for endpoint in endpoints:
            raw = endpoint.get("pricing")
            if not isinstance(raw, dict):
                continue
            try:
                prompt, completion = float(raw.get("prompt")), float(raw.get("completion"))
            except (TypeError, ValueError):
                continue
            if prompt >= 0 and completion > 0:
                prices.append((prompt, completion))
        if not prices:
            return None
        return Pricing(prompt=max(p for p, _ in prices), completion=max(c for _, c in prices))

    def generation(self, generation_id: str, *, attempts: int = 4) -> dict[str, Any]:
        """`GET /generation?id=`: the gateway's own record of a call (polled briefly: it may lag)."""
        last: GatewayError | None = None
        for attempt in range(attempts):
            try:
                payload = self._client.get("/generation", cast_to=object,
                                           options={"params": {"id": generation_id}})
                data = (payload or {}).get("data") if isinstance(payload, dict) else None
                if not isinstance(data, dict):
                    raise ErrorInResponse(f"generation {generation_id}: response has no data")
                return data
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
