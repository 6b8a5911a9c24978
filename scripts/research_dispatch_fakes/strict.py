"""The rules real model gateways and providers enforce on a chat request, as the fake gateway checks them.

Why a module of its own: each rule here is one a real service applies and a lenient fake would let
through, so a product bug would pass every test and break on first contact (issue "Works against the
real services as they are documented"). Each rule cites where it comes from:

* `require_parameters` (OpenRouter provider-selection docs, OpenAPI `ProviderPreferences` and the
  `Parameter` enum): with `provider.require_parameters: true` only endpoints whose
  `supported_parameters` list EVERY parameter sent may serve; none left is a 404 "No endpoints found that
  can handle the requested parameters". `max_tokens` and `max_completion_tokens` are different entries;
  a `json_schema` `response_format` also needs `structured_outputs` (structured-outputs docs).
* Assistant turns (OpenRouter OpenAPI `ChatAssistantMessage`, and strict OpenAI-compatible servers such
  as llama-cpp-python's, whose request models reject unknown fields and `content: null`): only the
  documented fields; `content` a string or content parts, never null; a turn without content must call
  tools; Anthropic refuses an empty or whitespace-only text turn.
* Tool results (OpenAI / OpenRouter): every `tool` message answers a `tool_call_id` of the assistant turn
  right before it, and every tool call of that turn is answered before the conversation goes on.
* Thought signatures (public issue threads of many projects hitting Google's 400 through OpenRouter):
  Gemini 3 models return `reasoning_details` with an encrypted signature per tool call, and refuse the
  next request unless each assistant tool-call turn carries them back verbatim.

* Google's function declarations (Gemini API and Vertex AI references, `Schema`: "a select subset of an
  OpenAPI 3.0 schema object"; the refusal text as public issue threads of many projects quote it): a
  `google/*` model's tool `parameters` may carry only the `Schema` fields (`GEMINI_SCHEMA_FIELDS`), a
  `type` that is one string, string `enum` values and a `format` of `enum` or `date-time`; anything else
  is 400 `Invalid JSON payload received. Unknown name "additionalProperties" at
  'tools[0].function_declarations[0].parameters': Cannot find field.`, one line per violation.

Pure functions over the parsed request; imports nothing of the product.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any

PARAMETERS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "top_a", "frequency_penalty", "presence_penalty",
    "repetition_penalty", "max_tokens", "max_completion_tokens", "logit_bias", "logprobs", "top_logprobs",
    "prediction", "seed", "response_format", "structured_outputs", "stop", "tools", "tool_choice",
    "parallel_tool_calls", "include_reasoning", "reasoning", "reasoning_effort", "web_search_options",
    "verbosity"})
"""OpenRouter's OpenAPI `Parameter` enum: the request parameters `supported_parameters` speaks about."""

STANDARD_PARAMETERS = ("frequency_penalty", "max_completion_tokens", "max_tokens", "presence_penalty",
                       "reasoning", "response_format", "seed", "stop", "structured_outputs", "temperature",
                       "tool_choice", "tools", "top_p")
MAX_TOKENS_ONLY_PARAMETERS = ("frequency_penalty", "include_reasoning", "max_tokens", "presence_penalty",
                              "reasoning", "response_format", "stop", "structured_outputs", "temperature",
                              "tool_choice", "tools", "top_p")
"""Like DeepSeek's endpoints (docs/REAL-SERVICES.md § OpenRouter): the output cap only as `max_tokens`."""

NO_ENDPOINTS_FOR_PARAMETERS = "No endpoints found that can handle the requested parameters."

ASSISTANT_FIELDS = frozenset({"role", "content", "name", "tool_calls", "reasoning", "reasoning_details",
                              "refusal", "audio", "images", "model"})
"""`ChatAssistantMessage` properties in OpenRouter's OpenAPI description; anything else (`function_call`,
`annotations`, ...) is refused the way a strict server refuses it."""

TOOL_CALL_FIELDS = frozenset({"id", "type", "function", "index"})
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})

THOUGHT_SIGNATURE_MODELS = "google/gemini-3*"
THOUGHT_SIGNATURE_FORMAT = "google-gemini-v1"
_SIGNING_KEY = b"research-dispatch fake gemini thought signatures"
GEMINI_MISSING_SIGNATURE = (
    "Gemini models require OpenRouter reasoning details to be preserved in each request. Please refer to our "
    "docs: https://openrouter.ai/docs/guides/best-practices/reasoning-tokens#preserving-reasoning-blocks. "
    "Upstream error: {\"error\": {\"code\": 400, \"message\": \"Function call is missing a thought_signature in "
    "functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead "
    "to degraded model performance. Additional data, function call `default_api:%s` , position %d.\", "
    "\"status\": \"INVALID_ARGUMENT\"}}")
