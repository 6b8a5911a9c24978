"""The forms a structured-output request can take, and which one a server takes.

Why: "structured output" is not one wire format. OpenRouter (and OpenAI, vLLM, LiteLLM) take
`response_format: {"type": "json_schema", "json_schema": {"name", "strict", "schema"}}`;
llama-cpp-python's server refuses that ("Input should be 'text' or 'json_object'") and takes
`{"type": "json_object", "schema": {...}}` instead; some servers take neither but do take a forced
tool call whose arguments follow the schema. The answer is validated by pydantic in every case
(`synthesis/common/calls.py`): the form only changes how the schema reaches the server and where the
JSON comes back (the content, or the forced call's arguments).

`[tool.research-dispatch.gateway] structured_output` names the form, or `auto` (the default): on
OpenRouter `json_schema` (its endpoints must list `structured_outputs`); on an `openai-compatible`
gateway the forms in `AUTO_ORDER`, each tried once per model per run until the server accepts one,
which is then used for that model from there on. A form the server refused is never sent again, and
a refused request is never retried unchanged.

The schema sent is generated from the pydantic model that validates the answer (`answer_schema`): one
definition of each answer, so the schema a model is asked to fill and the model that checks it cannot
drift apart.
"""

from __future__ import annotations

import enum
import threading
from typing import Any

from pydantic import BaseModel

from research_dispatch.core.errors import AuthenticationFailed, GatewayError, InsufficientCredits


class StructuredForm(str, enum.Enum):
    """How the schema is sent (the values are the configuration's `structured_output` values)."""

    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"  # with the schema in `response_format.schema` (llama-cpp-python)
    TOOL_CALL = "tool_call"  # one forced function call whose arguments are the answer


AUTO_ORDER = (StructuredForm.JSON_SCHEMA, StructuredForm.JSON_OBJECT, StructuredForm.TOOL_CALL)
"""What `auto` tries on an `openai-compatible` gateway, the most widely supported first."""

REFUSAL_STATUSES = frozenset({400, 404, 415, 422, 500, 501})
"""Statuses with which servers refuse a request body they do not understand (FastAPI-based servers
answer 422, or 500 through their own error handler)."""


class StructuredFormRefused(GatewayError):
    """The server refused the request in this structured-output form (not retried: it would be refused
    again); the next form may be tried."""

    def __init__(self, form: StructuredForm, cause: GatewayError) -> None:
        super().__init__(f"the server refused structured output as {form.value}: {cause}", status=cause.status,
                         error_type=cause.error_type, attempts=cause.attempts)
        self.form = form


def refuses_form(error: GatewayError) -> bool:
    """Is this failure the server refusing the request's shape (so another form may work)?"""
    if isinstance(error, (InsufficientCredits, AuthenticationFailed, StructuredFormRefused)):
        return False
    return error.status in REFUSAL_STATUSES and error.error_type not in ("timeout", "deadline", "connection")


def request_for(form: StructuredForm, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The `Gateway.complete` arguments that ask for an answer matching `schema` in this form."""
    if form is StructuredForm.JSON_SCHEMA:
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "strict": True, "schema": schema}}}
    if form is StructuredForm.JSON_OBJECT:  # the schema's title carries the name (json_object has no name)
        return {"response_format": {"type": "json_object", "schema": {**schema, "title": name}}}
    return {"tools": [{"type": "function", "function": {
        "name": name, "description": "Give the answer as this function's arguments.", "parameters": schema}}],
        "tool_choice": {"type": "function", "function": {"name": name}}}


def answer_text(form: StructuredForm, name: str, content: str, tool_calls: list[dict[str, Any]]) -> str:
    """The JSON text of the answer: the content, or the arguments of the forced call."""
    if form is StructuredForm.TOOL_CALL:
        for call in tool_calls:
            function = call.get("function") or {}
            if function.get("name") == name and isinstance(function.get("arguments"), str):
                return str(function["arguments"])
    return content


class FormMemory:
    """Per gateway (one run's leg or synthesis): the form each model takes, learnt from its refusals."""

    def __init__(self, configured: str, *, openrouter: bool) -> None:
        self._lock = threading.Lock()
        self._probes: dict[str, threading.Lock] = {}
        self._learnt: dict[str, StructuredForm] = {}
        self._refused: dict[str, set[StructuredForm]] = {}
        if configured != "auto":
            self._order: tuple[StructuredForm, ...] = (StructuredForm(configured),)
        else:
            self._order = (StructuredForm.JSON_SCHEMA,) if openrouter else AUTO_ORDER

    def candidates(self, model: str) -> list[StructuredForm]:
        """The forms to try for this model, in order: the learnt one alone, else those not yet refused."""
        with self._lock:
            if model in self._learnt:
                return [self._learnt[model]]
            refused = self._refused.get(model, set())
            return [form for form in self._order if form not in refused]

    def probing(self, model: str) -> bool:
        """Is no form known to work for this model yet (a refusal then teaches, and ends that form)?"""
        with self._lock:
            return model not in self._learnt and len(self._order) > 1

    def probe_lock(self, model: str) -> threading.Lock:
        """Held while a model's forms are tried, so parallel calls (the synthesis extracts reports in
        parallel) learn from the first one's refusals instead of each sending the refused form."""
        with self._lock:
            return self._probes.setdefault(model, threading.Lock())

    def accepted(self, model: str, form: StructuredForm) -> None:
        with self._lock:
            self._learnt.setdefault(model, form)

    def refused(self, model: str, form: StructuredForm) -> None:
        with self._lock:
            self._refused.setdefault(model, set()).add(form)


_KEPT = ("type", "enum")
"""What a generated schema keeps of a leaf: its type and its choices. Bounds (`maxLength`, `minItems`...),
titles and descriptions stay with pydantic, which validates every answer anyway: strict structured-output
servers refuse some of those keywords, and a bound the server enforces would cut an answer instead of
letting our validation say what was wrong (and ask again)."""


def answer_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict JSON schema of an answer, generated from the pydantic model that validates it.

    Strict structured output (OpenAI's `strict: true`, which OpenRouter passes on) wants every object
    closed (`additionalProperties: false`) with every property required, nested objects inline rather
    than `$ref`s, and a nullable field as a type list: `str | None` becomes `{"type": ["string",
    "null"]}`, a `Literal` or a string `Enum` `{"type": "string", "enum": [...]}`. Properties keep the
    model's field order, so the schema (and the prompt version hashed from it) is stable.
    """
    generated = model.model_json_schema()
    return _strict(generated, generated.get("$defs", {}))


def _strict(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        return _strict(definitions[node["$ref"].rsplit("/", 1)[-1]], definitions)
    if "anyOf" in node:
        branches = [_strict(branch, definitions) for branch in node["anyOf"]]
        if all(set(branch) == {"type"} and isinstance(branch["type"], str) for branch in branches):
            return {"type": [branch["type"] for branch in branches]}  # `str | None`: a type list
        return {"anyOf": branches}
    if node.get("type") == "object":
        properties = {name: _strict(value, definitions) for name, value in node.get("properties", {}).items()}
        return {"type": "object", "properties": properties, "required": list(properties),
                "additionalProperties": False}
    if node.get("type") == "array":
        return {"type": "array", "items": _strict(node.get("items", {}), definitions)}
    return {key: node[key] for key in _KEPT if key in node}
