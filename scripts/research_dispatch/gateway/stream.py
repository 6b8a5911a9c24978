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
"""

from __future__ import annotations

from typing import Any

_TEXT_FIELDS = ("text", "summary")


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

    def add(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        if chunk.get("id") and self.generation_id is None:
            self.generation_id = str(chunk["id"])
        for key in ("id", "created", "model", "provider", "system_fingerprint", "service_tier"):
            if chunk.get(key) is not None:
                self._top[key] = chunk[key]
        for key in ("usage", "openrouter_metadata", "error"):
            if chunk.get(key) is not None:
                self._top[key] = chunk[key]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            for key in ("finish_reason", "native_finish_reason", "error"):
                if choice.get(key) is not None:
                    self._choice[key] = choice[key]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta)

    def _delta(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), str):
            self._content.append(delta["content"])
        if isinstance(delta.get("reasoning"), str):
            self._reasoning.append(delta["reasoning"])
        for piece in delta.get("tool_calls") or []:
            if not isinstance(piece, dict):
                continue
            call = self._calls.setdefault(int(piece.get("index") or 0),
                                          {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            if piece.get("id"):
                call["id"] = str(piece["id"])
            if piece.get("type"):
                call["type"] = str(piece["type"])
            raw_function = piece.get("function")
            function: dict[str, Any] = raw_function if isinstance(raw_function, dict) else {}
            if function.get("name"):
                call["function"]["name"] = str(function["name"])
            if isinstance(function.get("arguments"), str):
                call["function"]["arguments"] += function["arguments"]
        for detail in delta.get("reasoning_details") or []:
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
