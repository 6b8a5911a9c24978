"""Tool schemas every model accepts (issue 22 point 6): Google's function declarations take a subset.

The rules of `gateway/schemas.py` on the real AWS documentation MCP server's schemas (tests/data/mcp)
and on our own tools, as properties over generated schemas, and over HTTP: the gateway's converted
request is accepted by the strict fake (which refuses what Google refuses), the unconverted one is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from research_dispatch.core.retry import RetryPolicy
from research_dispatch.gateway.client import Gateway
from research_dispatch.gateway.schemas import google_schema, needs_google_schemas, tools_for_route
from research_dispatch.tools.mcp_servers import McpTool
from research_dispatch.tools.search import TOOL_SCHEMAS
from research_dispatch_fakes import strict
from research_dispatch_fakes.gateway import FakeGateway
from tests.profiles import examples

ROOT = Path(__file__).resolve().parent.parent
AWS = json.loads((ROOT / "tests" / "data" / "mcp" / "aws-documentation-mcp-server.tools.json").read_text("utf-8"))
GEMINI = "google/gemini-3.1-pro-preview"


def aws_tools() -> list[dict[str, Any]]:
    """The AWS server's tools as the researcher offers them (`McpTool.openai_schema`)."""
    return [McpTool(server="aws-docs", name=t["name"], description=t["description"], schema=t["inputSchema"],
                    listed=True).openai_schema() for t in AWS["tools"]]


def schema_of(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(t["function"]["parameters"] for t in tools if t["function"]["name"].endswith(name))


def test_the_fixture_has_what_google_refuses() -> None:
    problem = strict.gemini_schema_problem({"tools": aws_tools()})
    assert problem is not None
    assert ('Unknown name "exclusiveMinimum" at \'tools[0].function_declarations[0].parameters.properties[0].value\''
            in problem)
    assert strict.gemini_schema_problem({"tools": TOOL_SCHEMAS}) is not None  # additionalProperties: false


def test_converted_schemas_pass_and_keep_their_meaning() -> None:
    tools = tools_for_route(GEMINI, aws_tools())
    assert strict.gemini_schema_problem({"tools": tools}) is None
    max_length = schema_of(tools, "read_documentation")["properties"]["max_length"]
    assert (max_length["minimum"], max_length["maximum"], max_length["default"]) == (1, 999_999, 5000)
    section = schema_of(tools, "search_table")["properties"]["section_title"]
    assert section["type"] == "string" and section["nullable"] is True and "anyOf" not in section
    guides = schema_of(tools, "search_documentation")["properties"]["guide_types"]
    assert guides["type"] == "array" and guides["items"] == {"type": "string"} and guides["nullable"] is True
    ours = tools_for_route(GEMINI, TOOL_SCHEMAS)
    assert strict.gemini_schema_problem({"tools": ours}) is None
    search = schema_of(ours, "web_search")
    assert "additionalProperties" not in search and search["required"] == ["query"]
    assert search["description"] == "No fields other than those listed."


def test_other_routes_get_the_schemas_unchanged() -> None:
    for model in ("deepseek/deepseek-v4-pro", "anthropic/claude-sonnet-4.6", "openai/gpt-5"):
        assert tools_for_route(model, aws_tools()) == aws_tools()
    assert needs_google_schemas("google/gemma-3-27b-it") and not needs_google_schemas("googleish/model")


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "number", "exclusiveMinimum": 0.5}, {"type": "number", "minimum": 0.5,
                                                   "description": "Must be greater than 0.5."}),
    ({"type": "integer", "minimum": 3, "exclusiveMinimum": True}, {"type": "integer", "minimum": 4}),
    ({"type": "integer", "exclusiveMaximum": 2.5}, {"type": "integer", "maximum": 2}),
    ({"const": "fixed"}, {"enum": ["fixed"]}),
    ({"enum": [1, 2]}, {"description": "One of: 1, 2."}),
    ({"type": ["string", "null"], "format": "uri"},
     {"type": "string", "nullable": True, "description": "Format: uri."}),
    ({"oneOf": [{"type": "string"}, {"type": "integer", "multipleOf": 5}]},
     {"anyOf": [{"type": "string"}, {"type": "integer", "description": "A multiple of 5."}]}),
    ({"$defs": {"U": {"type": "string", "description": "A URL."}}, "type": "object",
      "properties": {"u": {"$ref": "#/$defs/U"}}, "$schema": "https://json-schema.org/draft/2020-12/schema"},
     {"type": "object", "properties": {"u": {"type": "string", "description": "A URL."}}}),
    ({"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]}], "type": "object"},
     {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "required": ["a", "b"]}),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True, "examples": [["x"]]},
     {"type": "array", "items": {"type": "string"}, "example": ["x"], "description": "Items must be unique."}),
    ({"type": "object", "properties": {}, "additionalProperties": True}, {"type": "object"}),
    ({"type": "string", "description": "Name.", "not": {"const": ""}}, {"type": "string",
                                                                        "description": 'Name. not: {"const": ""}.'}),
], ids=["exclusive number", "draft-4 exclusive integer", "exclusive max integer", "const", "number enum",
        "nullable type list", "oneOf", "$ref", "allOf", "array keywords", "open object", "other keyword"])