GEMINI_CORRUPTED_SIGNATURE = "Corrupted thought signature."


def sent_parameters(body: Mapping[str, Any]) -> frozenset[str]:
    """The `supported_parameters` entries a request needs from an endpoint."""
    sent = {key for key in body if key in PARAMETERS and body[key] is not None}
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping) and response_format.get("type") == "json_schema":
        sent.add("structured_outputs")
    return frozenset(sent)


def requires_thought_signatures(model: str) -> bool:
    return fnmatch.fnmatchcase(model.split(":", 1)[0].lower(), THOUGHT_SIGNATURE_MODELS)


def thought_signature(call_id: str, name: str, arguments: str) -> str:
    """The opaque signature the fake "Gemini" attaches to a tool call (deterministic, so stateless)."""
    digest = hmac.new(_SIGNING_KEY, f"{call_id}\n{name}\n{arguments}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def reasoning_details_for(calls: Iterable[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """`reasoning_details` for a turn of (id, name, arguments) tool calls: one encrypted signature each."""
    return [{"type": "reasoning.encrypted", "data": thought_signature(call_id, name, arguments), "id": call_id,
             "format": THOUGHT_SIGNATURE_FORMAT, "index": index}
            for index, (call_id, name, arguments) in enumerate(calls)]


def _call_facts(call: Any) -> tuple[str, str, str]:
    function = call.get("function") if isinstance(call, Mapping) else None
    function = function if isinstance(function, Mapping) else {}
    return (str(call.get("id") or "") if isinstance(call, Mapping) else "", str(function.get("name") or ""),
            str(function.get("arguments") or ""))


def signature_problem(messages: list[Any]) -> str | None:
    """Why a Gemini 3 request is refused for its thought signatures, or None."""
    position = 0
    for message in messages:
        position += 1
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        details = message.get("reasoning_details")
        signed = {}
        if isinstance(details, list):
            signed = {str(d.get("id")): d.get("data") for d in details
                      if isinstance(d, Mapping) and d.get("type") == "reasoning.encrypted"}
        for call in message.get("tool_calls") or []:
            call_id, name, arguments = _call_facts(call)
            if call_id not in signed:
                return GEMINI_MISSING_SIGNATURE % (name, position)
            if signed[call_id] != thought_signature(call_id, name, arguments):
                return GEMINI_CORRUPTED_SIGNATURE
    return None


def message_problem(messages: list[Any], model: str) -> str | None:
    """Why a strict server refuses this conversation, or None (see the module docstring for the rules)."""
    pending: dict[str, int] = {}  # tool calls of the last assistant turn still to be answered
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            return f"{where}: must be an object"
        role = message.get("role")
        if role not in ROLES:
            return f"{where}.role: {role!r} is not one of {sorted(ROLES)}"
        if role != "tool" and pending:
            return _unanswered(pending)
        if role == "tool":
            problem = _tool_result_problem(where, message, pending)
        elif role == "assistant":
            problem = _assistant_problem(where, message, model, pending)
        else:
            problem = f"{where}.content: field required" if message.get("content") is None else None
        if problem is not None:
            return problem
    return _unanswered(pending) if pending else None


def _unanswered(pending: dict[str, int]) -> str:
    return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(sorted(pending))}")


def _tool_result_problem(where: str, message: Mapping[str, Any], pending: dict[str, int]) -> str | None:
    """A tool message answers one pending call of the assistant turn before it, with a string or parts."""
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or call_id not in pending:
        return (f"{where}: messages with role 'tool' must be a response to a preceding message with "
                f"'tool_calls' (unknown tool_call_id {str(call_id)[:80]!r})")
    if not isinstance(message.get("content"), (str, list)):
        return f"{where}.content: a tool result must be a string or content parts"
    del pending[call_id]
    return None


def _assistant_problem(where: str, message: Mapping[str, Any], model: str, pending: dict[str, int]) -> str | None:
    """An assistant turn: known fields only, content that is a string or parts (never null; never empty
    text alone on Anthropic) or tool calls, each well formed; its calls become pending."""
    unknown = sorted(set(message) - ASSISTANT_FIELDS)
    if unknown:
        return f"{where}: unknown or deprecated field(s) for an assistant message: {', '.join(unknown)}"
    calls = message.get("tool_calls")
    if calls is not None and (not isinstance(calls, list) or not calls):
        return f"{where}.tool_calls: must be a non-empty list when present"
    if "content" in message:
        content = message["content"]
        if content is None:
            return f"{where}.content: null is not accepted; omit the key when the turn only calls tools"
        if not isinstance(content, (str, list)):
            return f"{where}.content: must be a string or a list of content parts"
        if model.lower().startswith("anthropic/") and isinstance(content, str) and not content.strip() \
                and not calls:  # an empty text-only turn can only become an empty text block
            return f"{where}: text content blocks must contain non-whitespace text"
    elif not calls:
        return f"{where}: an assistant message needs content or tool_calls"
    for number, call in enumerate(calls or []):
        problem = _call_problem(f"{where}.tool_calls[{number}]", call)
        if problem is not None:
            return problem
        pending[call["id"]] = number
    return None


def _call_problem(where: str, call: Any) -> str | None:
    """One tool call: an object with an id, type 'function' and function {name, arguments: a JSON string}."""
    if not isinstance(call, Mapping):
        return f"{where}: must be an object"
    extra = sorted(set(call) - TOOL_CALL_FIELDS)
    if extra:
        return f"{where}: unknown field(s) {', '.join(extra)}"
    function = call.get("function")
    if call.get("type") != "function" or not isinstance(call.get("id"), str) or not call.get("id") \
            or not isinstance(function, Mapping) or not isinstance(function.get("name"), str) \
            or not isinstance(function.get("arguments"), str):
        return f"{where}: needs id, type 'function' and function {{name, arguments}} with arguments a JSON string"
    return None


GEMINI_SCHEMA_MODELS = "google/*"
GEMINI_SCHEMA_FIELDS = frozenset({
    "anyOf", "default", "description", "enum", "example", "format", "items", "maximum", "maxItems",
    "maxLength", "maxProperties", "minimum", "minItems", "minLength", "minProperties", "nullable", "pattern",
    "properties", "propertyOrdering", "required", "title", "type"})
"""The fields of Google's `Schema` object (its API references and official SDKs list exactly these)."""
GEMINI_FORMATS = frozenset({"enum", "date-time"})
GEMINI_UNKNOWN_NAME = "Invalid JSON payload received. Unknown name \"%s\" at '%s': Cannot find field."
GEMINI_INVALID_VALUE = "Invalid value at '%s' (%s), %s"


def takes_gemini_schemas(model: str) -> bool:
    return fnmatch.fnmatchcase(model.split(":", 1)[0].lower(), GEMINI_SCHEMA_MODELS)


def _gemini_violations(schema: Any, where: str) -> list[str]:
    if not isinstance(schema, Mapping):
        return [GEMINI_INVALID_VALUE % (where, "type.googleapis.com/google.ai.generativelanguage.v1beta.Schema",
                                        _shown(schema))]
    problems = [GEMINI_UNKNOWN_NAME % (key, where) for key in schema if key not in GEMINI_SCHEMA_FIELDS]
    kind = schema.get("type")
    if "type" in schema and not isinstance(kind, str):
        problems.append(GEMINI_INVALID_VALUE % (f"{where}.type", "TYPE_UNSPECIFIED", _shown(kind)))
    enum = schema.get("enum")
    if isinstance(enum, list) and not all(isinstance(v, str) for v in enum):
        problems.append(GEMINI_INVALID_VALUE % (f"{where}.enum[0]", "TYPE_STRING", _shown(enum)))
    if "format" in schema and schema["format"] not in GEMINI_FORMATS:
        problems.append(GEMINI_INVALID_VALUE % (f"{where}.format", "TYPE_STRING", "only 'enum' and 'date-time' "
                                                f"are supported, not {_shown(schema['format'])}"))
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for index, value in enumerate(properties.values()):
            problems += _gemini_violations(value, f"{where}.properties[{index}].value")
    if "items" in schema:
        problems += _gemini_violations(schema["items"], f"{where}.items")
    for index, branch in enumerate(schema.get("anyOf") or [] if isinstance(schema.get("anyOf"), list) else []):
        problems += _gemini_violations(branch, f"{where}.any_of[{index}]")
    return problems


def _shown(value: Any) -> str:
    return repr(value)[:80]


def gemini_schema_problem(body: Mapping[str, Any]) -> str | None:
    """Why Google refuses the request's tool schemas (one line per violation), or None."""
    tools = body.get("tools")
    problems: list[str] = []
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and "parameters" in function:
            problems += _gemini_violations(function["parameters"],
                                           f"tools[0].function_declarations[{index}].parameters")
    return "\n".join(problems) or None
