"""Tool parameter schemas in the dialect the route's model accepts.

Why: tool schemas (ours, and every MCP server's own) are JSON Schema, and most providers take them as
they are. Google's function declarations do not: `parameters` is a Schema object, "a select subset of
an OpenAPI 3.0 schema object" (Gemini API and Vertex AI references, `Schema`), and a request whose
schema carries any other keyword is refused with 400 `Invalid JSON payload received. Unknown name
"additionalProperties" at 'tools[0].function_declarations[0].parameters': Cannot find field.` — the
real AWS documentation MCP server's `read_documentation` (its `exclusiveMinimum`/`exclusiveMaximum`,
tests/data/mcp) and our own tools (`additionalProperties: false`) would each fail a Gemini leg at its
first call. So for a `google/*` model every schema is rewritten into that subset, keeping its meaning:

* what the subset can say is said in it: `const` as a one-value `enum`; `oneOf` as `anyOf`; `allOf`
  merged; a local `$ref` inlined (its `$defs` dropped); a type list with `null` as `nullable`;
  `anyOf` with a `{"type": "null"}` branch as the other branch, `nullable`; an exclusive bound on an
  integer as the inclusive one next to it; `examples` as `example`;
* what it cannot say goes into the `description` the model reads, in words (`additionalProperties`,
  an exclusive bound on a number, `multipleOf`, `uniqueItems`, a `format` Google does not take, a
  non-string `enum`, any other keyword as `name: value`), so the model still knows the rule — and the
  tool's own argument validation still enforces it on our side.

Other routes get the schemas unchanged. Pure functions over JSON values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

GOOGLE_SCHEMA_FIELDS = frozenset({
    "anyOf", "default", "description", "enum", "example", "format", "items", "maximum", "maxItems",
    "maxLength", "maxProperties", "minimum", "minItems", "minLength", "minProperties", "nullable", "pattern",
    "properties", "propertyOrdering", "required", "title", "type"})
"""The fields of Google's `Schema` (the Gemini API's and Vertex AI's, and their official SDKs' `Schema`
type): the only keywords a Gemini function declaration's `parameters` may carry."""

GOOGLE_FORMATS = frozenset({"enum", "date-time"})
"""`format` values the Gemini API accepts for function parameters (any other fails the request)."""

_DROPPED_SILENTLY = frozenset({"$schema", "$id", "$comment", "$anchor", "$defs", "definitions"})
"""Keywords with no meaning for the model (or inlined already, `$defs`): removed without a note."""

_MAX_REF_DEPTH = 8
_NOTE_CHARS = 160


def needs_google_schemas(model: str) -> bool:
    """Does this route's model take Google's schema subset? (`google/*`: Gemini and Gemma.)"""
    return model.strip().lower().split("/", 1)[0] == "google"


def tools_for_route(model: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool list as the route's model accepts it: for a Google model every function's parameters in
    Google's subset (`google_schema`); for any other model, the same list."""
    if not needs_google_schemas(model):
        return tools
    converted = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("parameters"), Mapping):
            converted.append(tool)
            continue
        converted.append({**tool, "function": {**function, "parameters": google_schema(function["parameters"])}})
    return converted


def google_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """One JSON Schema in Google's subset, with the same meaning (the module docstring's rules)."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            defs.update({f"#/{key}/{name}": value for name, value in schema[key].items()})
    return _convert(schema, defs, 0)


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= _NOTE_CHARS else text[:_NOTE_CHARS - 1] + "…"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> tuple[dict[str, Any], list[str]]:
    """`schema` with a local `$ref` inlined (its own keys win, as JSON Schema 2020-12 reads siblings)."""
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return dict(schema), []
    rest = {k: v for k, v in schema.items() if k != "$ref"}
    target = defs.get(ref)
    if not isinstance(target, Mapping) or depth >= _MAX_REF_DEPTH:
        return rest, [f"Refers to {ref} (a nested or recursive structure)."]
    merged, notes = _resolve(target, defs, depth + 1)
    merged.update(rest)
    return merged, notes


def _merge_all_of(schema: dict[str, Any]) -> dict[str, Any]:
    """`allOf` folded into the schema: properties and required united, other keys the first's."""
    parts = schema.pop("allOf")
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, Mapping):
            continue
        for key, value in part.items():
            if key == "properties" and isinstance(value, Mapping):
                schema["properties"] = {**value, **(schema.get("properties") or {})}
            elif key == "required" and isinstance(value, list):
                schema["required"] = sorted(set(schema.get("required") or []) | set(value))
            else:
                schema.setdefault(key, value)
    return schema


def _nullable_branch(branches: list[Any]) -> Any | None:
    """The one non-null branch of `anyOf: [X, {"type": "null", ...}]`, or None when it is not that shape.

    A branch is the null branch by its type alone: whatever else it carries (`additionalProperties`, a
    title) says nothing about the value null. Recognising only a bare `{"type": "null"}` made the
    conversion change its own output — the first pass stripped the extra keys and kept `anyOf`, the
    second then saw a bare null branch and made it `nullable` (found by the property that converting
    twice changes nothing, tests/test_tool_schemas.py; `{"type": ["null"]}` by its thorough profile)."""
    others = [b for b in branches if not _is_null(b)]
    return others[0] if len(branches) == 2 and len(others) == 1 else None


