"""OpenRouter's streamed chat completion (server-sent events), built from the completion it streams.

The documented shape (OpenRouter's streaming and errors pages; docs/REAL-SERVICES.md):

* `: OPENROUTER PROCESSING` comment lines keep the connection alive while the model has not started
  (clients must skip them);
* then one `data: {...}` event per `chat.completion.chunk`: every chunk carries `id` (the generation id),
  `object`, `created`, `model` and `provider`; `choices[0].delta` holds the new `role`/`content`, the
  `tool_calls` pieces (the first piece of a call has its `index`, `id`, `type` and `function.name`, later
  ones only `index` and `function.arguments` text) and `reasoning_details` entries; the last choice chunk
  has the `finish_reason` (and `native_finish_reason`);
* usage comes exactly once, in a final chunk whose `choices` is `[]`, with `openrouter_metadata` when it
  was asked for, then `data: [DONE]`;
* a failure after the HTTP 200 is one chunk with a top-level `error` and a choice with
  `finish_reason: "error"`, after which the stream ends (no usage, no `[DONE]`).

Pure: the gateway decides what to stream; this module only spells it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

KEEPALIVE = b": OPENROUTER PROCESSING\n\n"
CONTENT_PIECE_CHARS = 400
ARGUMENT_PIECE_CHARS = 24


def event(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def pause(seconds: float, keepalive_s: float) -> Iterator[bytes | float]:
    """`seconds` of waiting, with a keep-alive comment every `keepalive_s` (as OpenRouter sends them)."""
    left = seconds
    while left > 0:
        step = min(keepalive_s, left)
        yield float(step)
        left -= step
        yield KEEPALIVE


BAD_CHUNKS = ("tool_call_index", "tool_calls", "choices", "usage", "second_usage")
"""The malformed chunks a broken gateway can send (`bad_chunk`): `tool_calls[0].index = "x"`,
`tool_calls = 5`, `choices = 7`, `usage = "free"` halfway through the deltas, or a second, tiny usage
chunk after the real one (a gateway that reports usage twice)."""


def bad_chunk(kind: str, head: dict[str, Any]) -> bytes:
    """One malformed chunk of `kind` (`BAD_CHUNKS`), as a broken gateway or proxy sends it."""
    if kind == "tool_call_index":
        delta: Any = {"tool_calls": [{"index": "x", "function": {"arguments": "{"}}]}
        return event({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    if kind == "tool_calls":
        return event({**head, "choices": [{"index": 0, "delta": {"tool_calls": 5}, "finish_reason": None}]})
    if kind == "choices":
        return event({**head, "choices": 7})
    if kind == "usage":
        return event({**head, "choices": [], "usage": "free"})
    if kind == "second_usage":
        return event({**head, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2,
                                                       "cost": 0.0000001}})
    raise ValueError(f"unknown bad chunk {kind!r}; one of {', '.join(BAD_CHUNKS)}")


def chunks(payload: dict[str, Any], *, delay_s: float = 0.0, stall_s: float = 0.0, keepalive_s: float = 0.25,
           error: dict[str, Any] | None = None, bad: str | None = None) -> Iterator[bytes | float]:
    """The events of `payload` (a non-streamed chat completion, the fake's answer) as OpenRouter streams
    them: keep-alives through `delay_s`, the deltas, a stall of `stall_s` halfway through them, and the
    final usage chunk; with `error`, the mid-stream error chunk halfway instead of the rest; with `bad`,
    that malformed chunk (`bad_chunk`) halfway (a second usage chunk: after the real one), the rest as
    usual."""
    head: dict[str, Any] = {key: payload[key] for key in ("id", "created", "model") if key in payload}
    head["object"] = "chat.completion.chunk"
    if "provider" in payload:
        head["provider"] = payload["provider"]
    choice = (payload.get("choices") or [{}])[0]
    message = choice.get("message") or {}

    def chunk(delta: dict[str, Any], finish: str | None = None, native: str | None = None) -> bytes:
        return event({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                           "native_finish_reason": native, "logprobs": None}]})

    deltas: list[bytes] = [chunk({"role": "assistant", "content": ""})]
    if message.get("reasoning_details"):
        deltas.append(chunk({"reasoning_details": message["reasoning_details"]}))
    if message.get("content"):
        deltas += [chunk({"content": piece}) for piece in _pieces(str(message["content"]), CONTENT_PIECE_CHARS)]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        deltas.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": function.get("name"), "arguments": ""}}]}))
        deltas += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in _pieces(str(function.get("arguments") or ""), ARGUMENT_PIECE_CHARS)]

    yield KEEPALIVE
    yield from pause(delay_s, keepalive_s)
    half = max(1, len(deltas) // 2)
    yield from deltas[:half]
    if bad is not None and bad != "second_usage":
        yield bad_chunk(bad, head)
    if error is not None:
        yield event({**head, "error": error, "choices": [{"index": 0, "delta": {"content": ""},
                                                          "finish_reason": "error", "native_finish_reason": "error"}]})
        return
    yield from pause(stall_s, keepalive_s)
    yield from deltas[half:]
    yield chunk({}, choice.get("finish_reason"), choice.get("native_finish_reason"))
    final: dict[str, Any] = {**head, "choices": [], "usage": payload.get("usage")}
    if "openrouter_metadata" in payload:
        final["openrouter_metadata"] = payload["openrouter_metadata"]
    yield event(final)
    if bad == "second_usage":
        yield bad_chunk(bad, head)
    yield event("[DONE]")