def test_each_rewrite(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    assert google_schema(schema) == expected


KEYWORDS = st.sampled_from(["additionalProperties", "exclusiveMinimum", "exclusiveMaximum", "const", "multipleOf",
                            "uniqueItems", "format", "examples", "$schema", "$comment", "patternProperties",
                            "minimum", "maximum", "title", "default", "readOnly", "deprecated", "minLength"])
SCALARS = st.one_of(st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.text(max_size=6))
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.builds(lambda t, extra: {"type": t, **extra}, st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3)),
                     st.dictionaries(KEYWORDS, SCALARS, max_size=4))
    return st.recursive(leaf, lambda inner: st.one_of(
        st.builds(lambda props, extra: {"type": "object", "properties": props, **extra},
                  st.dictionaries(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), inner, max_size=3),
                  st.dictionaries(KEYWORDS, SCALARS, max_size=3)),
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda branches: {"anyOf": branches}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda branches: {"oneOf": branches}, st.lists(inner, min_size=1, max_size=3))), max_leaves=8)


@settings(max_examples=examples(100), deadline=None)
@given(schemas())
# Found at random by a contributor's run (issue 28): a null branch with another key converted to `nullable`
# only on the second pass.
@example({"anyOf": [{"type": "string"}, {"type": "null", "additionalProperties": True}]})
@example({"anyOf": [{"type": "string"}, {"type": ["null"]}]})
@example({"anyOf": [{"type": ["null"]}, {"anyOf": [{"type": "string"}, {"type": "null"}]}]})
@example({"oneOf": [{"type": "null", "title": "none"}, {"type": "integer", "exclusiveMinimum": 0}]})
def test_every_converted_schema_is_one_google_accepts_and_converting_again_changes_nothing(schema: dict) -> None:
    converted = google_schema(schema)
    tool = {"type": "function", "function": {"name": "t", "parameters": converted}}
    assert strict.gemini_schema_problem({"tools": [tool]}) is None, (schema, converted)
    assert google_schema(converted) == converted


@given(st.integers(-50, 50), st.integers(-50, 50), st.booleans())
def test_an_integer_exclusive_bound_admits_exactly_the_same_integers(bound: int, value: int, upper: bool) -> None:
    key, inclusive = ("exclusiveMaximum", "maximum") if upper else ("exclusiveMinimum", "minimum")
    converted = google_schema({"type": "integer", key: bound})
    allowed_before = value < bound if upper else value > bound
    allowed_after = value <= converted[inclusive] if upper else value >= converted[inclusive]
    assert allowed_before == allowed_after


# ---------------------------------------------------------------------------------------------
# over HTTP: the real openai client against the strict fake
# ---------------------------------------------------------------------------------------------
def test_a_gemini_leg_s_tools_are_accepted_converted_and_refused_as_they_are() -> None:
    with FakeGateway() as fake:
        tools = [*TOOL_SCHEMAS, *aws_tools()]
        messages = [{"role": "user", "content": "Topic id: t\nTitle: T\nResearch brief:\nAWS docs.\n"}]
        with Gateway(api_key="sk-or-test", base_url=fake.base_url,
                     retry=RetryPolicy(max_retries=0, sleep=lambda _s: None)) as gateway:
            completion = gateway.complete(model=GEMINI, messages=messages, tools=tools)
        assert completion.tool_calls  # the scripted model answered: the request was accepted
        sent = fake.completions[-1]["request"]["tools"]
        assert strict.gemini_schema_problem({"tools": sent}) is None
        with openai.OpenAI(base_url=fake.base_url, api_key="sk-or-test", max_retries=0) as client, \
                pytest.raises(openai.BadRequestError, match="Provider returned error") as refused:
            client.chat.completions.create(model=GEMINI, messages=messages, tools=tools)  # type: ignore[arg-type]
        body = refused.value.body
        assert isinstance(body, dict)
        assert 'Unknown name "additionalProperties"' in body["metadata"]["raw"]
        assert 'Unknown name "exclusiveMaximum"' in body["metadata"]["raw"]
