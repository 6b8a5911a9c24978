"""One structured-output call: the schema on the wire, pydantic on our side, one repair attempt.

Why a single helper: extraction and judging must fail the same way. The model is asked for an answer
matching the schema in the form the gateway's server takes (`Gateway.complete_structured`:
`response_format` json_schema on OpenRouter; on a local server json_schema, json_object with the
schema, or a forced tool call, learnt once per model from its refusals); the answer is parsed and
validated with pydantic (never scraped out of prose). An answer that does not
validate (not JSON, cut off by the token limit, wrong shape, unknown ids) is retried once with the
validation error fed back; a second failure raises `StructuredOutputInvalid`. Gateway failures
(after the gateway's own retries) raise `StructuredCallFailed`. Every call made is kept as a
`CallRecord` on the result or on the exception.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from research_dispatch.core.errors import GatewayError
from research_dispatch.core.redact import redact
from research_dispatch.core.sanitize import one_line
from research_dispatch.gateway.protocol import ModelGateway
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.synthesis.common.errors import StructuredCallFailed, StructuredOutputInvalid, TimeLimitReached

T = TypeVar("T", bound=BaseModel)
MAX_ATTEMPTS = 2  # the call, and one repair with the validation error fed back


@dataclass
class StructuredResult(Generic[T]):
    value: T
    records: list[CallRecord]


def validation_problem(exc: ValidationError) -> str:
    """The first few validation errors, one line each, for the repair prompt and the error message."""
    lines = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - len(lines)
    if more > 0:
        lines.append(f"... and {more} more")
    return "; ".join(lines)


def every_id_once(answered: list[str], ids: set[str] | None) -> None:
    """An answer that names items by the ids the question gave them names each exactly once (`ids`: the
    question's, from the validation context; None: not checked). ValueError saying which id is wrong."""
    seen: set[str] = set()
    for ident in answered:
        if ids is not None and ident not in ids:
            raise ValueError(f"unknown id {ident!r}")
        if ident in seen:
            raise ValueError(f"id {ident!r} is answered more than once")
        seen.add(ident)
    if ids is not None and seen != ids:
        raise ValueError(f"ids not answered: {', '.join(sorted(ids - seen))}")



class EachIdOnce(BaseModel):
    """An answer whose `checks` name the question's items by id, each exactly once (`every_id_once`, the ids
    from the validation context). A subclass declares `checks`: its item model and its bound."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("checks", check_fields=False)
    @classmethod
    def _every_id_once(cls, checks: list[Any], info: ValidationInfo) -> list[Any]:
        every_id_once([check.id for check in checks], (info.context or {}).get("ids"))
        return checks


def parse(content: str, model: type[T], context: dict[str, Any] | None, finish_reason: str | None) -> T:
    """Parse and validate one answer; raise ValueError with a one-line reason when it does not fit."""
    if finish_reason == "length":
        raise ValueError("the answer was cut off by the token limit (finish_reason=length); answer more briefly")
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON ({exc.msg} at character {exc.pos})") from None
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise ValueError(f"the answer does not match the schema: {validation_problem(exc)}") from None


def call_structured(gateway: ModelGateway, *, model: str, messages: list[dict[str, Any]], name: str,
                    schema: dict[str, Any], parser: type[T], purpose: str, session_id: str | None,
                    context: dict[str, Any] | None = None, subject: str = "",
                    deadline: float | None = None) -> StructuredResult[T]:
    """Ask for structured output; validate; repair once; raise a typed error otherwise.

    `deadline` (a `time.monotonic()` value) is the synthesis' overall time limit: no attempt starts
    after it, the gateway bounds each call by it, and a call it cuts short is `TimeLimitReached`.
    """
    records: list[CallRecord] = []
    history = list(messages)
    problem = ""
    output_cap: int | None = None  # the route's own; twice it to repair an answer the cap cut off
    for _attempt in range(MAX_ATTEMPTS):
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeLimitReached(f"{subject}: not done when the synthesis time limit was reached", records=records)
        try:
            completion = gateway.complete_structured(model=model, messages=history, name=name, schema=schema,
                                                     purpose=purpose, session_id=session_id, deadline=deadline,
                                                     max_completion_tokens=output_cap, spent=records.append)
        except GatewayError as exc:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeLimitReached(f"{subject}: not done when the synthesis time limit was reached",
                                       records=records) from None
            raise StructuredCallFailed(f"{subject}: gateway call failed: {redact(str(exc))}",
                                       records=records) from None
        records.append(completion.record)
        try:
            value = parse(completion.content, parser, context, completion.finish_reason)
        except ValueError as exc:
            problem = str(exc)
            if completion.finish_reason == "length":  # reasoning and answer share the cap: give both more room
                output_cap = 2 * gateway.reasoning_plan(model).output_cap
            # the rejected answer goes back as a canonical assistant turn: an empty one is left out
            # (strict servers refuse empty or null assistant content)
            rejected = ([{"role": "assistant", "content": completion.content[:20000]}]
                        if completion.content.strip() else [])
            history = [*history, *rejected,
                       {"role": "user", "content": f"Your answer was rejected: {problem}. Answer again with a "
                                                   "single JSON object that matches the schema exactly."}]
            continue
        return StructuredResult(value=value, records=records)
    raise StructuredOutputInvalid(f"{subject}: invalid structured output after {MAX_ATTEMPTS} attempts: "
                                  f"{one_line(problem, 300)}", records=records)