def _is_null(branch: Any) -> bool:
    """A branch that admits only null: `type` "null", or a type list of nothing but "null"."""
    kind = branch.get("type") if isinstance(branch, Mapping) else None
    return kind == "null" or (isinstance(kind, list) and bool(kind) and all(t == "null" for t in kind))


def _bound(out: dict[str, Any], schema: Mapping[str, Any], exclusive: str, inclusive: str, word: str,
           step: int, notes: list[str]) -> None:
    """An exclusive bound (2020-12 number, or draft-4 boolean beside the inclusive one) in the subset:
    on an integer the inclusive bound next to it; on a number the inclusive one, and the strictness said."""
    raw = schema.get(exclusive)
    if raw is True and _number(schema.get(inclusive)):
        raw = schema[inclusive]
        out.pop(inclusive, None)
    value = _finite(raw)
    if value is None:
        return
    if out.get("type") == "integer":
        limit = math.floor(value) + 1 if step > 0 else math.ceil(value) - 1
        current = _finite(out.get(inclusive))
        if current is not None and (current > limit if step > 0 else current < limit):
            return  # both bounds given and the inclusive one is already tighter: it holds
        out[inclusive] = limit
    else:
        out.setdefault(inclusive, raw)
        notes.append(f"Must be {word} than {value:g}.")


def _finite(value: Any) -> float | None:
    return float(value) if _number(value) else None


def _convert(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> dict[str, Any]:
    """One schema node in Google's subset: its nullability and type list first, then each keyword kept,
    rewritten or said in the description, then the bounds once the type is known."""
    source, notes = _unwrapped(schema, defs, depth)
    out: dict[str, Any] = {}
    for key, value in source.items():
        _convert_keyword(key, value, out, notes, defs, depth)
    _bound(out, source, "exclusiveMinimum", "minimum", "greater", 1, notes)
    _bound(out, source, "exclusiveMaximum", "maximum", "less", -1, notes)
    if notes:
        described = str(out.get("description") or "").rstrip()
        out["description"] = " ".join(([described] if described else []) + notes)
    return out


def _unwrapped(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> tuple[dict[str, Any], list[str]]:
    """The node resolved, `allOf` merged, `oneOf` read as `anyOf`, every nullable `anyOf` at the top unwrapped
    into `nullable` (`anyOf: [null, anyOf: [X, null]]` is X, nullable), and a type list made one type (or
    an `anyOf` of types), nullable when it listed null."""
    source, notes = _resolve(schema, defs, depth)
    while True:
        if "allOf" in source:
            source = _merge_all_of(source)
        if "oneOf" in source and "anyOf" not in source:
            source["anyOf"] = source.pop("oneOf")
        branches = source.get("anyOf")
        if not isinstance(branches, list) or (single := _nullable_branch(branches)) is None:
            break
        inner, inner_notes = _resolve(single, defs, depth) if isinstance(single, Mapping) else ({}, [])
        source = {**inner, **{k: v for k, v in source.items() if k != "anyOf"}, "nullable": True}
        notes = inner_notes + notes
    kind = source.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        if len(types) < len(kind):
            source["nullable"] = True
        if len(types) <= 1:
            source["type"] = types[0] if types else "null"
        else:
            source.pop("type")
            source.setdefault("anyOf", [{"type": t} for t in types])
    return source, notes


def _convert_keyword(key: str, value: Any, out: dict[str, Any], notes: list[str], defs: Mapping[str, Any],
                     depth: int) -> None:
    """One keyword of a node: into `out` as Google takes it, or into `notes` (the description) when it
    cannot be said in the subset; bounds wait for `_bound`."""
    if key == "properties" and isinstance(value, Mapping):
        if value:
            out[key] = {name: _convert(sub, defs, depth) if isinstance(sub, Mapping) else sub
                        for name, sub in value.items()}
    elif key == "items" and isinstance(value, Mapping):
        out[key] = _convert(value, defs, depth)
    elif key == "anyOf" and isinstance(value, list):
        out[key] = [_convert(b, defs, depth) if isinstance(b, Mapping) else b for b in value]
    elif key == "enum" and isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            out[key] = value
        else:
            notes.append(f"One of: {', '.join(_show(v) for v in value)}.")
    elif key == "format":
        if value in GOOGLE_FORMATS:
            out[key] = value
        else:
            notes.append(f"Format: {value}.")
    elif key in GOOGLE_SCHEMA_FIELDS:
        out[key] = value
    elif key in _DROPPED_SILENTLY or key in ("exclusiveMinimum", "exclusiveMaximum"):
        return  # bounds: `_bound`, with the type known
    elif key == "const":
        if isinstance(value, str):
            out["enum"] = [value]
        else:
            notes.append(f"Always {_show(value)}.")
    elif key == "examples" and isinstance(value, list) and value:
        out.setdefault("example", value[0])
    else:
        _note_keyword(key, value, notes)


def _note_keyword(key: str, value: Any, notes: list[str]) -> None:
    """A keyword Google's subset has no field for, said in words."""
    if key == "additionalProperties":
        if value is False:
            notes.append("No fields other than those listed.")
        elif isinstance(value, Mapping) and value:
            notes.append(f"Other fields allowed, each {_show(value)}.")
    elif key == "multipleOf":
        notes.append(f"A multiple of {_show(value)}.")
    elif key == "uniqueItems" and value is True:
        notes.append("Items must be unique.")
    else:
        notes.append(f"{key}: {_show(value)}.")
