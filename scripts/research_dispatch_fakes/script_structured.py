"""Scripted answers to structured-output calls (the synthesis stage), keyed by schema name.

The product asks for structured output with `response_format: {"type": "json_schema", "json_schema":
{"name": NAME, ...}}` (or, equivalently, by forcing a single tool call with `tool_choice: {"type":
"function", "function": {"name": NAME}}`). The fake gateway looks NAME up in `STRUCTURED_BEHAVIOURS`
and returns the behaviour's dict as the JSON content (or tool-call arguments) with finish_reason
`"stop"`.

The behaviours for `claim_extraction`, `claim_alignment`, `citation_check` and the follow-up questions
`position_check` and `citation_recheck` live in
`script_synthesis` (registered at the bottom of this module). Each behaviour receives the whole request
body (messages, schema, model), the quirks of the scenario rule that matched the call (`overstate`,
`misquote`: deliberate misbehaviours a test asks for) and the scenario's `realism` setting (`realism`:
the slips real models make, or None), and must be deterministic, so the synthesis benchmarks are
reproducible.

Fallback: an unknown or missing name answers `{}`. That is valid JSON, so the product's pydantic
validation (not a JSON parse error) is what fails, which is the realistic failure a model that
ignores the schema produces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from research_dispatch_fakes.realism import Realism

StructuredBehaviour = Callable[[dict[str, Any], frozenset[str], Realism | None], dict[str, Any]]

STRUCTURED_BEHAVIOURS: dict[str, StructuredBehaviour] = {}
STRUCTURED_QUIRKS = ("overstate", "misquote", "agreeable", "obedient")  # scenario-rule flags passed to the behaviours


def structured_name(body: dict[str, Any]) -> str | None:
    """The schema name a request asks for, or None when it is not a structured-output request.

    `response_format` json_schema wins; `json_object` is named by its `schema.title` (empty string
    without one); a forced function tool call that is not one of the researcher's own tools counts as
    structured output too.
    """
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        kind = response_format.get("type")
        if kind == "json_schema":
            schema = response_format.get("json_schema") or {}
            name = schema.get("name") if isinstance(schema, dict) else None
            return name if isinstance(name, str) else ""
        if kind == "json_object":  # llama-cpp-python's form: the schema rides along; its title names it
            schema = response_format.get("schema")
            title = schema.get("title") if isinstance(schema, dict) else None
            return title if isinstance(title, str) else ""
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function") or {}
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name not in ("web_search", "web_extract"):
            return name
    return None


def respond_structured(body: dict[str, Any], quirks: frozenset[str] = frozenset(),
                       realism: Realism | None = None) -> dict[str, Any]:
    """Run the registered behaviour for the request's schema name; unknown name -> `{}`."""
    name = structured_name(body) or ""
    behaviour = STRUCTURED_BEHAVIOURS.get(name)
    if behaviour is None:
        return {}
    return behaviour(body, quirks, realism)


def _register_synthesis() -> None:
    """The synthesis behaviours; imported here, at the end, because they are plain functions of the body."""
    from research_dispatch_fakes import script_synthesis

    STRUCTURED_BEHAVIOURS.setdefault("claim_extraction", script_synthesis.extract_claims)
    STRUCTURED_BEHAVIOURS.setdefault("claim_alignment",
                                     lambda body, _quirks, _realism: script_synthesis.align_claims(body))
    STRUCTURED_BEHAVIOURS.setdefault("citation_check", script_synthesis.check_citations)
    STRUCTURED_BEHAVIOURS.setdefault("citation_recheck", script_synthesis.recheck_citations)
    STRUCTURED_BEHAVIOURS.setdefault("position_check", script_synthesis.check_positions)


_register_synthesis()
