"""Prompt-cache breakpoints for the routes whose models cache only where they are told to.

Why (OpenRouter, "Prompt Caching"): OpenAI, DeepSeek, Moonshot and Gemini 2.5+ cache a repeated prompt
prefix by themselves. Anthropic's models cache nothing unless the request marks where a reusable prefix
ends, with `cache_control: {"type": "ephemeral"}` on a content block — at most four breakpoints, each
only if the prefix up to it is at least the model's minimum (1,024 tokens for Claude Sonnet 4.x, 4,096
for Opus 4.5/4.6 and Haiku 4.5, 2,048 for Opus 4.7 and Haiku 3.5, 512 for the 5.x models). A research
leg re-sends its whole history on every step, so without breakpoints a Claude leg pays full input price
for every token of every step. Cache reads cost a tenth of the input price, writes 1.25 times it: the
recorded cost is OpenRouter's `usage.cost`, which bills both; the pre-call dollar bound prices a prompt
token at the dearer of input and cache write (`endpoints.EndpointPrice`).

Where the breakpoints go (Anthropic, up to three of the four):

* the end of the stable prefix — the system prompt and the brief (the tool schemas come before both in
  Anthropic's prompt order, so they are inside it): never changes in a leg;
* the last compacted boundary — the history up to the last tool result the researcher compacted stays
  byte-identical until the next compaction;
* the last message — the next step re-sends everything up to it and reads it back (Anthropic looks for a
  cached prefix up to 20 blocks before each breakpoint).

Gemini (OpenRouter documents explicit `cache_control` for Gemini too, uses only the last breakpoint, and
needs 4,096 tokens): one breakpoint, on the last compacted boundary — the part of the history that stays
put for several steps; the rest is left to Gemini's implicit caching, which costs no write.

A breakpoint goes on the message's text: its `content` string becomes one text block carrying
`cache_control` (the `ChatContentText` form of OpenRouter's request schema); a message without text
(an assistant turn that only calls tools) passes the breakpoint to the nearest earlier message with
text. The history itself is never changed: only the copy sent. `cache_control` is not a `Parameter` of
OpenRouter's `supported_parameters`, so `require_parameters` does not filter on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BREAKPOINT = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
CHARS_PER_TOKEN = 4

_ANTHROPIC_MINIMUMS = (  # (name pattern, minimum tokens), first match wins (Anthropic's cache limitations)
    (re.compile(r"opus-4\.[56]\b|haiku-4\.5\b"), 4096), (re.compile(r"opus-4\.7\b|haiku-3\.5\b|3-5-haiku"), 2048),
    (re.compile(r"(sonnet|opus|haiku|fable)-5(\.\d+)?\b"), 512))
_ANTHROPIC_DEFAULT_MINIMUM = 1024
GEMINI_MINIMUM = 4096


@dataclass(frozen=True)
class CachePolicy:
    """How a route's model takes breakpoints."""

    min_tokens: int
    rolling: bool  # also the stable prefix and the last message (Anthropic); else the boundary only (Gemini)


def policy(model: str) -> CachePolicy | None:
    """The breakpoint policy of a model, or None when it caches by itself (or not at all)."""
    author, _, name = model.strip().lower().split(":", 1)[0].partition("/")
    if author == "anthropic":
        minimum = next((tokens for pattern, tokens in _ANTHROPIC_MINIMUMS if pattern.search(name)),
                       _ANTHROPIC_DEFAULT_MINIMUM)
        return CachePolicy(min_tokens=minimum, rolling=True)
    if author == "google" and name.startswith("gemini"):
        return CachePolicy(min_tokens=GEMINI_MINIMUM, rolling=False)
    return None


def _text_of(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    return content if isinstance(content, str) and content.strip() else None


def _chars(message: dict[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False))


def positions(model: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None, *,
              stable_until: int | None) -> list[int]:
    """The message indices that get a breakpoint (ascending, at most `MAX_BREAKPOINTS`), each where the
    prompt up to it reaches the model's minimum (estimated at `CHARS_PER_TOKEN`)."""
    rule = policy(model)
    if rule is None or not messages:
        return []
    wanted: list[int] = []
    if rule.rolling:
        first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        if first_user is not None:
            wanted.append(first_user)
    if stable_until is not None and 0 <= stable_until < len(messages):
        wanted.append(stable_until)
    if rule.rolling:
        wanted.append(len(messages) - 1)
    prefix = len(json.dumps(list(tools or []), ensure_ascii=False))
    reach: list[int] = []
    for message in messages:
        prefix += _chars(message)
        reach.append(prefix // CHARS_PER_TOKEN)
    chosen: list[int] = []
    for index in wanted:
        while index >= 0 and _text_of(messages[index]) is None:
            index -= 1  # no text to carry it: the nearest earlier message with text
        if index >= 0 and reach[index] >= rule.min_tokens and index not in chosen:
            chosen.append(index)
    return sorted(chosen)[-MAX_BREAKPOINTS:]


def with_breakpoints(model: str, messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]] | None, *,
                     stable_until: int | None) -> list[dict[str, Any]]:
    """The messages to send: a copy with `cache_control` on the chosen messages' text (`positions`)."""
    marks = positions(model, messages, tools, stable_until=stable_until)
    if not marks:
        return messages
    sent = list(messages)
    for index in marks:
        text = _text_of(sent[index])
        assert text is not None  # `positions` only picks messages with text
        sent[index] = {**sent[index], "content": [{"type": "text", "text": text, "cache_control": dict(BREAKPOINT)}]}
    return sent
