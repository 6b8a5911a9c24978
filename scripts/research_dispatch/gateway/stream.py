"""A streamed chat completion put back together from its chunks, as the non-streamed one would be.

Why stream at all (OpenRouter's streaming docs, "Stream cancellation"; docs/REAL-SERVICES.md): an aborted
request stops being billed only when it is streamed (and only on providers that support cancellation). A
call the leg abandons at its deadline, on Ctrl-C or for a retry must be one that can be stopped; and the
generation id — needed to look its cost up — arrives with the first chunk (and the `X-Generation-Id` header)
instead of only with a complete answer.

The `openai` client parses the server-sent events (it skips the `: OPENROUTER PROCESSING` comments,
stops at `[DONE]`, and raises `APIError` on a mid-stream `error` chunk); `Assembler` folds its chunks,
as plain dicts, into the dict of a `chat.completion`:

* `content` and the provider's `reasoning` text concatenated; `tool_calls` by their `index` (the first
  piece brings `id`, `type` and `function.name`, later pieces append `function.arguments`);
  `reasoning_details` entries by their `index` (text pieces of one entry concatenated, an entry without
  an index appended whole, as Gemini's encrypted signatures come);
* `finish_reason`, `native_finish_reason` and a choice-level `error` from the choice chunks; `model`,
  `provider`, `id` and `created` from the chunks; `usage` and `openrouter_metadata` from the final chunk
  (whose `choices` is empty).

The gateway then reads the assembled completion exactly as a non-streamed one (`Gateway._finish`): one
parser of what a completion means, two wire forms.

**Every chunk accounted for.** A chunk is untrusted data: a field of the wrong type (`choices: 7`,
`tool_calls: 5`, `tool_calls[0].index: "x"`, `usage: "free"`) is `MalformedChunk`, naming the chunk and the
field — never a bare TypeError out of the fold. The gateway turns it into its retryable "malformed
response" error, so the attempt (already accepted and billed) is recorded at its cost and retried like
any other malformed answer. Usage is sent once by OpenRouter; a gateway that sends it more than once
(cumulative counts in every chunk, or a stray second chunk) is read by the usage that counts the most
tokens, so a later tiny usage chunk cannot shrink what the call is billed at.
"""

from __future__ import annotations

from typing import Any

_TEXT_FIELDS = ("text", "summary")


class MalformedChunk(ValueError):
    """A stream chunk whose shape is not a chat completion chunk's; the message names the field."""


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _list(value: Any, where: str) -> list[Any]:
    """`value` as a list (absent: empty), or `MalformedChunk` naming `where`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedChunk(f"{where} is a {_kind(value)}, not a list")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedChunk(f"{where} is a {_kind(value)}, not an object")
    return value


def _tokens(usage: dict[str, Any]) -> float:
    """How many tokens a usage object counts (anything not a number counts nothing here; the gateway
    refuses such usage by name when it reads the one kept)."""
    total = 0.0
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            total += float(value)
    return total


class Assembler:
    """Folds `chat.completion.chunk` dicts into one `chat.completion` dict."""

    def __init__(self) -> None:
        self.generation_id: str | None = None
        self.chunks = 0
        self._top: dict[str, Any] = {}
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._details: list[dict[str, Any]] = []
        self._choice: dict[str, Any] = {}

    def add(self, chunk: Any) -> None:
        """Fold one chunk in; `MalformedChunk` (naming the chunk and the field) when its shape is wrong."""
        self.chunks += 1
        try:
            self._add(_object(chunk, "the chunk"))
        except MalformedChunk as exc:
            raise MalformedChunk(f"stream chunk {self.chunks}: {exc}") from None

    def _add(self, chunk: dict[str, Any]) -> None:
        if chunk.get("id") and self.generation_id is None:
            self.generation_id = str(chunk["id"])
        for key in ("id", "created", "model", "provider", "system_fingerprint", "service_tier"):
            if chunk.get(key) is not None:
                self._top[key] = chunk[key]
        for key in ("openrouter_metadata", "error"):
            if chunk.get(key) is not None:
                self._top[key] = chunk[key]
        if chunk.get("usage") is not None:
            usage = _object(chunk["usage"], "usage")
            kept = self._top.get("usage")
            if kept is None or _tokens(usage) >= _tokens(kept):
                self._top["usage"] = usage
        for number, choice in enumerate(_list(chunk.get("choices"), "choices")):
            choice = _object(choice, f"choices[{number}]")
            if choice.get("index", 0) != 0:
                continue
            for key in ("finish_reason", "native_finish_reason", "error"):
                if choice.get(key) is not None:
                    self._choice[key] = choice[key]
            self._delta(_object(choice.get("delta"), f"choices[{number}].delta"))

    def _delta(self, delta: dict[str, Any]) -> None:
        for key, parts in (("content", self._content), ("reasoning", self._reasoning)):
            value = delta.get(key)
            if value is not None and not isinstance(value, str):
                raise MalformedChunk(f"delta.{key} is a {_kind(value)}, not text")
            if value:
                parts.append(value)
        for number, piece in enumerate(_list(delta.get("tool_calls"), "delta.tool_calls")):
            where = f"delta.tool_calls[{number}]"
            piece = _object(piece, where)
            index = piece.get("index", 0)
            if index is None:
                index = 0
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise MalformedChunk(f"{where}.index is {str(index)[:40]!r}, not a call's number")
            call = self._calls.setdefault(index, {"id": "", "type": "function",
                                                  "function": {"name": "", "arguments": ""}})
            if piece.get("id"):
                call["id"] = str(piece["id"])
            if piece.get("type"):
                call["type"] = str(piece["type"])
            function = _object(piece.get("function"), f"{where}.function")
            if function.get("name"):
                call["function"]["name"] = str(function["name"])
            arguments = function.get("arguments")
            if arguments is not None and not isinstance(arguments, str):
                raise MalformedChunk(f"{where}.function.arguments is a {_kind(arguments)}, not text")
            call["function"]["arguments"] += arguments or ""
        for detail in _list(delta.get("reasoning_details"), "delta.reasoning_details"):
            if isinstance(detail, dict):
                self._detail(detail)

    def _detail(self, detail: dict[str, Any]) -> None:
        """One `reasoning_details` piece: text of the entry with the same index and type continues it."""
        last = self._details[-1] if self._details else None
        if (last is not None and detail.get("index") is not None and last.get("index") == detail.get("index")
                and last.get("type") == detail.get("type")):
            for key in _TEXT_FIELDS:
                if isinstance(detail.get(key), str):
                    last[key] = str(last.get(key) or "") + detail[key]
            for key, value in detail.items():
                if key not in _TEXT_FIELDS:
                    last.setdefault(key, value)
            return
        self._details.append(dict(detail))

    def completion(self) -> dict[str, Any]:
        """The assembled `chat.completion` (no choices when the stream carried none: an error envelope)."""
        result: dict[str, Any] = {"object": "chat.completion", **self._top}
        if not self._choice and not self._content and not self._calls and "error" in self._top:
            return result
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._reasoning:
            message["reasoning"] = "".join(self._reasoning)
        if self._calls:
            message["tool_calls"] = [self._calls[index] for index in sorted(self._calls)]
        if self._details:
            message["reasoning_details"] = self._details
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None,
                                  "finish_reason": self._choice.get("finish_reason"),
                                  "native_finish_reason": self._choice.get("native_finish_reason")}
        if "error" in self._choice:
            choice["error"] = self._choice["error"]
        result["choices"] = [choice]
        return result
